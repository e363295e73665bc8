"""unroll(loop, materialize=False): repeat a loop's body once per iteration.

- ``materialize=False`` marks the loop (binding ``unrolled``): a backend repeats the body with
  the index bound to a per-copy constant. Nothing else changes; tau is the identity.
- ``materialize=True`` rewrites the loop form itself:

      for i in [s, s + n) { B }   ->   B[i := s] ; B[i := s + 1] ; ... ; B[i := s + n - 1]

  ``s`` and ``n`` must be constants (under the schedule's bound sizes). In copy ``k`` every
  loop inside ``B`` gets a fresh variable and the name ``<name>.u<k>`` (made unique), every
  buffer declared inside ``B`` the name ``<buffer>_u<k>``. The copies are then simplified in
  the loop's context (their constant indices decide guards) and repeated loads among their
  top-level statements are shared through scalar temporaries (``cse.py``, whose side
  condition makes that rewrite exact). Handles: the names of the copies' loops. Datamaps: each
  copied buffer is ``Renamed`` from its original, each temporary ``Forward``s its load. A
  pipeline loop leaves no loop to overlap: each copy's stage blocks run as plain statements
  (``pipeline.stages.dissolved``); a marked one keeps its policy and stage blocks.

Legality: tau maps copy ``k`` (and its inner loops) to iteration ``i = s + k`` (and the
original inner loops); the copies perform ``s, ..., s + n - 1`` once each in increasing
order (``coverage``), which is the loop's serial order and so admitted by every loop kind:
any order for parallel, the lexicographic update order for reduce under every policy
(``dependence``). A loop bound to hardware (grid / block / warp / lane) is refused: its
iterations run concurrently, in lockstep between barriers, which copies in sequence do not
reproduce; bind it to ``serial`` first.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from .. import ir
from . import args as A
from .registry import schedule_op
from .. import loopir as L
from ..index import IConst, const_value
from ..pipeline.stages import dissolved
from ..printer import sexpr
from .base import Copier, ScheduleError, context_at, hardware_bound, replace_loop, the_loop, with_body
from ..transform import Kind, Obligation, Tau, Transformed
from .cse import cse_loads
from .simplify import simplify_block


@schedule_op("unroll", [A.LoopName(), A.Bool(), A.BoundSizes()])
def unroll(p: ir.Program, loop: str, materialize: bool = False, *,
           bound_sizes: Optional[dict[str, int]] = None) -> Transformed:
    lp = the_loop(p, loop, "unroll")
    if not materialize:
        marked = dataclasses.replace(lp, binding="unrolled")  # a pipeline loop keeps its policy and stage blocks
        return Transformed(with_body(p, replace_loop(p.body, lp, [marked])), Tau(), ())
    if hardware_bound(lp):
        raise ScheduleError(f"unroll: loop {loop!r} is bound to {lp.binding}; its iterations run concurrently",
                            hint=f"bind {loop!r} to 'serial' before materializing, or unroll an inner loop")
    start, n = const_value(lp.start, bound_sizes), const_value(lp.extent, bound_sizes)
    if start is None or n is None:
        raise ScheduleError(f"unroll: loop {loop!r} runs over [{lp.start}, {lp.start} + {lp.extent}), "
                            "not a constant range", hint="split it by a constant factor first and unroll the inner "
                            "loop, or bind the sizes its range reads in tc.schedule")
    copier = Copier(p)
    copies = [copier.copy(lp.body, lp.var, IConst(start + k), f"u{k}") for k in range(n)]
    block = ir.Block((), tuple(st for c in copies for st in c.body.ops))
    if lp.pipeline is not None:  # no loop is left to overlap: each copy's stage blocks run as blocks
        block = dissolved(block)
    block = simplify_block(block, context_at(p, lp, bound_sizes))
    stmts, forwards = cse_loads(block.ops, copier.buffers)
    tau = Tau(tuple(c.piece(lp.var, IConst(start + k)) for k, c in enumerate(copies)))
    obligations = (
        Obligation(Kind.COVERAGE, "unroll", f"copy k performs iteration {start} + k of {loop!r}, for k in [0, {n})",
                   (loop,)),
        Obligation(Kind.DEPENDENCE, "unroll", f"the copies run in increasing k, the serial order of {loop!r}", (loop,)),
    ) + tuple(Obligation(Kind.DATAMAP, "unroll", f"{f.buffer} holds {sexpr(f.expression)} wherever it is read", (loop,))
              for f in forwards)
    handles = tuple(inner.name for inner in L.loops(ir.Block((), stmts)))
    return Transformed(with_body(p, replace_loop(p.body, lp, list(stmts))), tau, obligations, handles,
                       tuple(copier.renamed) + forwards)
