"""pad(loop, to_multiple_of): extend a loop to a multiple of ``t``, guarding its effects.

    for i in [0, N) { B }   ->   for i in [0, M) { B' }        M = ceil(N / t) * t

where ``B'`` is ``B`` with every effectful leaf statement ``S`` (``Assign``, ``Accum``, at
any depth) replaced by ``if i < N { S }``. Leaves, not the whole body: barriers,
declarations, loops and existing guards stay as they are, so a barrier stays under uniform
control flow. When ``t`` divides ``N`` provably (bound sizes, enclosing loops and guards) the
op is the identity. Purpose: later splits by factors of ``t`` divide ``M`` and leave no
remainder guard; the leaf guards are the flip points ``partition_breakpoints`` reports.

Preconditions (``ScheduleError`` otherwise): ``t`` is a positive int; the loop starts at 0.

Legality: tau is the identity restricted to ``i < N``. The pad iterations ``i in [N, M)``
have no effect: each store and update is guarded off, loads happen only in the values of
those statements, and index expressions, declarations and barriers change no cell. So the
op is unconditionally meaning-preserving (``coverage`` is listed and holds by
construction); a hardware-bound loop also lists ``hardware_limits`` for the larger extent.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from .. import ir
from . import args as A
from .registry import schedule_op
from .. import loopir as L
from ..index import IConst, IExpr, IVar, ibin
from .base import ScheduleError, hardware_bound, proves, replace_loop, the_loop, with_body
from ..transform import Kind, Obligation, Piece, Tau, Transformed


def _guard_leaves(block: ir.Block, cond: IExpr) -> ir.Block:
    ops = []
    for st in block.ops:
        if isinstance(st, (L.Assign, L.Accum)):
            st = L.If(cond, ir.Block((), (st,)), st.loc)
        elif isinstance(st, (L.Loop, L.If)):
            st = dataclasses.replace(st, body=_guard_leaves(st.body, cond))
        ops.append(st)
    return ir.Block(block.args, tuple(ops), block.yields)


@schedule_op("pad", [A.LoopName(), A.PosInt(), A.BoundSizes()])
def pad(p: ir.Program, loop: str, to_multiple_of: int, *,
        bound_sizes: Optional[dict[str, int]] = None) -> Transformed:
    t = to_multiple_of
    lp = the_loop(p, loop, "pad")
    if lp.start != IConst(0):
        raise ScheduleError(f"pad: loop {loop!r} must start at 0 (it starts at {lp.start})",
                            hint="pad the loop before partitioning it, or pad a segment that starts at 0")
    n = lp.extent
    if proves(p, lp, ibin("eq", ibin("mod", n, IConst(t)), IConst(0)), bound_sizes):
        return Transformed(p, Tau(), ())
    m = ibin("mul", ibin("floordiv", ibin("add", n, IConst(t - 1)), IConst(t)), IConst(t))
    i = IVar(lp.var, 0)
    cond = ibin("lt", i, n)
    new = dataclasses.replace(lp, extent=m, body=_guard_leaves(lp.body, cond))  # stage blocks and policy kept
    obligations = [Obligation(Kind.COVERAGE, "pad", f"iterations {loop!r} < {n} run as before; those in [{n}, {m}) "
                              "have every effect guarded off", (loop,))]
    if hardware_bound(lp):
        obligations.append(Obligation(Kind.HARDWARE_LIMITS, "pad", f"{loop!r} as {lp.binding} fits the target with the "
                                      f"padded extent {m}", (loop,)))
    return Transformed(with_body(p, replace_loop(p.body, lp, [new])), Tau((Piece(((lp.var, i),), cond),)),
                       tuple(obligations))
