"""lift_alloc(buffer, loop): move the declaration of ``buffer`` out of ``loop``, to just before it.

``buffer`` is declared once, inside ``loop`` with only loops between (Exo's ``lift_alloc`` over
those scopes). With ``l_1 = loop, ..., l_k`` the loops from ``loop`` down to the declaration:

    for l_1 { ... for l_k { ... local b: t[S]; ... } }   ->   local b: t[S]; for l_1 { ... for l_k { ... } }

A declaration allocates a fresh zeroed buffer per instance; lifted, one buffer is reused by every
iteration of ``l_1 .. l_k``. That preserves meaning when no value flows across those iterations
through ``b``. The exact rule the op hands over (``Lifted(buffer, loops)``, checked as ``datamap``):

    for accesses x, y of b (one allocation of the lifted b) with (x_l1..x_lk) != (y_l1..y_lk):
        cell(x) != cell(y)                              (the iterations use disjoint cells)

Then at the start of each iteration its cells are still zero (no other iteration touched them),
as a fresh allocation's are, and every access of the iteration sees what it saw before; nothing
accesses ``b`` after ``l_k`` (the old scope). The checker verifies the rule and compares the
programs with the declaration put back at the start of ``l_k``'s body. A scalar accumulator
declared per instance carries values across iterations once lifted and is disproved; give it
one axis per lifted loop first (``expand_dim``), which makes the cells disjoint. Tau is the
identity.

Preconditions (``ScheduleError`` otherwise): ``buffer`` is declared once (not a tensor), inside
``loop`` with no guard between them; its shape reads none of the lifted loops' variables.
"""
from __future__ import annotations

from .. import ir
from .. import loopir as L
from ..index import free_vars
from ..mapper import Mapper
from . import args as A
from .base import ScheduleError, replace_loop, the_decl, the_loop, with_body
from .registry import schedule_op
from ..transform import Kind, Lifted, Obligation, Tau, Transformed


class _Dropped(Mapper):
    """The program without the statement ``target`` (by identity)."""

    def __init__(self, target: L.Decl) -> None:
        self.target = target

    def map_stmt(self, st: object) -> object:
        return None if st is self.target else super().map_stmt(st)


@schedule_op("lift_alloc", [A.BufferName(), A.LoopName()])
def lift_alloc(p: ir.Program, buffer: str, loop: str) -> Transformed:
    """Move the declaration of ``buffer`` out of ``loop`` and the loops inside it (see the module doc)."""
    decl, path = the_decl(p, buffer, "lift_alloc")
    lp = the_loop(p, loop, "lift_alloc")
    if not any(st is lp for st in path):
        raise ScheduleError(f"lift_alloc: loop {loop!r} does not enclose the declaration of {buffer!r}",
                            decl.loc, hint=f"the loops around {buffer!r} are: "
                            f"{', '.join(st.name for st in path if isinstance(st, L.Loop)) or 'none'}")
    crossed = path[next(k for k, st in enumerate(path) if st is lp):]
    guard = next((st for st in crossed if not isinstance(st, L.Loop)), None)
    if guard is not None:
        raise ScheduleError(f"lift_alloc: the declaration of {buffer!r} sits under the guard `if {guard.cond}` "
                            f"inside {loop!r}", decl.loc,
                            hint="lift it out of the loops inside the guard only, or out of loops around the guard")
    read = {v for e in decl.buf.shape for v, _ in free_vars(e)} & {st.var for st in crossed}
    if read:
        names = ", ".join(st.name for st in crossed if st.var in read)
        raise ScheduleError(f"lift_alloc: the shape [{', '.join(map(str, decl.buf.shape))}] of {buffer!r} reads "
                            f"loop {names}, which the declaration would leave", decl.loc,
                            hint=f"lift {buffer!r} out of loops its shape does not read")
    body = _Dropped(decl).map_block(p.body)
    moved = next(st for st in L.loops(body) if st.var == lp.var and st.name == lp.name)
    new = with_body(p, replace_loop(body, moved, [decl, moved]))
    names = tuple(st.name for st in crossed)
    obligations = (
        Obligation(Kind.DATAMAP, "lift_alloc", f"accesses of {buffer!r} in different iterations of "
                   f"({', '.join(names)}) touch distinct cells, and none lies outside {names[-1]!r}: the one "
                   "buffer reused by the iterations holds what each fresh zeroed one held", names),
    )
    return Transformed(new, Tau(), obligations, (), (Lifted(buffer, tuple(st.var for st in crossed)),))
