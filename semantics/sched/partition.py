"""partition(loop, breakpoints): index-set splitting of one loop into consecutive segments.

``for i in [s, e) { B }`` with breakpoints ``b_1 < ... < b_m`` becomes

    for i0 in [s, b_1)     { B[i := i0] }      named <loop>.s0
    for i1 in [b_1, b_2)   { B[i := i1] }      named <loop>.s1
    ...
    for im in [b_m, e)     { B[i := im] }      named <loop>.s<m>

Segment ranges stay absolute (``Loop.start`` is the previous breakpoint), so no index
arithmetic changes; each segment's narrowed range lets the simplifier decide the guards
that depend on ``i`` (an epilogue-free main segment: partition at the last full tile, then
split the main segment). Each copy of ``B`` is made by the same copier as a materializing
unroll: loops inside get fresh variables and names ``<name>.s<j>``, buffers declared inside
``<buffer>_s<j>``. Handles: the segment names. Datamaps: each copied buffer is ``Renamed`` from
its original. Each segment of a pipeline loop keeps its policy and stage blocks (a pipeline over
its part of the range).

Preconditions (``ScheduleError`` otherwise): ``breakpoints`` is a non-empty list of ints,
strictly increasing, and strictly inside ``(s, e)`` wherever that is decidable (bound sizes,
enclosing loops and guards); a hardware-bound loop is refused (hardware loops start at 0).

Legality: tau maps ``i_j`` in segment ``j`` to ``i = i_j``; with ``s < b_1 < ... < b_m < e``
the segments are non-empty and tile ``[s, e)`` (``coverage``, listed for the checker since it
is only decided here where sizes are bound), and running them in increasing ``j`` keeps
every iteration in its original order (``dependence``).

``partition_breakpoints(p, loop)`` proposes breakpoints: the points where a guard inside
the loop (an ``if`` condition or a select's index condition, through ``&&``, ``||``, ``!``)
may flip. Each comparison is normalized to ``k*i + off < 0`` (``a <= b`` is ``a - b - 1 < 0``,
``a == b`` and ``a != b`` contribute both one-sided forms), with ``off`` ranging over
``[lo, hi]`` as the other variables range over their loops (isl, bound sizes). The
condition is constant in ``i`` outside ``[ceil(-hi/k), ceil(-lo/k)]`` for ``k > 0`` and
outside ``[floor(lo/-k) + 1, floor(hi/-k) + 1]`` for ``k < 0``; those two edges are
candidates. The answer keeps the candidates strictly inside ``(s, e)``, sorted, unique.
"""
from __future__ import annotations

from typing import Iterator, Optional

import islpy as isl

from .. import ir
from . import args as A
from .registry import schedule_op
from .. import loopir as L
from ..affine import Context, to_isl, var_name
from ..solver_names import solver_name
from ..index import IBin, IConst, IExpr, INot, IVar, const_value, ibin, linear
from .base import Copier, ScheduleError, context_at, hardware_bound, replace_loop, the_loop, with_body
from ..transform import Kind, Obligation, Tau, Transformed


@schedule_op("partition", [A.LoopName(), A.ListOf(A.Int(), within="loop"), A.BoundSizes()])
def partition(p: ir.Program, loop: str, breakpoints: list, *,
              bound_sizes: Optional[dict[str, int]] = None) -> Transformed:
    lp = the_loop(p, loop, "partition")
    if hardware_bound(lp):
        raise ScheduleError(f"partition: loop {loop!r} is bound to {lp.binding}; hardware loops start at 0",
                            hint="partition the loop before binding it, then bind the segments that start at 0")
    end = ibin("add", lp.start, lp.extent)
    bps = [IConst(b) for b in breakpoints]
    bounds = [lp.start] + bps + [end]
    ctx = context_at(p, lp, bound_sizes)
    increasing = all(a < b for a, b in zip(breakpoints, breakpoints[1:]))
    if not increasing or ctx.decide(ibin("lt", lp.start, bps[0])) is False or \
            ctx.decide(ibin("lt", bps[-1], end)) is False:
        raise ScheduleError(f"partition: breakpoints must be strictly increasing and strictly inside the range "
                            f"[{lp.start}, {end}) of {loop!r}, got {list(breakpoints)}",
                            hint="every segment must run at least one iteration")
    copier = Copier(p)
    segments, pieces, handles = [], [], []
    for j, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
        var, name = copier.new_var(), copier.loop_name(f"{loop}.s{j}")
        c = copier.copy(lp.body, lp.var, IVar(var, 0), f"s{j}")
        segments.append(L.Loop(var, name, ibin("sub", hi, lo), lp.kind, c.body, lp.binding, lo, lp.loc, lp.pipeline))
        pieces.append(c.piece(lp.var, IVar(var, 0)))
        handles.append(name)
    chain = " < ".join(str(b) for b in bounds)
    obligations = (
        Obligation(Kind.COVERAGE, "partition", f"{chain}: the segments are non-empty and tile the range of {loop!r}",
                   (loop,)),
        Obligation(Kind.DEPENDENCE, "partition", "the segments run in increasing order, each in the order of "
                   f"{loop!r}, so every iteration keeps its place", (loop,)),
    )
    return Transformed(with_body(p, replace_loop(p.body, lp, segments)), Tau(tuple(pieces)), obligations,
                       tuple(handles), tuple(copier.renamed))


# ----------------------------------------------------------------------------- breakpoints
def _conditions(block: ir.Block, ctx: Context) -> Iterator[tuple[IExpr, Context]]:
    """Every guard condition inside ``block`` with the context it is evaluated in."""
    for st in block.ops:
        if isinstance(st, L.Loop):
            yield from _conditions(st.body, ctx.with_loop(st.var, st.start, st.extent))
        elif isinstance(st, L.If):
            yield st.cond, ctx
            yield from _conditions(st.body, ctx.with_fact(st.cond))
        elif isinstance(st, (L.Assign, L.Accum)):
            for cond in _select_conditions(st.value):
                yield cond, ctx


def _select_conditions(e: L.SExpr) -> Iterator[IExpr]:
    if isinstance(e, L.Sel):
        if isinstance(e.cond, L.Ix):
            yield e.cond.expr
        for sub in (e.cond, e.a, e.b):
            yield from _select_conditions(sub)
    elif isinstance(e, (L.Un, L.Cvt)):
        yield from _select_conditions(e.x)
    elif isinstance(e, L.Bin):
        yield from _select_conditions(e.a)
        yield from _select_conditions(e.b)


def _negative_forms(cond: IExpr) -> Iterator[IExpr]:
    """Expressions ``d`` such that ``cond`` is a boolean combination of the tests ``d < 0``."""
    if isinstance(cond, INot):
        yield from _negative_forms(cond.a)
    elif isinstance(cond, IBin) and cond.op in ("and", "or"):
        yield from _negative_forms(cond.a)
        yield from _negative_forms(cond.b)
    elif isinstance(cond, IBin):
        lt = ibin("sub", cond.a, cond.b)  # a < b
        gt = ibin("sub", cond.b, cond.a)  # a > b
        one = IConst(1)
        forms = {"lt": [lt], "gt": [gt], "le": [ibin("sub", lt, one)], "ge": [ibin("sub", gt, one)],
                 "eq": [ibin("sub", lt, one), ibin("sub", gt, one)], "ne": [ibin("sub", lt, one), ibin("sub", gt, one)]}
        yield from forms.get(cond.op, [])


def _range(ctx: Context, e: IExpr) -> Optional[tuple[int, int]]:
    """The least and greatest value of ``e`` in ``ctx`` (None unless both are constants isl finds)."""
    text, dom = to_isl(e), ctx.domain([e])
    if text is None or dom is None or dom.is_empty():
        return None
    params = dom.get_space().get_var_names(isl.dim_type.param)
    if not set(params) <= {solver_name(n) for n in ctx.sizes}:
        return None
    vs = ", ".join(var_name(r, a) for r, a, _, _ in ctx.vars)
    graph = isl.Map(f"[{', '.join(params)}] -> {{ [{vs}] -> [z] : z = {text} }}")
    values = graph.intersect_domain(dom).range()
    if not values.is_bounded():
        return None
    lo, hi = (s.sample_point().get_coordinate_val(isl.dim_type.set, 0).to_python()
              for s in (values.lexmin(), values.lexmax()))
    return int(lo), int(hi)


def _flips(k: int, lo: int, hi: int) -> tuple[int, int]:
    if k > 0:
        return -(hi // k), -(lo // k)  # ceil(-hi/k), ceil(-lo/k)
    return lo // -k + 1, hi // -k + 1


def partition_breakpoints(p: ir.Program, loop: str, *, bound_sizes: Optional[dict[str, int]] = None) -> list[int]:
    """The points strictly inside ``loop``'s range where a guard inside it may flip (see the module doc)."""
    lp = the_loop(p, loop, "partition_breakpoints")
    start, extent = const_value(lp.start, bound_sizes), const_value(lp.extent, bound_sizes)
    if start is None or extent is None:
        raise ScheduleError(f"partition_breakpoints: the range [{lp.start}, {lp.start} + {lp.extent}) of {loop!r} "
                            "is not a constant", hint="bind the sizes it reads in tc.schedule")
    inside = context_at(p, lp, bound_sizes).with_loop(lp.var, lp.start, lp.extent)
    points: set[int] = set()
    for cond, ctx in _conditions(lp.body, inside):
        for d in _negative_forms(cond):
            lin = linear(d, lp.var)
            if lin is None or lin[0] == 0:
                continue
            rng = _range(ctx, lin[1])
            if rng is not None:
                points.update(_flips(lin[0], *rng))
    return sorted(b for b in points if start < b < start + extent)
