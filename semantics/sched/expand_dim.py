"""expand_dim(buffer, loops): give a per-instance buffer one leading axis per enclosing loop.

``buffer`` is declared once, inside every loop of ``loops`` (Exo's ``expand_dim``, one axis per
listed loop, in the order listed). For loops ``l_1 .. l_k`` with variables ``v_1 .. v_k``, starts
``s_1 .. s_k`` and extents ``n_1 .. n_k``:

    local b: t[S]                      ->    local b: t[n_1, ..., n_k, S]
    ... b[u] ...                       ->    ... b[v_1 - s_1, ..., v_k - s_k, u] ...

The declaration keeps its place: every instance of the loops still allocates a fresh zeroed
buffer, and uses only its slice ``[v - s]``. The point of the op is the next one: with the slices
disjoint, ``lift_alloc`` can move the declaration out of the loops.

Legality (no precondition beyond the structure; the lemma of ``proofs/expand_dim.py``): the
declaration lies inside each ``l_i``, so within one allocation ``v - s`` is constant and lies in
``[0, n)``; the map ``[v - s, u] -> u`` is then a bijection from the slice the allocation uses onto
the old buffer's cells, both start zeroed and see the same operations in the same order, and an
access is in bounds exactly when the old one was. The datamap ``Expanded(buffer, loops)`` states
it, and the checker verifies it (``datamap``: every access indexes the leading axes by
``v - s`` and the new axes have the loops' extents) before comparing the programs with the new
axes read away. Tau is the identity.

Preconditions (``ScheduleError`` otherwise): ``buffer`` is declared once (not a tensor); each of
``loops`` encloses that declaration.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from .. import ir
from .. import loopir as L
from ..index import IConst, IExpr, IVar, ibin
from ..mapper import Mapper
from . import args as A
from .base import ScheduleError, the_decl, the_loop, with_body
from .registry import schedule_op
from ..transform import Expanded, Kind, Obligation, Tau, Transformed


def offset(lp: L.Loop) -> IExpr:
    """``v - start`` of loop ``lp``: its iteration's position, from 0."""
    v = IVar(lp.var, 0)
    return v if lp.start == IConst(0) else ibin("sub", v, lp.start)


class _Indexed(Mapper):
    """Every access of ``name`` prefixed by the index terms ``lead``; its declaration by the axes ``dims``."""

    def __init__(self, name: str, lead: tuple[IExpr, ...], dims: tuple[IExpr, ...]) -> None:
        self.name, self.lead, self.dims = name, lead, dims

    def map_decl(self, st: L.Decl) -> Any:
        if st.buf.name != self.name:
            return st
        return dataclasses.replace(st, buf=dataclasses.replace(st.buf, shape=self.dims + st.buf.shape))

    def map_ld(self, e: L.Ld) -> L.SExpr:
        return dataclasses.replace(e, index=self.lead + e.index) if e.buf == self.name else e

    def map_assign(self, st: L.Assign) -> Any:
        return self._store(super().map_assign(st))

    def map_accum(self, st: L.Accum) -> Any:
        return self._store(super().map_accum(st))

    def _store(self, st: Any) -> Any:
        return dataclasses.replace(st, index=self.lead + st.index) if st.buf == self.name else st


@schedule_op("expand_dim", [A.BufferName(), A.ListOf(A.LoopName(), distinct=True)])
def expand_dim(p: ir.Program, buffer: str, loops: list[str]) -> Transformed:
    """Give ``buffer`` one leading axis per loop of ``loops`` around its declaration (see the module doc)."""
    decl, path = the_decl(p, buffer, "expand_dim")
    chosen = [the_loop(p, name, "expand_dim") for name in loops]
    around = [st for st in path if isinstance(st, L.Loop)]
    for lp in chosen:
        if not any(lp is a for a in around):
            raise ScheduleError(f"expand_dim: loop {lp.name!r} does not enclose the declaration of {buffer!r}",
                                decl.loc, hint=f"the loops around {buffer!r} are: "
                                f"{', '.join(a.name for a in around) or 'none'}")
    lead = tuple(offset(lp) for lp in chosen)
    dims = tuple(lp.extent for lp in chosen)
    new = with_body(p, _Indexed(buffer, lead, dims).map_block(p.body))
    axes = ", ".join(f"{lp.name} - {lp.start}" if lp.start != IConst(0) else lp.name for lp in chosen)
    obligations = (
        Obligation(Kind.DATAMAP, "expand_dim", f"every access of {buffer!r} indexes its new leading axes by "
                   f"[{axes}], the iteration of the enclosing loops that owns the allocation, and each new axis has "
                   "its loop's extent: cell [v - s, u] stands for cell u of instance v", tuple(loops)),
    )
    return Transformed(new, Tau(), obligations, (), (Expanded(buffer, tuple(lp.var for lp in chosen)),))
