"""insert_unit(loop, name, kind) and remove_unit(loop): add or drop a level with one iteration.

``insert_unit`` wraps the named loop in a new loop of extent 1 placed directly around it:
``for i { B }`` becomes ``for u in [0, 1) { for i { B } }`` (the default name is ``"i.unit"``,
the default kind the wrapped loop's kind; unbound). Nothing reads ``u``. To add a level around
a loop's whole body, insert it around the loops of that body.

``remove_unit`` drops a loop with exactly one iteration: ``for u in [s, s + 1) { B }`` becomes
``B[u := s]`` (``s`` is 0 unless the loop was partitioned). The extent must be provably 1
(constant-folded, or decided by isl from the loops and guards around the loop and the
schedule's bound sizes); a bound loop is not removed (remove a unit level before binding it).
A removed pipeline loop's stage blocks run as plain statements (``pipeline.stages.dissolved``):
one iteration has nothing to overlap.

Legality: both are the identity isomorphism of seed 004. ``tau`` is the identity on the old
coordinates (insert) or ``u := s`` (remove); a level with one value is a bijection onto
nothing (``coverage``). The cut the unit level adds or removes is observed only with a bijective
``tau_j`` (the projection dropping ``u``), so every old cut maps to a new one (``prefix_cut``).
"""
from __future__ import annotations

from typing import Optional

from .. import ir
from . import args as A
from .registry import schedule_op
from .. import loopir as L
from ..index import IConst, ibin
from ..mapper import subst_node
from ..pipeline.stages import dissolved
from .base import ScheduleError, loop_name, proves, replace_loop, the_loop, with_body
from ..transform import Kind, Obligation, Piece, Tau, Transformed


@schedule_op("insert_unit", [A.LoopName(), A.Optional(A.NewLoopName()), A.Optional(A.Enum(L.LOOP_KINDS))])
def insert_unit(p: ir.Program, loop: str, name: Optional[str] = None, kind: Optional[str] = None) -> Transformed:
    """Wrap loop ``loop`` in a new loop of extent 1 (see the module doc)."""
    lp = the_loop(p, loop, "insert_unit")
    unit_kind = lp.kind if kind is None else kind
    u_name = loop_name(p, name, f"{loop}.unit", "insert_unit")
    unit = L.Loop(L.fresh_var(p)(), u_name, IConst(1), unit_kind, ir.Block((), (lp,)), None, IConst(0), lp.loc)
    obligations = (
        Obligation(Kind.COVERAGE, "insert_unit", f"{u_name!r} has the one value 0: (u, {loop}, ...) -> ({loop}, ...) is a "
                   "bijection", (loop,)),
        Obligation(Kind.PREFIX_CUT, "insert_unit", f"every old cut maps to a new one; the cut above {u_name!r} projects "
                   "u away (tau_j bijective)", (loop,)),
    )
    return Transformed(with_body(p, replace_loop(p.body, lp, [unit])), Tau(), obligations, (u_name,))


@schedule_op("remove_unit", [A.LoopName(), A.BoundSizes()])
def remove_unit(p: ir.Program, loop: str, *, bound_sizes: Optional[dict[str, int]] = None) -> Transformed:
    """Drop loop ``loop``, which has exactly one iteration, substituting its start (see the module doc)."""
    lp = the_loop(p, loop, "remove_unit")
    if lp.binding is not None:
        raise ScheduleError(f"remove_unit: loop {loop!r} is bound to {lp.binding}",
                            hint="remove a unit level before binding it")
    if not proves(p, lp, ibin("eq", lp.extent, IConst(1)), bound_sizes):
        raise ScheduleError(f"remove_unit: the extent {lp.extent} of {loop!r} is not provably 1",
                            hint="only a loop with exactly one iteration can be removed; bind the sizes that make "
                                 "its extent 1 in tc.schedule(...)")
    body = subst_node(lp.body, lp.var, lp.start)
    if lp.pipeline is not None:  # a one-trip pipeline: nothing to overlap, its stage blocks run as blocks
        body = dissolved(body)
    obligations = (
        Obligation(Kind.COVERAGE, "remove_unit", f"{loop!r} runs exactly once ({lp.extent} = 1 was proved), so "
                   f"{loop} := {lp.start} is a bijection", (loop,)),
        Obligation(Kind.PREFIX_CUT, "remove_unit", f"the cut of {loop!r} vanishes; an observer of it maps to the cut "
                   "around it (tau_j bijective: the level has one instance)", (loop,)),
    )
    return Transformed(with_body(p, replace_loop(p.body, lp, list(body.ops))), Tau((Piece(((lp.var, lp.start),)),)),
                       obligations)
