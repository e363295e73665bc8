"""privatize(target, over): carry an accumulation across a loop in a fresh local tile.

Every access of buffer ``target`` inside the serial / reduce / pipeline loop ``over`` is
written, per axis ``a``, as ``o_a + sum_i c_i * v_i``: ``v_i`` the loops nested inside
``over`` (starting at 0, ``c_i > 0``), ``o_a`` the *outer part*, free of them. When every
access has the same outer part ``o`` and sits under the same chain of guards, the op rewrites

    for x in over { ... target[o + t] ... }

into

    local acc: dtype[d_0, ..., d_{r-1}]             d_a = max(0, max over accesses of 1 + sum_i c_i * (n_i - 1))
    for u in [0, d):  if G and 0 <= o + u < shape:  acc[u] = target[o + u]      (init-load)
    for x in over { ... acc[t] ... }                          (each access remapped, guards kept)
    for u in [0, d):  if G and 0 <= o + u < shape:  target[o + u] = acc[u]      (store-back)

with one tile axis per target axis that some access indexes by a loop inside ``over``
(axes indexed only by ``o`` are dropped; no such axis gives a scalar accumulator) and ``G``
the *invariant* conjuncts of the guard chain (those reading no loop variable of ``over``
or inside it). Varying conjuncts (pad masks over the iterations, output masks on target's
own index) stay on the accesses alone. The tile is a routine-local array, so a backend's
compiler can keep it in registers: materialize the loops over its axes afterwards
(``unroll(..., materialize=True)``) to make its indices constants. Handles: the init-load
loops, then the store-back loops. Datamaps: the tile is a ``Copy`` of ``target``, cell ``u`` standing
for ``o + u``, live from the init-load to the store-back.

Preconditions (``ScheduleError`` otherwise): ``over`` is not parallel and not bound to
hardware; ``target`` is a buffer, not declared inside ``over``, read or written there at
least once and written at least once; no access index reads ``over``'s variable (nothing
would carry the tile across it); every index is affine in the loops inside ``over`` with
positive coefficients, those loops start at 0, have extents fixed before ``over`` and are not
bound to hardware (a per-thread tile indexed by other threads would store back their cells);
the accesses share one outer part and one guard chain.

Legality: tau is the identity (every statement instance of the old program runs at the
same coordinates). Tile cell ``u`` stands for target cell ``o + u``, injectively per axis,
and ``o`` is invariant across ``over``; the tile holds that cell's value from the init-load
on (an access's cell is in bounds wherever the access runs, a precondition of the old
program), every access of the cell inside ``over`` goes to the tile, and nothing else in
``over`` touches ``target``, so each read and update sees the value it saw before
(``dependence``). The store-back then writes each in-bounds cell once: the cells the loop
updated get their final value, the others the value they were loaded with (``coverage``).
The store-back is a plain store of every cell of the box ``o + [0, d)``; where another
concurrent instance touches one of those cells the program's ``noninterference`` obligation
fails, and the checker reports it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .. import ir
from . import args as A
from .registry import schedule_op
from .. import loopir as L
from ..index import IConst, IExpr, IVar, free_vars, ibin
from ..mapper import Mapper
from .base import (ScheduleError, buffer_names, buffer_type, conj, fresh_buffer, fresh_name, hardware_bound,
                   nest, replace_loop, the_loop, with_body)
from ..transform import Copy, Kind, Live, Obligation, Tau, Transformed
from .index_terms import split_terms, tile_part


@dataclass(frozen=True)
class Access:
    """One access of the target: its index, the guards and the loops between ``over`` and it."""

    index: tuple[IExpr, ...]
    guards: tuple[IExpr, ...]
    loops: tuple[L.Loop, ...]
    writes: bool


def _accesses(block: ir.Block, target: str, guards: tuple[IExpr, ...] = (),
              loops: tuple[L.Loop, ...] = ()) -> list[Access]:
    out: list[Access] = []
    for st in block.ops:
        if isinstance(st, L.Decl) and st.buf.name == target:
            raise ScheduleError(f"privatize: {target!r} is declared inside the loop it would be carried across",
                                hint="privatize across a loop inside the declaration's scope")
        if isinstance(st, L.Loop):
            out += _accesses(st.body, target, guards, loops + (st,))
        elif isinstance(st, L.If):
            out += _accesses(st.body, target, guards + (st.cond,), loops)
        elif isinstance(st, (L.Assign, L.Accum)):
            out += [Access(ld.index, guards, loops, False) for ld in L.loads(st.value) if ld.buf == target]
            if st.buf == target:
                out.append(Access(st.index, guards, loops, True))
    return out


def _split_index(a: Access, over: L.Loop, target: str) -> tuple[tuple[IExpr, ...], tuple[tuple[IExpr, IExpr], ...]]:
    """The outer part of ``a``'s index and, per axis, its inner part ``sum c_i * v_i`` with that part's range
    ``1 + sum c_i * (n_i - 1)`` (``(0, 0)`` when the axis reads no loop inside ``over``)."""
    if any((over.var, 0) in free_vars(e) for e in a.index):
        raise ScheduleError(f"privatize: the index [{', '.join(map(str, a.index))}] of {target!r} reads loop "
                            f"{over.name!r}: nothing to carry the accumulator across",
                            hint=f"privatize {target!r} across a loop its index does not read (the reduction loop)")
    outer, inner = [], []
    for e in a.index:
        e, terms = split_terms(e, a.loops, "privatize", target, "privatize accesses whose inner index terms are "
                               "loop variables with positive constant coefficients")
        for lp, _ in terms:
            if hardware_bound(lp):
                raise ScheduleError(f"privatize: the index of {target!r} reads loop {lp.name!r}, bound to "
                                    f"{lp.binding}: a private tile indexed by other threads would store back "
                                    "their cells", hint=f"privatize before binding {lp.name!r}, or across a loop "
                                    f"inside {lp.name!r}")
        part, size = tile_part(terms, "privatize", target, repr(over.name),
                               "privatize before partitioning the loops inside")
        outer.append(e)
        inner.append((part, size) if part != IConst(0) else (IConst(0), IConst(0)))
    return tuple(outer), tuple(inner)


class _ToTile(Mapper):
    """Every access of ``target`` turned into the access of its tile cell (``keep``: the tile's axes)."""

    def __init__(self, target: str, tile: str, keep: tuple[int, ...], over: L.Loop) -> None:
        self.target, self.tile, self.keep, self.over = target, tile, keep, over

    def cell(self, index: tuple[IExpr, ...]) -> tuple[IExpr, ...]:
        inner = _split_index(Access(index, (), tuple(L.loops(self.over.body)), False), self.over, self.target)[1]
        return tuple(inner[a][0] for a in self.keep)

    def map_ld(self, e: L.Ld) -> L.SExpr:
        return L.Ld(self.tile, self.cell(e.index), e.dtype) if e.buf == self.target else e

    def map_assign(self, st: L.Assign) -> Any:
        return self._store(super().map_assign(st))

    def map_accum(self, st: L.Accum) -> Any:
        return self._store(super().map_accum(st))

    def _store(self, st: Any) -> Any:
        return dataclasses.replace(st, buf=self.tile, index=self.cell(st.index)) if st.buf == self.target else st


@schedule_op("privatize", [A.BufferName(), A.LoopName()])
def privatize(p: ir.Program, target: str, over: str) -> Transformed:
    lp = the_loop(p, over, "privatize")
    if lp.kind == "parallel" or hardware_bound(lp):
        what = "parallel" if lp.kind == "parallel" else f"bound to {lp.binding}"
        raise ScheduleError(f"privatize: loop {over!r} is {what}; its iterations do not run in sequence on one "
                            "thread, so no private tile can carry the accumulation across them",
                            hint="privatize across the serial, reduce or pipeline loop that carries the accumulation")
    dtype, shape = buffer_type(p, target, "privatize")
    accesses = _accesses(lp.body, target)
    if not accesses:
        raise ScheduleError(f"privatize: no accesses of {target!r} under loop {over!r}",
                            hint="privatize the buffer the loop accumulates into")
    if not any(a.writes for a in accesses):
        raise ScheduleError(f"privatize: {target!r} is not written under loop {over!r} (no accumulation)",
                            hint="privatize a buffer the loop updates; to keep a read-only operand local, copy it "
                                 "into a tile instead")
    if len({a.guards for a in accesses}) > 1:
        raise ScheduleError(f"privatize: the accesses of {target!r} under loop {over!r} sit under differing If "
                            "guards", hint="privatize across a loop whose accesses of the target share one guard "
                                           "chain (e.g. the innermost reduction loop)")
    for a in accesses:
        hw = next((inner for inner in a.loops if hardware_bound(inner)), None)
        if hw is not None:
            raise ScheduleError(f"privatize: loop {hw.name!r} inside {over!r} is bound to {hw.binding}: its "
                                f"iterations would share one thread's private tile of {target!r}",
                                hint=f"privatize before binding {hw.name!r}, or across a loop inside it")
    parts = [_split_index(a, lp, target) for a in accesses]
    outer = parts[0][0]
    for a, (o, _) in zip(accesses, parts):
        if o != outer:
            raise ScheduleError(f"privatize: the accesses of {target!r} under loop {over!r} do not share one index "
                                f"vector outside the loops inside it: [{', '.join(map(str, outer))}] and "
                                f"[{', '.join(map(str, o))}]", hint="privatize across a loop whose accesses of the "
                                "target differ only in the loops nested inside it")
    keep = tuple(ax for ax in range(len(shape)) if any(inner[ax][0] != IConst(0) for _, inner in parts))
    dims = []
    for ax in keep:
        sizes = list(dict.fromkeys(inner[ax][1] for _, inner in parts if inner[ax][0] != IConst(0)))
        d = sizes[0]
        for other in sizes[1:]:
            d = ibin("max", d, other)
        dims.append(ibin("max", IConst(0), d))  # an empty inner loop (n_i = 0) may make the range negative
    tile = fresh_buffer(f"{target}.acc", buffer_names(p))
    invariant: IExpr = IConst(1)
    inside = {lp.var} | {inner.var for inner in L.loops(lp.body)}
    for g in accesses[0].guards:
        if not {v for v, _ in free_vars(g)} & inside:
            invariant = conj(invariant, g)

    new_var = L.fresh_var(p)
    taken: set[str] = set()

    def transfer(kind: str, store: bool) -> tuple[Any, L.Assign, tuple[int, ...], tuple[IExpr, ...]]:
        """The loop nest of one transfer, its assignment, its axis variables and the target cell they index."""
        us = [IVar(new_var(), 0) for _ in keep]
        cell = list(outer)
        for ax, u in zip(keep, us):
            cell[ax] = ibin("add", outer[ax], u)
        cond = invariant
        for ax in keep:
            cond = conj(cond, conj(ibin("ge", cell[ax], IConst(0)), ibin("lt", cell[ax], shape[ax])))
        tile_ld, target_ld = L.Ld(tile, tuple(us), dtype), L.Ld(target, tuple(cell), dtype)
        st = L.Assign(target, tuple(cell), tile_ld, lp.loc) if store else L.Assign(tile, tuple(us), target_ld, lp.loc)
        body = ir.Block((), (L.If(cond, ir.Block((), (st,)), lp.loc),) if cond != IConst(1) else (st,))
        axes = tuple(u.region for u in us)
        if not keep:
            return body.ops[0], st, axes, tuple(cell)
        names = []
        for ax in keep:
            names.append(fresh_name(p, f"{tile}.{kind}{ax}", taken))
            taken.add(names[-1])
        loops = [L.Loop(u.region, name, d, "parallel", ir.Block((), ()), None, IConst(0), lp.loc)
                 for u, name, d in zip(us, names, dims)]
        return nest(loops, body), st, axes, tuple(cell)

    (init, load, axes, cell), (store_back, store, _, _) = transfer("init", False), transfer("store", True)
    remapped = _ToTile(target, tile, keep, lp).map_stmt(lp)
    decl = L.Decl(L.Buffer(tile, dtype, tuple(dims), "local"), lp.loc)
    new = [decl, init, remapped, store_back]
    handles = tuple(inner.name for t in (init, store_back) for inner in L.loops(ir.Block((), (t,))))
    cells = f"{target}[{', '.join(map(str, outer))}] + [0, {', '.join(map(str, dims))})" if keep else \
        f"{target}[{', '.join(map(str, outer))}]"
    obligations = (
        Obligation(Kind.DEPENDENCE, "privatize", f"every access of {target!r} under {over!r} goes to {tile}[u] for "
                   f"cell o + u of {cells} (injective per axis, o invariant across {over!r}); {tile} is loaded from "
                   f"{target!r} before {over!r} and nothing else touches {target!r} while it runs, so each access "
                   "sees the value it saw before", (over,)),
        Obligation(Kind.COVERAGE, "privatize", f"the store-back writes each in-bounds cell of {cells} once after "
                   f"{over!r}: the updated cells their final value, the others the value they were loaded with",
                   (over,) + handles),
        Obligation(Kind.DATAMAP, "privatize", f"{tile}[u] holds {target!r} cell o + u of {cells} from its init-load to "
                   f"its store-back, and only it touches that cell meanwhile", (over,) + handles),
    )
    return Transformed(with_body(p, replace_loop(p.body, lp, new)), Tau(), obligations, handles,
                       (Copy(tile, target, axes, cell, Live(load, store)),))
