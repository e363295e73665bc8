"""Hoisted staging (``stage(..., hoisted=True)``): a constant source packed once, before the routine.

Per source axis ``a`` the outer part must be ``o_a = sum_j k_j * x_j + b`` over loops ``x_j``
enclosing the reads, with ``k_j`` and ``b >= 0`` multiples of the (constant) tile extent ``d_a``; its
*outer coordinate* is ``q_a = o_a / d_a``, of which there are ``Q_a = ceil(shape_a / d_a)``. The
packed buffer covers the whole source, outer coordinates first, then the tile axes:

    constant packed: p[Q_0, ..., Q_{r-1}, d_0, ..., d_{r-1}]         (the body's first statement)
    for q in [0, Q), u in [0, d) (serial):
        packed[q, u] = (q*d + u < shape) ? cvt(source[q*d + u], p) : 0     (pad slots zero, guard folded)
    ... reads source[o + t] become packed[o / d, t] ...

no load nest, no barriers. The interpreter runs the pack as the loop it is; a backend may compute
it once and reuse it across calls (the source is declared constant: ``constant.py``).

Preconditions (``ScheduleError``): ``shared=False`` and no ``pad_stride`` (``stage_plan``); the source
is marked constant (``s.constant(source)``); no tile loop is bound to hardware; the tile extents are
constant; every outer part is an increasing affine function of enclosing loops with a non-negative
constant offset (no size or other symbol), its coefficients and offset multiples of the tile extent.

Legality: cell ``(q, u)`` of the pack holds ``source[q*d + u]`` (zero past the source's end); the
pack runs before every read and the source is never written, so a read ``packed[o / d, t]`` reads
``source[o + t]`` (``o`` a multiple of ``d``, ``0 <= t < d``): ``datamap``, ``dependence``; the pack
reads the source only in bounds (``bounds``).
"""
from __future__ import annotations

from typing import Optional

from .. import ir
from .. import loopir as L
from ..affine import Context
from ..index import IConst, IExpr, IVar, const_value, ibin, size_names
from ..transform import Copy, Live, Tau, Transformed
from .base import ScheduleError, buffer_names, fresh_buffer, fresh_name, nest, with_body
from ..constants import constant_inputs
from .index_terms import split_terms
from .stage_plan import Plan, ToTile, copy_holds, load_value, obligations


def _outer_coordinates(plan: Plan, sizes: Optional[dict[str, int]]) -> tuple[tuple[int, ...], tuple[IExpr, ...]]:
    """The constant tile extents ``d`` and the outer coordinates ``q_a = o_a / d_a`` (module doc)."""
    dims, qs = [], []
    for a, (o, d) in enumerate(zip(plan.outer, plan.dims)):
        n = const_value(d, sizes)
        if n is None:
            raise ScheduleError(f"stage: hoisting needs constant tile extents; axis {a} of {plan.source!r} has {d}",
                                hint="bind the sizes the tile loops' extents read, or stage without hoisted")
        rest, terms = split_terms(o, plan.chain, "stage", plan.source,
                                  "hoist a source whose outer index terms are enclosing loops with positive "
                                  "coefficients")
        if not isinstance(rest, IConst) or size_names(o):
            raise ScheduleError(f"stage: the outer part {o} of {plan.source!r}'s index reads a symbol no enclosing "
                                "loop binds; a pack made before the routine runs has no value for it",
                                hint="hoist a source indexed by loops only (no sizes or parameters in its index)")
        bad = [str(c) for _, c in terms if c % n] + ([str(rest.value)] if rest.value % n or rest.value < 0 else [])
        if bad:
            raise ScheduleError(f"stage: the outer part {o} of {plan.source!r}'s index on axis {a} is not a multiple "
                                f"of the tile extent {n} ({', '.join(bad)}): the pack's tiles would overlap",
                                hint="hoist over tile loops that cover whole blocks of the outer loops (split by "
                                     "the tile extent)")
        q: IExpr = IConst(rest.value // n)
        for lp, c in terms:
            q = ibin("add", q, ibin("mul", IConst(c // n), IVar(lp.var, 0)))
        dims.append(n)
        qs.append(q)
    return tuple(dims), tuple(qs)


def stage_hoisted(p: ir.Program, plan: Plan, prec: str, sizes: Optional[dict[str, int]]) -> Transformed:
    """The hoisted mode of ``stage`` (module doc)."""
    if plan.source not in constant_inputs(p):
        raise ScheduleError(f"stage: hoisting packs {plan.source!r} once, before the routine, so it must be marked "
                            "constant", hint=f"call s.constant({plan.source!r}) first (the caller promises its "
                                             "values do not change between calls)")
    dims, qs = _outer_coordinates(plan, sizes)
    counts = tuple(ibin("floordiv", ibin("add", n, IConst(d - 1)), IConst(d)) for n, d in zip(plan.shape, dims))
    packed = fresh_buffer(f"{plan.source}.packed", buffer_names(p))
    new_var, taken = L.fresh_var(p), set()
    vs = [new_var() for _ in range(2 * len(dims))]
    extents = counts + tuple(IConst(d) for d in dims)
    names = []
    for k in range(len(vs)):
        names.append(fresh_name(p, f"{packed}.{'qu'[k >= len(dims)]}{k % len(dims)}", taken))
        taken.add(names[-1])
    ctx = Context(dict(sizes or {}))
    for v, e in zip(vs, extents):
        ctx = ctx.with_loop(v, IConst(0), e)
    r = len(dims)
    cell = tuple(ibin("add", ibin("mul", IVar(vs[a], 0), IConst(dims[a])), IVar(vs[r + a], 0)) for a in range(r))
    loc = plan.tile_loops[0].loc
    load = L.Assign(packed, tuple(IVar(v, 0) for v in vs), load_value(plan, cell, prec, ctx), loc)
    loops = [L.Loop(v, name, e, "serial", ir.Block((), ()), None, IConst(0), loc) for v, name, e in zip(vs, names,
                                                                                                          extents)]
    decl = L.Decl(L.Buffer(packed, prec, extents, "constant"), loc)
    body = ToTile(plan, packed, prec, qs).map_block(p.body)
    out = with_body(p, ir.Block(body.args, (decl, nest(loops, ir.Block((), (load,))), *body.ops), body.yields))
    names_t = tuple(names)
    holds = copy_holds(plan, packed, "packed once before the routine (outer coordinate q = o / d, then the tile "
                       "axes)")
    return Transformed(out, Tau(), obligations(plan, packed, names_t, holds), names_t,
                       (Copy(packed, plan.source, tuple(vs), cell, Live(load)),))
