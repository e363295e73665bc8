"""constant(tensor): mark a tensor parameter the program never writes as a constant.

The program's statements do not change; its per-tensor facts gain the mark, kept in
``Program.config`` by ``semantics.constants`` (``with_constants`` sets the mark, ``constant_inputs``
reads it; a marked program serializes as any other). A constant is what
``stage(..., hoisted=True)`` may pack once, outside the routine: the caller promises its values do
not change between calls (a pack is not refreshed by later writes to it).

Precondition (``ScheduleError``): ``tensor`` is a tensor parameter of the program that the program
does not write. Legality: the statements and their coordinates are unchanged (tau is the identity):
every statement instance runs as before, in the same order (``coverage``, ``dependence``).
"""
from __future__ import annotations

from .. import ir
from ..constants import with_constants
from . import args as A
from .base import ScheduleError
from .registry import schedule_op
from ..transform import Kind, Obligation, Tau, Transformed


@schedule_op("constant", [A.BufferName()])
def constant(p: ir.Program, tensor: str) -> Transformed:
    found = [t for t in p.tensors if t.name == tensor]
    if not found:
        raise ScheduleError(f"constant: {tensor!r} is not a tensor parameter of {p.name}",
                            hint=f"tensors are: {', '.join(t.name for t in p.tensors)}")
    if found[0].written:
        raise ScheduleError(f"constant: the program writes {tensor!r}; a constant keeps its values",
                            hint="mark an input the program only reads")
    obligations = (
        Obligation(Kind.COVERAGE, "constant", f"the statements are unchanged (only {tensor!r} is marked constant): "
                   "every old instance runs, once, at the same coordinates"),
        Obligation(Kind.DEPENDENCE, "constant", "the statements and their order are unchanged"),
    )
    return Transformed(with_constants(p, (tensor,)), Tau(), obligations)
