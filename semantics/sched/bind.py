"""bind(loop, kind): retype one loop to a hardware axis or a rendering choice, in place.

Kinds (stored in ``Loop.binding``): ``grid0``..``grid2`` and ``block0``..``block2``
(positional slots: 0 is x, 1 is y, 2 is z), ``warp``, ``lane``, ``vector``, ``unrolled``,
``core``; ``serial`` removes the binding. The loop keeps its kind (parallel / serial /
reduce / pipeline), start, extent, body and name, so tau is the identity: binding changes
how the iterations run, never which ones (``coverage`` holds by construction).

Preconditions (``ScheduleError`` otherwise): ``kind`` is one of the above; a hardware kind
(grid / block / warp / lane) needs the loop to start at 0.

Legality: with ``I`` the loop's iterations and ``W(i)``, ``A(i)`` the cells iteration ``i``
writes and accesses,

- a parallel kind (grid, block, warp, lane, core, vector) runs distinct iterations
  concurrently, so it lists ``noninterference``:
  ``forall i != i' in I: W(i) ∩ A(i') = ∅`` (per barrier phase for block / warp / lane).
  A reduce loop's updates commute for reordering, never for parallelization: binding one
  lists this obligation and the checker disproves it. A serial or pipeline loop also lists
  ``dependence``: no dependence is carried by the loop (its order was part of its meaning).
  Each parallel kind also lists ``containment``: along every path of the loop tree bound
  levels nest as ``bindings.CONTAINMENT`` orders them (grid > block > warp > lane > vector,
  core > vector), no hardware slot repeated.
- a hardware kind lists ``hardware_limits``: the extent fits the target's limit for the slot.
- block / warp / lane over barriers lists ``barrier_uniform`` (each barrier inside is reached
  by all iterations of its scope or by none); rebinding such a loop to a kind that is not a
  thread scope lists ``dependence`` (the order its barriers imposed holds sequentially).
- ``unrolled`` and ``serial`` run each iteration once, in order, which every loop kind
  admits: no obligation.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from .. import ir
from . import args as A
from .registry import schedule_op
from .. import loopir as L
from ..index import IConst
from ..bindings import DEFAULT_TARGET, HARDWARE_INDICES, SCOPES, SLOTTED, THREAD_SCOPES, Target
from .base import ScheduleError, enclosing, replace_loop, the_loop, with_body
from ..transform import Kind, Obligation, Tau, Transformed

KINDS = tuple(f"{k}{s}" for k in SLOTTED for s in range(3)) + ("warp", "lane", "vector", "unrolled", "core", "serial")
SLOT_HINT = "name the slot: grid0 / block0 is x, 1 is y, 2 is z"
PARALLEL_KINDS = SCOPES


def limit_text(kind: str, target: Target = DEFAULT_TARGET) -> str:
    """The hardware limit a loop bound to ``kind`` must fit, in words, from ``target``."""
    threads = f"the launch's threads per block <= {target.max_threads_per_block}"
    if kind == "warp":
        return f"{target.warp_size} x warps: {threads}"
    what = f"extent <= {target.limit(kind)}"
    return what if kind.startswith("grid") else f"{what} and {threads}"


def _bound(loops: list) -> str:
    return ", ".join(f"{lp.name}={lp.binding}" for lp in loops
                     if isinstance(lp, L.Loop) and L.binding_kind(lp.binding) in PARALLEL_KINDS) or "none"


@schedule_op("bind", [A.LoopName(), A.Enum(KINDS, hints={k: SLOT_HINT for k in SLOTTED})])
def bind(p: ir.Program, loop: str, kind: str) -> Transformed:
    lp = the_loop(p, loop, "bind")
    base = L.binding_kind(kind)
    if base in HARDWARE_INDICES and lp.start != IConst(0):
        raise ScheduleError(f"bind: hardware-bound loop {loop!r} must start at 0 (it starts at {lp.start})",
                            hint="bind the loop before partitioning it, or bind a segment that starts at 0")
    binding: Optional[str] = None if kind == "serial" else kind
    has_barrier = any(isinstance(st, L.Barrier) for st in ir.walk(lp.body))
    obligations: list[Obligation] = []
    if base in PARALLEL_KINDS:
        phase = " in each barrier phase" if base in THREAD_SCOPES else ""
        obligations.append(Obligation(
            Kind.NONINTERFERENCE, "bind", f"distinct iterations of {loop!r} (a {lp.kind} loop, now run as {kind}) "
            f"touch no common cell that one of them writes{phase}", (loop,)))
        if lp.kind in ("serial", "pipeline"):
            obligations.append(Obligation(Kind.DEPENDENCE, "bind", f"{loop!r} carries no dependence: its {lp.kind} "
                                          "order is no longer kept", (loop,)))
        path = enclosing(p.body, lp) or []
        obligations.append(Obligation(
            Kind.CONTAINMENT, "bind", f"along every path through {loop!r} bound levels nest as the target's containment "
            f"order admits, no hardware slot repeated (enclosing: {_bound(path)}; inside: "
            f"{_bound(list(L.loops(lp.body)))})", (loop,)))
    if base in HARDWARE_INDICES:
        obligations.append(Obligation(Kind.HARDWARE_LIMITS, "bind", f"{loop!r} as {kind}: {limit_text(kind)} "
                                      f"(extent {lp.extent})", (loop,)))
    if has_barrier and base in THREAD_SCOPES:
        obligations.append(Obligation(Kind.BARRIER_UNIFORM, "bind", f"each barrier inside {loop!r} is reached by all "
                                      "of its iterations or by none", (loop,)))
    elif has_barrier and L.binding_kind(lp.binding) in THREAD_SCOPES:
        obligations.append(Obligation(Kind.DEPENDENCE, "bind", f"the barriers inside {loop!r} no longer synchronize its "
                                      "iterations: every dependence they ordered holds in sequential order", (loop,)))
    new = dataclasses.replace(lp, binding=binding)  # a pipeline loop keeps its policy and stage blocks
    return Transformed(with_body(p, replace_loop(p.body, lp, [new])), Tau(), tuple(obligations))
