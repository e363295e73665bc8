"""coalesce(loops, name) and reshape(loop, extents, names): mixed-radix reindexing of a level.

``coalesce`` merges a perfectly nested band ``l_0 > ... > l_{k-1}`` with extents
``N_0, ..., N_{k-1}`` into one loop ``f in [0, N_0 * ... * N_{k-1})``::

    tau(f) = (l_0, ..., l_{k-1}),   l_j = (f // S_j) mod N_j,   S_j = N_{j+1} * ... * N_{k-1}

(``l_0 = f // S_0`` needs no modulo: ``f < N_0 * S_0``). Preconditions: every band loop starts
at 0, all have one kind, none is bound (merge loops before binding them), and no band extent
reads a band variable (the band is a rectangle). Guards between band loops are sunk onto the
innermost body (``Band.inner_body``). ``fuse`` is the two-loop case.

``reshape`` is the inverse: a loop ``i in [0, N)`` that starts at 0 and is unbound becomes the
nest ``l_0 > ... > l_{k-1}`` with constant extents ``e_j`` (``k >= 2``) and
``tau(l_0, ..., l_{k-1}) = sum_j S_j * l_j`` (``S_j = e_{j+1} * ... * e_{k-1}``). It requires a
proved cardinality ``e_0 * ... * e_{k-1} = N``, decided by isl from the extent, the loops and
guards around the loop, and the schedule's bound sizes; otherwise "cannot prove cardinality".
The innermost loop ``l_{k-1}`` keeps a pipeline loop's policy (its body is the stage blocks).

Legality: mixed radix is a bijection between ``[0, prod_j N_j)`` and ``prod_j [0, N_j)``
(``coverage``) that is increasing in the lexicographic order of the band, in both directions,
so every dependence keeps its direction (``dependence``). The cuts between band loops vanish
(coalesce) or appear (reshape); the cuts above and below the level map to themselves
(``prefix_cut``: a vanishing cut must not be observed).

The default name of a merged loop is its loops' names joined by ``*``, or the op's name
when that would exceed ``MAX_DEFAULT_NAME`` characters (names would double with every
split and fuse of the same loop otherwise).
"""
from __future__ import annotations

import math
from typing import Any, Optional

from .. import ir
from . import args as A
from .registry import schedule_op
from .. import loopir as L
from ..index import IConst, IExpr, IVar, free_vars, ibin, substitute_many
from ..mapper import map_node, subst_node
from .base import ScheduleError, band, loop_name, nest, proves, replace_loop, the_loop, with_body
from ..transform import Kind, Obligation, Piece, Tau, Transformed

MAX_DEFAULT_NAME = 64


def merge(p: ir.Program, names: tuple[str, ...], name: Optional[str], op: str) -> Transformed:
    """Coalesce the band ``names`` (outermost first) into one loop; ``op`` names the caller in errors."""
    b = band(p, names, op)
    order = tuple(lp.name for lp in b.loops)
    if order != names:
        raise ScheduleError(f"{op}: the loops nest as {' > '.join(order)}, not in the order given",
                            hint=f"name them outermost first: {list(order)}")
    first = b.loops[0]
    band_vars = {(lp.var, 0): lp.name for lp in b.loops}
    for lp in b.loops:
        if lp.start != IConst(0):
            raise ScheduleError(f"{op}: loop {lp.name!r} must start at 0 (it starts at {lp.start})",
                                hint="merge loops that start at 0 (before partitioning them)")
        if lp.kind != first.kind:
            raise ScheduleError(f"{op}: loop {first.name!r} is {first.kind} but {lp.name!r} is {lp.kind}",
                                hint="only loops of one kind merge into one loop")
        if lp.binding is not None:
            raise ScheduleError(f"{op}: loop {lp.name!r} is bound to {lp.binding}",
                                hint=f"{op} loops before binding them")
        read = sorted(band_vars[v] for v in free_vars(lp.extent) if v in band_vars)
        if read:
            raise ScheduleError(f"{op}: the extent {lp.extent} of loop {lp.name!r} reads loop {read[0]!r}, so the "
                                "band is not a rectangle", hint="only a rectangular band merges into one loop")
    default = "*".join(names)
    f_name = loop_name(p, name, default if len(default) <= MAX_DEFAULT_NAME else op, op, freed=names)
    vf = L.fresh_var(p)()
    f = IVar(vf, 0)
    values: dict[int, IExpr] = {}
    stride: IExpr = IConst(1)
    for lp in reversed(b.loops):
        quotient = ibin("floordiv", f, stride)
        values[lp.var] = quotient if lp is first else ibin("mod", quotient, lp.extent)
        stride = ibin("mul", lp.extent, stride)
    body = map_node(b.inner_body(), lambda e: substitute_many(e, values))
    merged = L.Loop(vf, f_name, stride, first.kind, body, None, IConst(0), first.loc)
    tau = Tau((Piece(tuple((lp.var, values[lp.var]) for lp in b.loops)),))
    listed = ", ".join(names)
    obligations = (
        Obligation(Kind.COVERAGE, op, f"tau({f_name}) = mixed radix over ({listed}) maps [0, {stride}) onto the band's "
                   "domain bijectively", names),
        Obligation(Kind.DEPENDENCE, op, f"tau is increasing in the lexicographic order of ({listed}), so every dependence "
                   "keeps its direction", names),
        Obligation(Kind.PREFIX_CUT, op, f"the cuts between {listed} vanish: none is an anchor, frontier, memory owner or "
                   f"convergence point; the cuts around the band map to those around {f_name!r} (tau_j = id)", names),
    )
    return Transformed(with_body(p, replace_loop(p.body, first, [merged])), tau, obligations, (f_name,))


@schedule_op("coalesce", [A.ListOf(A.LoopName(), min_len=2, distinct=True), A.Optional(A.NewLoopName())])
def coalesce(p: ir.Program, loops: list[str], name: Optional[str] = None) -> Transformed:
    """Merge the perfectly nested band ``loops`` (outermost first) into one loop (see the module doc)."""
    return merge(p, tuple(loops), name, "coalesce")


@schedule_op("reshape", [A.LoopName(), A.ListOf(A.PosInt(), min_len=2, product_of="loop"),
                         A.Optional(A.ListOf(A.NewLoopName(), min_len=2, distinct=True, length_of="extents")),
                         A.BoundSizes()])
def reshape(p: ir.Program, loop: str, extents: list[int], names: Optional[list[str]] = None, *,
            bound_sizes: Optional[dict[str, int]] = None) -> Transformed:
    """Split loop ``loop`` into a nest with the given constant ``extents`` (see the module doc)."""
    es = list(extents)
    given: list[Any] = [None] * len(es) if names is None else list(names)
    lp = the_loop(p, loop, "reshape")
    if lp.start != IConst(0):
        raise ScheduleError(f"reshape: loop {loop!r} must start at 0 (it starts at {lp.start})",
                            hint="reshape a loop that starts at 0 (before partitioning it)")
    if lp.binding is not None:
        raise ScheduleError(f"reshape: loop {loop!r} is bound to {lp.binding}",
                            hint="reshape loops before binding them")
    total = math.prod(es)
    if not proves(p, lp, ibin("eq", lp.extent, IConst(total)), bound_sizes):
        raise ScheduleError(f"reshape: cannot prove cardinality: the extent {lp.extent} of {loop!r} is not provably "
                            f"{' * '.join(map(str, es))} = {total}",
                            hint="choose extents whose product is the loop's extent, or bind the sizes it reads "
                                 "in tc.schedule(...)")
    new_var = L.fresh_var(p)
    taken: set[str] = set()
    headers = []
    for k, (e, g) in enumerate(zip(es, given)):
        n = loop_name(p, g, f"{loop}.{k}", "reshape", freed=(loop,), taken=taken)
        taken.add(n)
        headers.append(L.Loop(new_var(), n, IConst(e), lp.kind, lp.body, None, IConst(0), lp.loc,
                              lp.pipeline if k == len(es) - 1 else None))  # the innermost runs the pipeline
    index: IExpr = IConst(0)
    stride = 1
    for h, e in zip(reversed(headers), reversed(es)):
        index = ibin("add", ibin("mul", IConst(stride), IVar(h.var, 0)), index)
        stride *= e
    new = nest(headers, subst_node(lp.body, lp.var, index))
    handles = tuple(h.name for h in headers)
    listed = ", ".join(handles)
    obligations = (
        Obligation(Kind.COVERAGE, "reshape", f"tau({listed}) = {index} maps prod [0, e_j) onto [0, {lp.extent}) "
                   f"bijectively ({' * '.join(map(str, es))} = {lp.extent} was proved)", (loop,)),
        Obligation(Kind.DEPENDENCE, "reshape", f"tau is increasing in the lexicographic order of ({listed}), so every "
                   f"dependence of {loop!r} keeps its direction", (loop,)),
        Obligation(Kind.PREFIX_CUT, "reshape", f"the cuts between {listed} are new and unobserved; the cuts around "
                   f"{loop!r} map to those around the nest (tau_j = id)", (loop,)),
    )
    return Transformed(with_body(p, replace_loop(p.body, lp, [new])), Tau((Piece(((lp.var, index),)),)), obligations,
                       handles)
