"""split(loop, factor, tail): strip-mine one loop.

``for i in [0, N)`` becomes ``for o in [0, ceil(N/f)) { for ii in [0, f) { B[i := f*o + ii] } }``.

- ``tail="guard"``: when ``f`` does not divide ``N`` the inner body is wrapped in
  ``if f*o + ii < N`` (constructed, then folded by the simplifier when the extents prove it).
- ``tail="partition"``: a guard-free main nest over ``o in [0, N div f)`` followed by a
  remainder loop ``r in [0, N mod f)`` with ``i := f*(N div f) + r``.

Legality (the lemma of ``proofs/split.py``): with ``f >= 1``,
``tau(o, ii) = f*o + ii`` is a bijection from ``{(o, ii) : 0 <= o < ceil(N/f), 0 <= ii < f,
f*o + ii < N}`` onto ``[0, N)`` and is strictly increasing in the lexicographic order of
``(o, ii)``; so every iteration runs exactly once and in the original order
(``coverage``, ``dependence``). Both new loops inherit the loop's kind; a later bind of
either carries the noninterference obligation of its kind. A pipeline loop's policy and stage
blocks go to the inner loop (and to the remainder loop), the guard into each stage block
(``pipeline.stages.guarded``): the pipeline then runs its iterations ``ii`` per ``o``.
"""
from __future__ import annotations

from .. import ir
from . import args as A
from .registry import schedule_op
from .. import loopir as L
from ..index import IConst, IVar, ibin
from ..mapper import subst_node
from ..pipeline.stages import guarded
from .base import ScheduleError, fresh_name, loop_name, replace_loop, the_loop, with_body
from ..transform import Kind, Obligation, Piece, Tau, Transformed

TAILS = ("guard", "partition")


@schedule_op("split", [A.LoopName(), A.PosInt(), A.Enum(TAILS), A.Optional(A.NewLoopName()),
                       A.Optional(A.NewLoopName())])
def split(p: ir.Program, loop: str, factor: int, tail: str = "guard", outer: str | None = None,
          inner: str | None = None) -> Transformed:
    f = factor
    lp = the_loop(p, loop, "split")
    if lp.start != IConst(0):
        raise ScheduleError(f"split: loop {loop!r} must start at 0 (it starts at {lp.start})",
                            hint="split the loop before partitioning it, or split a segment that starts at 0")
    new_var = L.fresh_var(p)
    vo, vi = new_var(), new_var()
    o_name = loop_name(p, outer, f"{loop}.o", "split", freed=(loop,))
    i_name = loop_name(p, inner, f"{loop}.i", "split", freed=(loop,), taken={o_name})
    n = lp.extent
    fc = IConst(f)
    o, ii = IVar(vo, 0), IVar(vi, 0)
    index = ibin("add", ibin("mul", fc, o), ii)
    if tail == "guard":
        body = subst_node(lp.body, lp.var, index)
        guard = ibin("lt", index, n)
        inner_body = guarded(body, guard, lp.loc)
        outer_extent = ibin("floordiv", ibin("add", n, IConst(f - 1)), fc)
        new = [L.Loop(vo, o_name, outer_extent, lp.kind,
                      ir.Block((), (L.Loop(vi, i_name, fc, lp.kind, inner_body, None, IConst(0), lp.loc,
                                           lp.pipeline),)),
                      None, IConst(0), lp.loc)]
        tau = Tau((Piece(((lp.var, index),), guard),))
        handles = (o_name, i_name)
    else:
        main_extent = ibin("floordiv", n, fc)
        body = subst_node(lp.body, lp.var, index)
        vr = new_var()
        r_name = fresh_name(p, f"{loop}.tail", {o_name, i_name})
        rem = ibin("sub", n, ibin("mul", fc, main_extent))
        rem_index = ibin("add", ibin("mul", fc, main_extent), IVar(vr, 0))
        new = [L.Loop(vo, o_name, main_extent, lp.kind,
                      ir.Block((), (L.Loop(vi, i_name, fc, lp.kind, body, None, IConst(0), lp.loc, lp.pipeline),)),
                      None, IConst(0), lp.loc),
               L.Loop(vr, r_name, rem, lp.kind, subst_node(lp.body, lp.var, rem_index), None, IConst(0), lp.loc,
                      lp.pipeline)]
        tau = Tau((Piece(((lp.var, index),)), Piece(((lp.var, rem_index),))))
        handles = (o_name, i_name, r_name)
    obligations = (
        Obligation(Kind.COVERAGE, "split", f"tau(o, ii) = {f}*o + ii maps the new domain onto [0, {n}) bijectively",
                   (loop,)),
        Obligation(Kind.DEPENDENCE, "split", "tau is increasing in lexicographic (o, ii) order, so every dependence "
                   f"of {loop!r} keeps its direction", (loop,)),
    )
    return Transformed(with_body(p, replace_loop(p.body, lp, new)), tau, obligations, handles)
