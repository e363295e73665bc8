"""fission(loop, after): distribute a loop over its body, cutting after one statement.

``for i in R { S_1 ... S_k S_k+1 ... S_n }``, with ``S_k`` the statement ``after`` names, becomes

    for i  in R { S_1 ... S_k }                   named <loop>.f0 (the loop's own variable)
    for i2 in R { S_k+1 ... S_n [i := i2] }       named <loop>.f1 (a fresh variable)

``after`` names a statement directly in the loop's body as ``s.show()`` prints it: a loop by its
name, a store or update by the buffer it writes, a guard by the names of what it holds
(``base.statement_names``). Both loops keep the loop's kind, binding, start and extent; loops
inside keep their names and variables. Handles: ``(<loop>.f0, <loop>.f1)`` (made unique).

Declarations directly in the body: one before the cut that only statements after the cut use
moves to the front of the second loop; one after the cut stays in it; any other stays in the
first loop. A buffer declared in the body and used on both sides of the cut is refused: each
iteration's instance would have to survive from the first loop into the second, which needs
one cell per iteration (``expand_dim``) declared outside the loop (``lift_alloc``).

Legality. tau is ``i := i`` on the first loop and ``i := i2`` on the second:

- ``coverage``: each loop runs every iteration of ``R`` exactly once, so every old instance of
  ``S_1 .. S_k`` has one image in the first loop and every one of ``S_k+1 .. S_n`` one in the second;
- ``dependence``: the new program runs every first-loop instance before every second-loop
  instance and keeps the order inside each loop; the old order agreed on every pair
  (``S_a`` at ``i1``, ``S_b`` at ``i2``, ``a <= k < b``) with ``i1 <= i2``. So fission is legal iff

      no i1, i2 in R with i2 < i1, a <= k < b:  conflict(S_a(i1), S_b(i2))

  (one cell, at least one writing, not two commuting updates of one reducer).

Preconditions (``ScheduleError`` otherwise): ``after`` names exactly one statement directly in
the body, and some statement other than a declaration follows it; the body holds no barrier
(the two loops would split its phases); the loop is not bound to a hardware index (fission
first, then bind each loop).
"""
from __future__ import annotations

import dataclasses

from .. import ir
from .. import loopir as L
from . import args as A
from .registry import schedule_op
from ..index import IVar
from ..mapper import subst_node
from .base import (ScheduleError, describe_all, fresh_name, hardware_bound, named_positions, replace_loop, the_loop,
                   touched, with_body)
from ..transform import Kind, Obligation, Piece, Tau, Transformed


def _halves(lp: L.Loop, cut: int) -> tuple[list, list]:
    """The statements of ``lp``'s body before and after the cut at position ``cut``, declarations placed
    with the statements that use them (see the module doc)."""
    ops = lp.body.ops
    moved = []
    for k, st in enumerate(ops[:cut + 1]):
        if not isinstance(st, L.Decl):
            continue
        name = st.buf.name
        before = [s for s in ops[k + 1:cut + 1] if name in touched(s)]
        after = [s for s in ops[cut + 1:] if name in touched(s)]
        if before and after:
            raise ScheduleError(
                f"fission: buffer {name!r} is declared in loop {lp.name!r} and used on both sides of the cut "
                f"(by {describe_all(before, 2)} and by {describe_all(after, 2)})",
                hint=f"expand_dim({name!r}, [{lp.name!r}]) gives it one cell per iteration and lift_alloc({name!r}, "
                     f"{lp.name!r}) moves its declaration out of the loop; then fission")
        if after:
            moved.append(k)
    first = [st for k, st in enumerate(ops[:cut + 1]) if k not in moved]
    return first, [ops[k] for k in moved] + list(ops[cut + 1:])


@schedule_op("fission", [A.LoopName(), A.StatementName(inside="loop")])
def fission(p: ir.Program, loop: str, after: str) -> Transformed:
    """Distribute loop ``loop`` over its body, cutting after the statement ``after`` (see the module doc)."""
    lp = the_loop(p, loop, "fission")
    if hardware_bound(lp):
        raise ScheduleError(f"fission: loop {loop!r} is bound to {lp.binding}",
                            hint="fission the loop before binding it, then bind each of the two loops")
    if any(isinstance(st, L.Barrier) for st in ir.walk(lp.body)):
        raise ScheduleError(f"fission: the body of loop {loop!r} holds a barrier",
                            hint="fission splits the body's phases between two loops; fission a loop inside the "
                                 "barrier's phase instead")
    at = named_positions(lp.body, after)  # not empty: the argument's kind checked that
    if len(at) > 1:
        raise ScheduleError(f"fission: {len(at)} statements directly in loop {loop!r} answer to {after!r}: "
                            f"{describe_all([lp.body.ops[k] for k in at])}",
                            hint="name the cut by a loop's name, or by a buffer only one statement there writes")
    first, second = _halves(lp, at[0])
    if all(isinstance(st, L.Decl) for st in second):
        raise ScheduleError(f"fission: nothing but declarations follows {after!r} in loop {loop!r}",
                            hint=f"cut after a statement before the last one of {loop!r}")
    var = L.fresh_var(p)()
    n0 = fresh_name(p, f"{loop}.f0")
    n1 = fresh_name(p, f"{loop}.f1", {n0})
    head = dataclasses.replace(lp, name=n0, body=ir.Block((), tuple(first)))
    tail = L.Loop(var, n1, lp.extent, lp.kind, subst_node(ir.Block((), tuple(second)), lp.var, IVar(var, 0)),
                  lp.binding, lp.start, lp.loc)
    tau = Tau((Piece(((lp.var, IVar(lp.var, 0)),)), Piece(((lp.var, IVar(var, 0)),))))
    obligations = (
        Obligation(Kind.COVERAGE, "fission", f"{n0} and {n1} each run every iteration of {loop!r} once", (loop,)),
        Obligation(Kind.DEPENDENCE, "fission", f"no statement of {n0} at i1 conflicts with a statement of {n1} at "
                   f"i2 < i1 (the old loop ran the second before the first; {n1} now runs after all of {n0})",
                   (loop,)),
    )
    return Transformed(with_body(p, replace_loop(p.body, lp, [head, tail])), tau, obligations, (n0, n1))
