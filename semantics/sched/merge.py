"""merge(first, second): fuse two sibling loops over one domain into one loop (the inverse of fission).

``for i in R { A }  D  for j in R { B }``, where ``D`` is zero or more declarations, becomes

    D  for i in R { A  B[j := i] }          named first (its variable, kind and binding)

``second`` must follow ``first`` in one block, with only declarations of buffers ``first`` does
not touch between them (they move before the merged loop). Both loops have the same kind,
binding, start and extent (equal as written, or decided equal from the enclosing loops, guards
and bound sizes). Handle: ``first``'s name; ``second``'s name is freed.

Legality. tau is ``j := i`` on the statements of ``B``, the identity elsewhere:

- ``coverage``: the merged loop runs every iteration of ``R`` once, performing each old
  instance of ``A`` and of ``B`` once;
- ``dependence``: the old program ran every instance of ``A`` before every instance of ``B``;
  the merged loop keeps that for pairs ``(A at i1, B at i2)`` with ``i1 <= i2`` and reverses it
  when ``i2 < i1``. So the merge is legal iff

      no i1, i2 in R with i2 < i1:  conflict(A(i1), B(i2))

  (one cell, at least one writing, not two commuting updates of one reducer): ``B`` at ``i2``
  reads or writes nothing a later iteration of ``A`` writes, nor writes what it reads.

Preconditions (``ScheduleError`` otherwise): the placement, kinds, bindings and ranges above; a
loop bound to a hardware index is refused (merge first, then bind the merged loop once); no
buffer ``A`` declares directly in its body is named in ``B`` (it would capture ``B``'s accesses).
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from .. import ir
from .. import loopir as L
from . import args as A
from .registry import schedule_op
from ..index import IVar, ibin
from ..mapper import subst_node
from .base import (ScheduleError, context_at, describe_all, enclosing, hardware_bound, replace_loop, the_loop,
                   touched, with_body)
from ..transform import Kind, Obligation, Piece, Tau, Transformed


def _between(p: ir.Program, a: L.Loop, b: L.Loop) -> list:
    """The statements between ``a`` and ``b``, which must follow ``a`` in the block holding it."""
    path = enclosing(p.body, a)
    block = path[-1].body if path else p.body
    ops = list(block.ops)
    ia = next(k for k, st in enumerate(ops) if st is a)
    if not any(st is b for st in ops):
        followers = [st.name for st in ops[ia + 1:] if isinstance(st, L.Loop)]
        raise ScheduleError(f"merge: loop {b.name!r} is not a sibling of {a.name!r} (it lies in another block)",
                            hint=f"loops that follow {a.name!r}: {', '.join(followers) or 'none'}")
    ib = next(k for k, st in enumerate(ops) if st is b)
    if ib < ia:
        raise ScheduleError(f"merge: loop {b.name!r} comes before {a.name!r}",
                            hint=f"call merge(first={b.name!r}, second={a.name!r})")
    between = ops[ia + 1:ib]
    blocking = [st for st in between if not isinstance(st, L.Decl) or st.buf.name in touched(a)]
    if blocking:
        raise ScheduleError(f"merge: {describe_all(blocking)} lies between loops {a.name!r} and {b.name!r}",
                            hint="only declarations of buffers the first loop does not touch may lie between the "
                                 "loops; merge loops that follow one another")
    return between


@schedule_op("merge", [A.LoopName(), A.LoopName(follows="first"), A.BoundSizes()])
def merge(p: ir.Program, first: str, second: str, *, bound_sizes: Optional[dict[str, int]] = None) -> Transformed:
    """Fuse loop ``second`` into loop ``first``, which it follows over the same range (see the module doc)."""
    a, b = the_loop(p, first, "merge"), the_loop(p, second, "merge")
    if a is b:
        raise ScheduleError(f"merge: first and second are both {first!r}", hint="name two sibling loops")
    between = _between(p, a, b)
    for lp in (a, b):
        if hardware_bound(lp):
            raise ScheduleError(f"merge: loop {lp.name!r} is bound to {lp.binding}",
                                hint="merge the loops before binding, then bind the merged loop once")
    for what, x, y in (("kind", a.kind, b.kind), ("binding", a.binding, b.binding)):
        if x != y:
            raise ScheduleError(f"merge: loop {first!r} has {what} {x} and {second!r} has {what} {y}",
                                hint=f"merge loops of one {what} (bind or rebind one of them first)")
    ctx = context_at(p, a, bound_sizes)
    for what, x, y in (("start", a.start, b.start), ("extent", a.extent, b.extent)):
        if x != y and ctx.decide(ibin("eq", x, y)) is not True:
            raise ScheduleError(f"merge: the {what} {x} of {first!r} is not shown equal to the {what} {y} of "
                                f"{second!r}", hint="merge loops over one range (bind the sizes the ranges read in "
                                                    "tc.schedule, or split / pad one loop to the other's range)")
    captured = sorted({st.buf.name for st in a.body.ops if isinstance(st, L.Decl)} & touched(b))
    if captured:
        raise ScheduleError(f"merge: loop {first!r} declares {', '.join(captured)}, which {second!r} also names",
                            hint="the declaration would capture the second loop's accesses; merge loops that "
                                 "declare different buffers")
    body = a.body.ops + subst_node(b.body, b.var, IVar(a.var, 0)).ops
    merged = dataclasses.replace(a, body=ir.Block((), body))
    moved = [dataclasses.replace(st) for st in between]  # new nodes: the originals are removed by identity
    new = replace_loop(p.body, a, moved + [merged])
    for st in [b] + between:
        new = replace_loop(new, st, [])
    tau = Tau((Piece(((b.var, IVar(a.var, 0)),)),))
    obligations = (
        Obligation(Kind.COVERAGE, "merge", f"the merged loop runs every iteration of {first!r} and {second!r} once",
                   (first, second)),
        Obligation(Kind.DEPENDENCE, "merge", f"no statement of {second!r} at i2 conflicts with a statement of "
                   f"{first!r} at i1 > i2 (the merged loop runs the second before the first)", (first, second)),
    )
    return Transformed(with_body(p, new), tau, obligations, (first,))
