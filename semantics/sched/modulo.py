"""modulo(loop, interval, offsets, window, versions, waits, releases, target): set a modulo plan on a pipeline loop.

The statements do not change: the plan (``semantics.pipeline.plan.ModuloPlan``) is set on the loop's policy
(``Loop.pipeline.plan``), where the printers, the serialization and the digest read it and later ops keep it. It
states how the pipeline is to overlap, with ``Issue(s, i) = i * interval + theta(s)``:

- ``offsets`` gives ``theta`` (one value >= 0 per stage, keyed by stage name or ordinal) and ``interval`` the
  initiation interval II >= 1 (default: the policy's); ``interval`` without ``offsets`` asks the planner
  (``semantics.pipeline.planner.plan_modulo``) for offsets at that interval; neither asks it for the smallest
  interval from the policy's on, under ``window`` (default: the policy's window) and the stage graph of the loop
  (``semantics.pipeline.graph``);
- ``versions`` overrides the slot count derived for a buffer (>= 1), ``waits`` the consumer waits (a list of
  ``(producer stage, consumer stage, buffer)``; None: every flow edge waits) and ``releases`` the readers whose
  release each buffer's slot reuse waits for (None: every actual reader); ``versions`` and ``releases`` name only
  buffers the loop's body declares and one stage writes for another to read (a tensor or carried state keeps its
  one copy: refused). What a plan derives from them is ``semantics.pipeline.derive``;
- ``offsets`` keep at most ``MAX_COLUMNS`` (64) iterations in flight (``max(theta) // II + 1``);
- ``target`` (``c``, the default, ``interp``, ``cuda``, ``cuda-host``) is the row of the latency table
  (``semantics.pipeline.latency``) the plan is made for and checked under.

Legality (tau is the identity: every instance runs as before; the plan is a realization the checker holds
against the sequential order, for all iterations with the trip count ``N`` symbolic):

- ``pipeline_schedule``: ``Issue(c, i + d) >= Issue(p, i) + latency(e)`` for every edge ``e = (p, c, d)`` of the
  stage graph and every ``0 <= i``, ``i + d < N``; at most ``window`` iterations in flight
  (``max(theta) // II + 1 <= window`` when ``window > 0``); every flow edge whose producer is a copy (every flow
  edge on an asynchronous target) has a wait;
- ``versions``: for a materialized buffer with ``V`` slots (slot ``i mod V``), ``Issue(p, i + V * m) >=
  release(i)`` for every version ``i`` and ``m >= 1``, ``release(i) = max_r Issue(r, i + d_r) + latency(r)`` over
  the actual readers ``r`` of version ``i``;
- ``release``: the readers a slot's reuse waits for include every actual reader of the version in it.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from .. import ir
from .. import loopir as L
from ..pipeline.graph import stage_graph, the_pipeline_loop
from ..pipeline.plan import ModuloPlan
from ..pipeline.stages import stage_blocks
from ..transform import Kind, Obligation, Tau, Transformed
from . import args as A
from .base import ScheduleError, replace_loop, with_body
from .registry import schedule_op
from ..pipeline.latency import LATENCY

STAGE = A.StageName("loop")
MAX_COLUMNS = 64
"""The most iterations a plan keeps in flight (``max(theta) // II + 1``): its realization runs ``N + columns - 1``
ticks, so an unbounded offset would be an unbounded prologue of idle ticks."""
WAIT = A.TupleOf(STAGE, STAGE, A.BufferName(), example="['load', 'compute', 'a']")
FORMULAS = {
    Kind.PIPELINE_SCHEDULE: "Issue(c, i + d) >= Issue(p, i) + latency(e) for every stage-graph edge e = (p, c, d) "
                            "and 0 <= i, i + d < N, with Issue(s, i) = i * II + theta(s); max(theta) // II + 1 <= "
                            "window when window > 0; a wait on every flow edge from a copy stage",
    Kind.VERSIONS: "Issue(p, i + V * m) >= release(i) for every version i, m >= 1 and materialized buffer of V "
                   "slots (slot i mod V), release(i) = max over the actual readers r of Issue(r, i + d_r) + "
                   "latency(r)",
    Kind.RELEASE: "the readers each slot's reuse waits for include every actual reader of the version in it",
}


@schedule_op("modulo", [A.LoopName(), A.Optional(A.PosInt()), A.Optional(A.MapOf(STAGE, A.NonNegInt())),
                        A.Optional(A.NonNegInt()), A.Optional(A.MapOf(A.BufferName(), A.PosInt())),
                        A.Optional(A.ListOf(WAIT, min_len=0)),
                        A.Optional(A.MapOf(A.BufferName(), A.ListOf(STAGE, min_len=0))), A.Enum(tuple(LATENCY)),
                        A.BoundSizes()])
def modulo(p: ir.Program, loop: str, interval: Optional[int] = None, offsets: Optional[dict] = None,
           window: Optional[int] = None, versions: Optional[dict] = None, waits: Optional[list] = None,
           releases: Optional[dict] = None, target: str = "c", *,
           bound_sizes: Optional[dict[str, int]] = None) -> Transformed:
    lp = the_pipeline_loop(p, loop, "modulo")
    window = lp.pipeline.window if window is None else window
    if offsets is not None:
        plan = ModuloPlan(lp.pipeline.interval if interval is None else interval, _offsets(p, lp, offsets), window,
                          target)
        if max(plan.offsets) // plan.interval + 1 > MAX_COLUMNS:
            raise ScheduleError(f"modulo: offsets {plan.offsets} at interval {plan.interval} keep "
                                f"{max(plan.offsets) // plan.interval + 1} iterations in flight, more than "
                                f"{MAX_COLUMNS}", hint="give offsets below interval * "
                                f"{MAX_COLUMNS} (a deeper plan realizes to that many prologue ticks)")
    else:
        from ..pipeline.planner import plan_modulo
        graph = stage_graph(p, loop, bound_sizes)
        if interval is None:
            plan = plan_modulo(graph, window=window, interval=lp.pipeline.interval, target=target)
        else:
            try:
                plan = plan_modulo(graph, window=window, interval=interval, max_interval=interval, target=target)
            except ScheduleError as exc:
                raise ScheduleError(f"{exc.message} (interval={interval} was given)", hint="leave interval out for "
                                    "the least interval that has a plan, or give offsets too") from None

    def ordinal(stage: object) -> int:
        found = STAGE.ordinal(stage, p, loop)
        assert found is not None  # the argument kind checked it
        return found

    for argument, named in (("versions", versions), ("releases", releases)):
        if named:
            _slotted(p, lp, argument, named, bound_sizes)
    plan = dataclasses.replace(
        plan, versions=tuple(sorted((versions or {}).items())) or plan.versions,
        waits=plan.waits if waits is None else tuple((ordinal(a), ordinal(b), buf) for a, b, buf in waits),
        releases=plan.releases if releases is None else tuple(
            sorted((buf, tuple(sorted({ordinal(s) for s in readers}))) for buf, readers in releases.items())))
    marked = dataclasses.replace(lp, pipeline=dataclasses.replace(lp.pipeline, plan=plan))
    obligations = tuple(Obligation(kind, "modulo", f"{text} (II={plan.interval}, theta={plan.offsets})", (loop,))
                        for kind, text in FORMULAS.items())
    return Transformed(with_body(p, replace_loop(p.body, lp, [marked])), Tau(), obligations)


def _offsets(p: ir.Program, lp: L.Loop, offsets: dict) -> tuple[int, ...]:
    """``theta`` by ordinal: exactly one offset per stage."""
    stages = stage_blocks(lp)
    theta: dict[int, int] = {}
    for key, value in offsets.items():
        k = STAGE.ordinal(key, p, lp.name)
        assert k is not None  # the argument kind checked it
        if k in theta:
            raise ScheduleError(f"modulo: stage {k} ({stages[k].name}) has two offsets",
                                hint="give each stage once, by name or by ordinal")
        theta[k] = value
    missing = [f"{st.ordinal} ({st.name})" for st in stages if st.ordinal not in theta]
    if missing:
        raise ScheduleError(f"modulo: no offset for stage {', '.join(missing)} of {lp.name!r}",
                            hint="give one offset per stage, e.g. " +
                            repr({st.name: k for k, st in enumerate(stages)}))
    return tuple(theta[st.ordinal] for st in stages)


def _slotted(p: ir.Program, lp: L.Loop, argument: str, named: dict, bound_sizes: Optional[dict[str, int]]) -> None:
    """Every buffer ``versions`` or ``releases`` names can get slots: it is declared by the pipeline body (carried
    state and tensors keep their one copy in the realization) and materialized (written in one stage, read in
    another)."""
    declared = {st.buf.name for st in lp.body.ops if isinstance(st, L.Decl)}
    slotted = [b for b in stage_graph(p, lp.name, bound_sizes).materialized if b in declared]
    wrong = sorted(b for b in named if b not in slotted)
    if wrong:
        raise ScheduleError(f"modulo: {argument} names {', '.join(map(repr, wrong))}, which gets no slots: only a "
                            f"buffer the body of {lp.name!r} declares and one stage writes for another to read has "
                            f"versions", hint=f"the buffers of {lp.name!r} that may get versions: "
                            f"{', '.join(slotted) or 'none'}")
