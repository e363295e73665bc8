"""expand_zero(buffer): make the zeroing of one buffer a fresh, separately schedulable nest.

What counts as a *whole-buffer zeroing* of ``b`` (rank ``r >= 1``, shape ``n_0, ..., n_{r-1}``):
a perfect nest of ``r`` loops, each starting at 0 with exactly one statement in its body,
around a single ``b[v_{pi(0)}, ..., v_{pi(r-1)}] = 0`` whose index is a permutation of the
nest's loop variables, where the loop of the variable at index position ``a`` runs over
``[0, n_a)`` (structurally or provably under the bound sizes). It writes 0 to every cell of
``b`` exactly once. A ``Decl`` alone does not count (a fresh buffer's contents are not
part of the meaning), nor does a nest that covers only part of the buffer; the zeroing may
stand anywhere (typically right after the ``Decl``, as library expansion emits a
``zeros`` tile or an add-reduction's initialization), and it stays where it is.

The nest is replaced by ``b.zero0 { b.zero1 { ... b[v_0, ..., v_{r-1}] = 0 } }``: parallel
loops in the buffer's axis order, fresh variables, readable names (made unique) returned as
the handles, no binding, so the zeroing can be split and bound like the computation that
follows it.

Preconditions (``ScheduleError`` otherwise): ``b`` is a tensor or a declared buffer of rank
``>= 1`` and has exactly one whole-buffer zeroing.

Legality: tau maps the loop of index position ``a`` to the new loop of axis ``a`` (an axis
permutation, so a bijection: ``coverage``); distinct iterations write distinct cells and
read none (``noninterference``, for the parallel kind the new loops carry).
"""
from __future__ import annotations

import math
from typing import Any, Optional

from .. import ir
from . import args as A
from .registry import schedule_op
from .. import loopir as L
from ..index import IConst, IExpr, IVar, ibin
from .base import ScheduleError, buffer_type, fresh_name, proves, replace_loop, with_body
from ..transform import Kind, Obligation, Piece, Tau, Transformed


def _is_zero(value: L.SExpr) -> bool:
    return isinstance(value, L.Lit) and value.value == 0 and math.copysign(1.0, value.value) > 0


def _zeroing(p: ir.Program, st: Any, buf: str, shape: tuple[IExpr, ...],
             sizes: Optional[dict[str, int]]) -> Optional[tuple[list[L.Loop], L.Assign]]:
    """The loops (outermost first) and store of ``st`` when it is a whole-buffer zeroing of ``buf``."""
    loops: list[L.Loop] = []
    while isinstance(st, L.Loop) and st.start == IConst(0) and len(st.body.ops) == 1:
        loops.append(st)
        st = st.body.ops[0]
    if not (isinstance(st, L.Assign) and st.buf == buf and _is_zero(st.value) and len(st.index) == len(loops)):
        return None
    if not all(isinstance(x, IVar) and x.axis == 0 for x in st.index) or \
            sorted(x.region for x in st.index) != sorted(lp.var for lp in loops):
        return None
    for lp in loops:
        n = shape[st.index.index(IVar(lp.var, 0))]
        if lp.extent != n and not proves(p, lp, ibin("eq", lp.extent, n), sizes):
            return None
    return loops, st


@schedule_op("expand_zero", [A.BufferName(), A.BoundSizes()])
def expand_zero(p: ir.Program, buffer: str, *, bound_sizes: Optional[dict[str, int]] = None) -> Transformed:
    shape = buffer_type(p, buffer, "expand_zero")[1]
    if not shape:
        raise ScheduleError(f"expand_zero: {buffer!r} is a scalar (rank 0); its zeroing is one statement with no "
                            "loop to schedule", hint="expand the zeroing of a buffer with at least one axis")
    found = [z for st in ir.walk(p.body) for z in [_zeroing(p, st, buffer, shape, bound_sizes)] if z is not None]
    if not found:
        raise ScheduleError(f"expand_zero: no whole-buffer zeroing of {buffer!r}",
                            hint=f"a zeroing is a loop nest over every axis of {buffer} (from 0 to its extent) "
                            f"around one store {buffer}[i0, i1, ...] = 0")
    if len(found) > 1:
        raise ScheduleError(f"expand_zero: {len(found)} statements zero the whole of {buffer!r}",
                            hint="expand_zero needs a unique zeroing; schedule the nests one by one instead")
    loops, store = found[0]
    new_var = L.fresh_var(p)
    vs = [new_var() for _ in shape]
    taken: set[str] = set()
    names = []
    for a in range(len(shape)):
        names.append(fresh_name(p, f"{buffer}.zero{a}", taken))
        taken.add(names[-1])
    body = ir.Block((), (L.Assign(buffer, tuple(IVar(v, 0) for v in vs), store.value, store.loc),))
    for a in reversed(range(len(shape))):
        body = ir.Block((), (L.Loop(vs[a], names[a], shape[a], "parallel", body, None, IConst(0), loops[0].loc),))
    tau = Tau((Piece(tuple((lp.var, IVar(vs[store.index.index(IVar(lp.var, 0))], 0)) for lp in loops)),))
    obligations = (
        Obligation(Kind.COVERAGE, "expand_zero", f"tau permutes the axes of the old zeroing nest of {buffer!r}: every "
                   "cell is zeroed exactly once, as before", tuple(names)),
        Obligation(Kind.NONINTERFERENCE, "expand_zero", f"distinct iterations store 0 to distinct cells of {buffer!r} "
                   "and read nothing", tuple(names)),
    )
    return Transformed(with_body(p, replace_loop(p.body, loops[0], list(body.ops))), tau, obligations, tuple(names))
