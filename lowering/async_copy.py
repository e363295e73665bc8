"""Asynchronous copies into shared rings (``loopir.AsyncCopy`` / ``loopir.AsyncWait``): how many groups a wait
may leave in flight.

A realized pipeline loop runs one tick per iteration of its tick loop; its body is a fixed sequence of positions.
Every ``AsyncWait`` of the body runs at every tick, on every thread (it is a block barrier), and commits the
copies its thread issued since the previous one as one group (an empty one when there were none), so the groups
are the same on every thread and at every tick. A wait at position ``w`` of tick ``t`` that must complete the copy
issued at position ``q`` of tick ``t - D`` counts the waits in the time interval ``((t - D, q), (t, w)]``: the
first of them committed the copy's group, so the groups newer than it are that count less one::

    pending = sum over wait positions w' of (D + 1 - [w' > w] - [w' < q])  -  1

(a wait ``w'`` runs at the ticks ``t - D + [w' < q] .. t - [w' > w]``). ``cp.async.wait_group(pending)`` then
lands the copy and leaves the ``pending`` newer groups in flight; a smaller count is safe (it waits for more), a
larger one lets the consumer read the slot's old content. ``D`` is the distance in ticks between the producer's
and the consumer's kernel columns (``derive.Derived.column``); a copy that issues after its wait in the same tick
(``D = 0``, ``q > w``) is no plan's.

The count is the realization's, derived from a plan whose obligations (``pipeline_schedule``, ``versions``,
``release``) say that no cell of a slot is accessed between its copy's issue and this wait; the checker reads
``AsyncCopy`` as the copy landed at its issue and ``AsyncWait`` as the barrier. The host emulation
(``backends/cuda/tc_cuda_emu.h``) lands each copy only at its wait, so a wrong count shows as a wrong value there.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Sequence

from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.mapper import Mapped, Mapper
from tilecert.semantics.pipeline.plan import ModuloPlan, StageGraph
from tilecert.semantics.pipeline.realize import Piece, realization


def wait_pending(waits: Sequence[int], issue: int, wait: int, distance: int) -> int:
    """The ``pending`` of the ``AsyncWait`` at body position ``wait`` that completes the copy issued at position
    ``issue``, ``distance`` ticks earlier, where the body's waits sit at positions ``waits`` (see the module
    docstring). ``ValueError`` when the copy issues after the wait in the same tick, or ``wait`` is no wait."""
    if wait not in waits or issue in waits:
        raise ValueError(f"position {wait} must be one of the waits {tuple(waits)} and {issue} none of them")
    if distance < 0 or (distance == 0 and issue > wait):
        raise ValueError(f"the copy at position {issue}, {distance} ticks before the wait at {wait}, issues after it")
    return sum(distance + 1 - (w > wait) - (w < issue) for w in waits) - 1


# ----------------------------------------------------------------------------- the CUDA realization of a plan
def _innermost(st: Any) -> Any:
    """The statement inside a nest of single-statement loops (``st`` itself when it is no loop)."""
    while isinstance(st, L.Loop) and len(st.body.ops) == 1:
        st = st.body.ops[0]
    return st


class _Issue(Mapper):
    """A copy stage's body with each write of a pending slot ``P[...] = v`` the ``AsyncCopy`` ``ring(P)[...] = v``
    and the poisoning of its ring slot left out (on CUDA the slot keeps its old content until the copy lands, one of
    the values the poison stands for)."""

    def __init__(self, rings: Mapping[str, str]) -> None:
        self.rings = rings

    def map_stmt(self, st: Any) -> Mapped:
        inner = _innermost(st)
        if isinstance(st, L.Loop) and isinstance(inner, L.Assign) and inner.buf in self.rings.values() \
                and isinstance(inner.value, L.Lit):
            return None
        return super().map_stmt(st)

    def map_assign(self, st: L.Assign) -> Mapped:
        if st.buf not in self.rings:
            return super().map_assign(st)
        return L.AsyncCopy(self.rings[st.buf], st.index, st.value, st.loc)


class _Swap(Mapper):
    """The program body with the statement ``old`` (by identity) spliced out for ``new``."""

    def __init__(self, old: Any, new: list) -> None:
        self.old, self.new = old, new

    def map_stmt(self, st: Any) -> Mapped:
        return list(self.new) if st is self.old else super().map_stmt(st)


def _move(st: Any, rings: Mapping[str, str]) -> Optional[str]:
    """The pending buffer a wait's move nest ``b[slot, u] = P[slot, u]`` lands (None for any other statement)."""
    inner = _innermost(st)
    if isinstance(st, L.Loop) and isinstance(inner, L.Assign) and isinstance(inner.value, L.Ld) \
            and rings.get(inner.value.buf) == inner.buf and inner.value.index == inner.index:
        return inner.value.buf
    return None


def _stage(pc: Piece) -> int:
    """The stage ordinal of a piece (the last term of its key is minus the ordinal)."""
    return -pc.key[-1]


def _writes(stmts: tuple, buf: str) -> bool:
    """Whether ``stmts`` assign to ``buf``."""
    return any(isinstance(n, L.Assign) and n.buf == buf for n in ir.walk(ir.Block((), stmts)))


def realize_async_copies(program: ir.Program, loop: str, graph: StageGraph, plan: ModuloPlan) -> ir.Program:
    """``program`` with pipeline loop ``loop`` realized for CUDA: ``semantics.pipeline.realize``'s ``async`` model
    with each pending slot made a ``cp.async`` in flight.

    The realization's copy stages write the pending slot ``P = b.inflight`` of ring ``b``; here each such write is
    the ``AsyncCopy`` into ``b`` itself (the pending slot is the copy in flight; ``P`` is not declared) and the
    poisoning of ``b``'s slot at the copy's issue is left out (the slot keeps its old content, one of the values the
    poison stands for). The waits that move ``P``'s slot into ``b`` before a consumer become one ``AsyncWait``
    before the consumer's guarded piece, outside its guard (every tick runs every wait, so the groups are the same
    at every tick: the module docstring), whose ``pending`` is the least ``wait_pending`` over the copies it lands,
    with ``D`` = the consumer's column less the copy's plus the flow edge's distance. A consumer the plan does not
    wait for gets no wait, and reads the slot's old content as it reads the poison in the model."""
    r = realization(program, loop, graph, plan, "async")
    rings = {pending: b for b, pending in r.pending}
    pieces, lands, order = [], [], []  # order: the tick body after the locals, ("wait" | "piece", piece number)
    copier: dict[str, int] = {}  # pending buffer -> the piece that issues its copies
    for pc in r.pieces:
        landed = [p for p in map(lambda st: _move(st, rings), pc.stmts) if p is not None]
        kept = tuple(st for st in pc.stmts if _move(st, rings) is None)
        if landed:
            order.append(("wait", len(lands)))
            lands.append((landed, pc))
        if not kept:  # a piece of waits only (an mma stage's, whose body runs at its completion)
            continue
        issues = {p: len(pieces) for p in rings if _writes(kept, p)}
        if issues:
            copier.update(issues)
            kept = _Issue(rings).map_block(ir.Block((), kept)).ops
        order.append(("piece", len(pieces)))
        pieces.append(dataclasses.replace(pc, stmts=kept))
    at = {entry: n for n, entry in enumerate(order)}
    waits = [at[e] for e in order if e[0] == "wait"]
    decls = [d for d in r.decls if d.buf.name not in rings]
    ticks = dataclasses.replace(r, decls=tuple(decls), pieces=tuple(pieces)).statements()[-1]
    head = len(r.locals)
    ops = list(ticks.body.ops[:head])
    for kind, k in order:
        if kind == "piece":
            ops.append(ticks.body.ops[head + k])
            continue
        landed, pc = lands[k]
        counts = []
        for p in landed:
            q = pieces[copier[p]]
            d = next((e.distance for e in graph.edges if (e.producer, e.consumer, e.buffer, e.dep)
                      == (_stage(q), _stage(pc), rings[p], "flow")), 0)
            counts.append(wait_pending(waits, at[("piece", copier[p])], at[("wait", k)], pc.column - q.column + d))
        ops.append(L.AsyncWait("block", r.loop.loc, pending=min(counts)))
    ticks = dataclasses.replace(ticks, body=dataclasses.replace(ticks.body, ops=tuple(ops)))
    return dataclasses.replace(program, body=_Swap(r.loop, decls + [ticks]).map_block(program.body))
