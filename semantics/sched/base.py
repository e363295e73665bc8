"""What every schedule op shares: results, tau, obligations, and loop-tree surgery.

A schedule op is a function ``(program, args) -> Transformed(program', tau, obligations,
handles)``. ``tau`` maps the execution coordinates of the new program to the old ones
whose work they perform (seed 004): for each old loop variable an expression over new
variables, plus the guard under which a new coordinate is active. Obligations name what
must hold for the rewrite to preserve meaning; the checker discharges them.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

from .. import ir
from .. import loopir as L
from ..errors import TilecertError
from ..index import IBin, IConst, IExpr, INot, IVar, ibin

OBLIGATION_KINDS = ("coverage", "prefix_cut", "containment", "dependence", "noninterference", "barrier_uniform",
                    "bounds", "hardware_limits", "pipeline_schedule", "versions", "release", "reduction_policy")


class ScheduleError(TilecertError):
    """A schedule op's precondition does not hold (the message says what and how to fix it)."""


@dataclass(frozen=True)
class Obligation:
    """What must hold for one op to preserve meaning; ``formula`` states it."""

    kind: str
    op: str
    formula: str
    loops: tuple[str, ...] = ()

    def __str__(self) -> str:
        where = f" [{', '.join(self.loops)}]" if self.loops else ""
        return f"{self.kind}{where}: {self.formula}"


@dataclass(frozen=True)
class Piece:
    """One piece of tau: new coordinates satisfying ``guard`` perform the old iteration whose
    loop variables ``subst`` gives (old variable -> expression over new variables)."""

    subst: tuple[tuple[int, IExpr], ...]
    guard: IExpr = IConst(1)

    def __str__(self) -> str:
        parts = ", ".join(f"i{v} := {e}" for v, e in self.subst)
        return "{" + parts + "}" + ("" if self.guard == IConst(1) else f" when {self.guard}")


@dataclass(frozen=True)
class Tau:
    """New coordinates -> old, piecewise (a partition or a split with a peeled tail has
    several pieces); the identity on every loop it does not mention."""

    pieces: tuple[Piece, ...] = ()

    def __str__(self) -> str:
        return " | ".join(str(p) for p in self.pieces) or "identity"


@dataclass(frozen=True)
class Transformed:
    program: ir.Program
    tau: Tau
    obligations: tuple[Obligation, ...]
    handles: tuple[str, ...] = ()


# ----------------------------------------------------------------------------- generic rewriting
def map_node(node: Any, on_iexpr: Callable[[IExpr], IExpr]) -> Any:
    """Rebuild a loop-form node (statement, block, expression) with every index expression mapped."""
    if isinstance(node, (IConst, IVar, IBin, INot)) or type(node).__name__ == "ISize":
        return on_iexpr(node)
    if isinstance(node, tuple):
        return tuple(map_node(x, on_iexpr) for x in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        changes = {}
        for f in dataclasses.fields(node):
            val = getattr(node, f.name)
            if f.name == "loc":
                continue
            new = map_node(val, on_iexpr)
            if new is not val:
                changes[f.name] = new
        return dataclasses.replace(node, **changes) if changes else node
    return node


def substitute(e: IExpr, var: int, value: IExpr) -> IExpr:
    """``e`` with loop variable ``var`` replaced by ``value`` (constants refolded)."""
    if isinstance(e, IVar):
        return value if e.region == var and e.axis == 0 else e
    if isinstance(e, IBin):
        return ibin(e.op, substitute(e.a, var, value), substitute(e.b, var, value))
    if isinstance(e, INot):
        return INot(substitute(e.a, var, value))
    return e


def subst_node(node: Any, var: int, value: IExpr) -> Any:
    return map_node(node, lambda e: substitute(e, var, value))


# ----------------------------------------------------------------------------- the loop tree
@dataclass(frozen=True)
class LoopInfo:
    name: str
    var: int
    extent: IExpr
    kind: str
    binding: Optional[str]
    depth: int
    parent: Optional[str]

    def __str__(self) -> str:
        bind = f" bind={self.binding}" if self.binding else ""
        return f"{'  ' * self.depth}{self.kind} {self.name} [{self.extent}]{bind}"


def loop_infos(block: ir.Block, depth: int = 0, parent: Optional[str] = None) -> Iterator[LoopInfo]:
    for st in block.ops:
        if isinstance(st, L.Loop):
            yield LoopInfo(st.name, st.var, st.extent, st.kind, st.binding, depth, parent)
            yield from loop_infos(st.body, depth + 1, st.name)
        elif isinstance(st, L.If):
            yield from loop_infos(st.body, depth, parent)


def find_loops(block: ir.Block, name: str) -> list[L.Loop]:
    return [lp for lp in L.loops(block) if lp.name == name]


def the_loop(p: ir.Program, name: str, op: str) -> L.Loop:
    """The unique loop called ``name`` (a ``ScheduleError`` naming the loops otherwise)."""
    found = find_loops(p.body, name)
    if not found:
        names = ", ".join(lp.name for lp in L.loops(p.body))
        raise ScheduleError(f"{op}: no loop named {name!r}", hint=f"loops are: {names}")
    if len(found) > 1:
        raise ScheduleError(f"{op}: {len(found)} loops are named {name!r}", hint="address one copy by its own name")
    return found[0]


def replace_loop(block: ir.Block, target: L.Loop, new: list) -> ir.Block:
    """``block`` with the statement ``target`` (by identity) replaced by the statements ``new``."""
    ops: list = []
    for st in block.ops:
        if st is target:
            ops.extend(new)
            continue
        body = getattr(st, "body", None)
        if isinstance(body, ir.Block):
            nb = replace_loop(body, target, new)
            if nb is not body:
                st = dataclasses.replace(st, body=nb)
        ops.append(st)
    if len(ops) == len(block.ops) and all(a is b for a, b in zip(ops, block.ops)):
        return block
    return ir.Block(block.args, tuple(ops), block.yields)


def with_body(p: ir.Program, body: ir.Block) -> ir.Program:
    return dataclasses.replace(p, body=body)


def fresh_var(p: ir.Program) -> Callable[[], int]:
    """A generator of loop variable ids unused in ``p``."""
    used = [lp.var for lp in L.loops(p.body)]
    counter = [max(used, default=-1) + 1]

    def nxt() -> int:
        counter[0] += 1
        return counter[0] - 1

    return nxt


def fresh_name(p: ir.Program, base: str, taken: set[str] | None = None) -> str:
    names = {lp.name for lp in L.loops(p.body)} | (taken or set())
    if base not in names:
        return base
    k = 1
    while f"{base}{k}" in names:
        k += 1
    return f"{base}{k}"


def positive_int(value: Any, what: str, op: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ScheduleError(f"{op}: {what} must be a positive int, got {value!r}", hint=f"pass an int > 0 as {what}")
    return value
