"""The analysis and the pieces every mode of ``stage`` builds from (``stage.py`` states the op).

``analyse`` splits the shared index vector of the source's reads into outer and tile parts and
finds the anchor; ``ToTile`` remaps the reads; ``load_value`` is the where-form load with its edge
guard folded; ``serial_load`` the plain copy nest; ``place`` rewrites the anchor's body (or the
outermost tile loop).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from .. import ir
from .. import loopir as L
from ..dtypes import dtype_of
from ..index import IConst, IExpr, IVar, conj, free_vars, ibin
from ..mapper import Mapper
from .base import ScheduleError, buffer_type, context_at, fresh_name, nest, replace_loop, the_loop, with_body
from .index_terms import split_terms, tile_part
from .simplify import simplify_cond
from ..transform import Kind, Obligation

SWIZZLES = ("elem", "b128")
WIDENINGS = {("f16", "f32"), ("bf16", "f32"), ("f16", "f64"), ("bf16", "f64"), ("f32", "f64")}
"""(source dtype, tile dtype) pairs a tile may widen: exact conversions, whose round trip is the identity."""


@dataclass(frozen=True)
class Read:
    """One read of the source: its index and the loops around it, outermost first."""

    index: tuple[IExpr, ...]
    loops: tuple[L.Loop, ...]


def _reads(block: ir.Block, source: str, loops: tuple[L.Loop, ...] = ()) -> list[Read]:
    """Every read of ``source`` in ``block``; a ``ScheduleError`` at a write of it."""
    out: list[Read] = []
    for st in block.ops:
        if isinstance(st, L.Loop):
            out += _reads(st.body, source, loops + (st,))
        elif isinstance(st, L.If):
            out += _reads(st.body, source, loops)
        elif isinstance(st, (L.Assign, L.Accum)):
            if st.buf == source:
                raise ScheduleError(f"stage: {source!r} is written in the routine; a staged copy would go stale",
                                    hint="stage a buffer the routine only reads (an input)")
            out += [Read(ld.index, loops) for ld in L.loads(st.value) if ld.buf == source]
    return out


@dataclass(frozen=True)
class Plan:
    """What the analysis finds: the source's type, the shared outer part and tile part of its index, the
    tile's extents (unpadded), the tile loops, the anchor (None: none) and the loops around the reads."""

    source: str
    dtype: str
    shape: tuple[IExpr, ...]
    outer: tuple[IExpr, ...]
    parts: tuple[IExpr, ...]
    dims: tuple[IExpr, ...]
    tile_loops: tuple[L.Loop, ...]
    anchor: Optional[L.Loop]
    chain: tuple[L.Loop, ...]


def check_modes(dtype: str, shared: bool, cooperative: Optional[int], swizzle: Optional[str],
                pad_stride: Optional[int], hoisted: bool, pipeline_depth: int, tile_prec: Optional[str]) -> None:
    """The preconditions among the mode arguments, in the order of the reference (seed 000)."""
    if tile_prec is not None and tile_prec != dtype and (dtype, tile_prec) not in WIDENINGS:
        raise ScheduleError(f"stage: tile_prec={tile_prec!r} is not an exact widening of the source's {dtype}: "
                            "a narrower tile would change values",
                            hint=f"pass tile_prec={dtype!r} or a wider float (f32 / f64 over f16 / bf16, f64 over f32)")
    if cooperative is not None and not shared:
        raise ScheduleError("stage: cooperative loading needs shared=True (threads of a block share the tile)",
                            hint="pass shared=True with cooperative=, or leave cooperative out")
    if pipeline_depth > 2:
        raise ScheduleError(f"stage: pipeline_depth={pipeline_depth} is not implemented: the rotation has a "
                            "single-step lookahead (one prefetch per iteration behind one barrier)",
                            hint="pass pipeline_depth=2 (double buffering) or 1 (no pipeline)")
    if pipeline_depth == 2 and cooperative is None:
        raise ScheduleError("stage: pipeline_depth=2 needs a cooperative shared load (its prefetch is the "
                            "cooperative load nest of the next iteration)",
                            hint="pass shared=True, cooperative=<lanes> with pipeline_depth=2")
    if hoisted and shared:
        raise ScheduleError("stage: a hoisted pack is computed once on the host, not in block-shared memory",
                            hint="pass hoisted=True with shared=False, or drop hoisted")
    if hoisted and pad_stride is not None:
        raise ScheduleError("stage: a hoisted pack takes no padding", hint="drop pad_stride with hoisted=True")
    if swizzle is not None and not shared:
        raise ScheduleError("stage: a swizzle permutes a block-shared tile; it needs shared=True",
                            hint="pass shared=True with swizzle=, or drop swizzle")
    if pad_stride is not None and pad_stride < 2:
        raise ScheduleError(f"stage: pad_stride={pad_stride} pads nothing; it must be > 1",
                            hint="pass pad_stride=p with p > 1 (the minor extent is rounded up to a multiple of p)")


def analyse(p: ir.Program, source: str, tile_loops: list[str]) -> Plan:
    """The index analysis of the module doc (the preconditions on the reads and the tile loops)."""
    dtype, shape = buffer_type(p, source, "stage")
    reads = _reads(p.body, source)
    if not reads:
        raise ScheduleError(f"stage: no reads of {source!r}", hint="stage a buffer the routine reads")
    index = reads[0].index
    other = next((r.index for r in reads if r.index != index), None)
    if other is not None:
        raise ScheduleError(f"stage: the reads of {source!r} do not share one index vector: "
                            f"[{', '.join(map(str, index))}] and [{', '.join(map(str, other))}]",
                            hint="stage a source every read of which indexes the same cell expression")
    chain = reads[0].loops
    loops = tuple(the_loop(p, name, "stage") for name in tile_loops)
    for lp in loops:
        if any(lp not in r.loops for r in reads):
            raise ScheduleError(f"stage: tile loop {lp.name!r} does not enclose every read of {source!r}",
                                hint=f"name loops around the reads of {source!r}: "
                                     f"{', '.join(x.name for x in chain) or 'none'}")
    hint = "stage a source whose index terms over the tile loops are loop variables with positive coefficients"
    outer, parts, dims, used = [], [], [], set()
    for e in index:
        o, terms = split_terms(e, loops, "stage", source, hint)
        part, size = tile_part(terms, "stage", source, "the tile loops", "stage before partitioning the tile loops")
        used |= {lp.var for lp, _ in terms}
        outer.append(o)
        parts.append(part)
        dims.append(size)
    unused = next((lp for lp in loops if lp.var not in used), None)
    if unused is not None:
        raise ScheduleError(f"stage: the index [{', '.join(map(str, index))}] of {source!r} does not read tile loop "
                            f"{unused.name!r}", hint="name only tile loops the index of the source reads")
    symbols = {v for o in outer for v, _ in free_vars(o)}
    anchor = next((lp for lp in reversed(chain) if lp.var in symbols), None)
    return Plan(source, dtype, shape, tuple(outer), tuple(parts), tuple(dims), loops, anchor, chain)


def padded(dims: tuple[IExpr, ...], pad_stride: Optional[int]) -> tuple[IExpr, ...]:
    """``dims`` with the minor extent rounded up to a multiple of ``pad_stride`` (None: unchanged)."""
    if pad_stride is None:
        return dims
    if len(dims) < 2:
        raise ScheduleError(f"stage: pad_stride needs a tile of rank >= 2 (this one has rank {len(dims)})",
                            hint="drop pad_stride: a one-axis tile has no row stride to pad")
    q = IConst(pad_stride)
    return dims[:-1] + (ibin("mul", ibin("floordiv", ibin("add", dims[-1], IConst(pad_stride - 1)), q), q),)


class ToTile(Mapper):
    """Every read of the source turned into the read of its tile cell ``parts``, at the tile's precision
    (``cvt(source[..], p)`` reads the tile as it is, a bare read converts it back to the source's dtype)."""

    def __init__(self, plan: Plan, tile: str, prec: str, slot: tuple[IExpr, ...] = ()) -> None:
        self.plan, self.tile, self.prec, self.slot = plan, tile, prec, slot

    def read(self) -> L.Ld:
        return L.Ld(self.tile, self.slot + self.plan.parts, self.prec)

    def map_cvt(self, e: L.Cvt) -> L.SExpr:
        if isinstance(e.x, L.Ld) and e.x.buf == self.plan.source and e.dtype == self.prec:
            return self.read()
        return super().map_cvt(e)

    def map_ld(self, e: L.Ld) -> L.SExpr:
        if e.buf != self.plan.source:
            return e
        return self.read() if self.prec == self.plan.dtype else L.Cvt(self.read(), self.plan.dtype)


def zero(dtype: str) -> L.Lit:
    """The literal 0 of ``dtype`` (the value an out-of-range slot of a tile holds)."""
    return L.Lit(0.0 if dtype_of(dtype).is_float else 0, dtype)


def load_value(plan: Plan, cell: tuple[IExpr, ...], prec: str, ctx: Any) -> L.SExpr:
    """The where-form value of one load: ``G ? cvt(source[cell], prec) : 0`` with the edge guard ``G`` folded
    under ``ctx`` (a plain read where it always holds)."""
    value: L.SExpr = L.Ld(plan.source, cell, plan.dtype)
    if prec != plan.dtype:
        value = L.Cvt(value, prec)
    guard: IExpr = IConst(1)
    for c, n in zip(cell, plan.shape):
        guard = conj(guard, conj(ibin("ge", c, IConst(0)), ibin("lt", c, n)))
    guard = simplify_cond(guard, ctx)
    return value if guard == IConst(1) else L.Sel(L.Ix(guard, "bool"), value, zero(prec), prec)


@dataclass(frozen=True)
class LoadNest:
    """A load nest: its outermost statement, the load assignment, its axis variables and loop names."""

    stmt: Any
    load: L.Assign
    axes: tuple[int, ...]
    names: tuple[str, ...]


def serial_load(p: ir.Program, plan: Plan, tile: str, prec: str, ctx: Any, new_var: Any, taken: set[str],
                loc: Any) -> LoadNest:
    """``for u in [0, d) (serial): tile[u] = G(u) ? cvt(source[o + u]) : 0`` (guard folded under ``ctx``)."""
    us = [new_var() for _ in plan.dims]
    names = []
    for a in range(len(us)):
        names.append(fresh_name(p, f"{tile}.load{a}", taken))
        taken.add(names[-1])
    for u, d in zip(us, plan.dims):
        ctx = ctx.with_loop(u, IConst(0), d)
    cell = tuple(ibin("add", o, IVar(u, 0)) for o, u in zip(plan.outer, us))
    st = L.Assign(tile, tuple(IVar(u, 0) for u in us), load_value(plan, cell, prec, ctx), loc)
    loops = [L.Loop(u, name, d, "serial", ir.Block((), ()), None, IConst(0), loc)
             for u, name, d in zip(us, names, plan.dims)]
    return LoadNest(nest(loops, ir.Block((), (st,))), st, tuple(us), tuple(names))


def place(p: ir.Program, plan: Plan, make: Any, sizes: Optional[dict[str, int]]) -> ir.Program:
    """``p`` with the anchor's body (or, with no anchor, the outermost tile loop) rewritten by ``make``:
    ``make(statements, ctx)`` returns the statements that replace ``statements`` there, ``ctx`` the isl
    context inside the anchor (before the outermost tile loop) under the bound ``sizes``."""
    if plan.anchor is not None:
        a = plan.anchor
        ctx = context_at(p, a, sizes).with_loop(a.var, a.start, a.extent)
        return with_body(p, replace_loop(p.body, a, [dataclasses.replace(a, body=ir.Block(
            a.body.args, tuple(make(list(a.body.ops), ctx)), a.body.yields))]))
    top = next(lp for lp in plan.chain if lp in plan.tile_loops)
    return with_body(p, replace_loop(p.body, top, make([top], context_at(p, top, sizes))))


def edge_guarded(loads: Sequence[L.Assign]) -> bool:
    """Whether any of a stage's loads keeps its edge guard (the where-form ``G ? source[cell] : 0`` that
    ``load_value`` leaves where ``G`` does not fold to true): then the tile holds a zero fringe."""
    return any(isinstance(ld.value, L.Sel) for ld in loads)


def fringe_obligations(tile: str, loads: Sequence[L.Assign], handles: tuple[str, ...]) -> tuple[Obligation, ...]:
    """The ``zero_fringe`` obligation of a tile whose loads keep an edge guard (none where every guard folds)."""
    if not edge_guarded(loads):
        return ()
    return (Obligation(Kind.ZERO_FRINGE, "stage", f"{tile} holds 0 at every cell whose source cell is out of "
                       "bounds: only its loads write it, each storing 0 exactly there", handles),)


def copy_holds(plan: Plan, tile: str, where: str) -> str:
    """The datamap formula of a read-only staged copy whose load runs ``where``."""
    cells = f"{plan.source}[{', '.join(map(str, plan.outer))}] + [0, {', '.join(map(str, plan.dims))})"
    return f"{tile}[u] holds {cells} cell o + u wherever it is read: {where}, and nothing writes {plan.source!r}"


def obligations(plan: Plan, tile: str, handles: tuple[str, ...], holds: str) -> tuple[Obligation, ...]:
    """The obligations of a staged copy whose datamap formula is ``holds``."""
    at = (plan.anchor.name,) if plan.anchor is not None else ()
    return (
        Obligation(Kind.DATAMAP, "stage", holds, at + handles),
        Obligation(Kind.DEPENDENCE, "stage", f"every read of {plan.source!r} goes to {tile}[t] for the cell o + t "
                   "it read before, loaded before the read with the value that cell holds", at),
        Obligation(Kind.COVERAGE, "stage", "tau is the identity: every old statement instance runs at the same "
                   "coordinates; the load nest is new work", at),
        Obligation(Kind.BOUNDS, "stage", f"the load reads {plan.source!r} only at in-bounds cells (its edge guard "
                   f"stores 0 elsewhere) and writes {tile} within its extents", handles),
    )
