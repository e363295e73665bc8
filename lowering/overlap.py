"""Whether two accesses of the barrier pass's units can touch the same cell: isl on their index expressions.

An access (``Cell``) is a buffer, an index (None: every cell, a declaration), whether it writes, the
ranges of the loops of its unit around it and the guards over it. Two accesses ``x`` and ``y``, by two
units at the same point of the loops around both, may touch the same cell iff

    exists values of x's variables and of y's (each side's own loops, thread coordinates and the
    variables ``apart`` renamed apart; every other variable is the same on both sides):
        start <= v < start + extent  for each loop of each side,
        0 <= t < E_d                 for each thread coordinate of each side,
        the guards of each side (a guard that is not quasi-affine is dropped: the set only grows),
        x.index == y.index           axis by axis,
        the two threads differ       (a thread runs its own accesses in program order)

is nonempty. An index that is not quasi-affine (``semantics.affine.to_isl``), two ranks or an isl
failure answer True: unknown is a conflict, so a barrier.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Mapping, Optional

import islpy as isl

from tilecert.semantics import loopir as L
from tilecert.semantics.affine import to_isl, var_name
from tilecert.semantics.index import IBin, IConst, IExpr, IVar, free_vars, size_names, substitute_many
from tilecert.semantics.solver_names import solver_name


@dataclass(frozen=True)
class Cell:
    """One access of a unit to a buffer and where it happens inside the unit."""

    buf: str
    write: bool
    index: Optional[tuple[IExpr, ...]]  # None: every cell
    loops: tuple[tuple[int, IExpr, IExpr], ...]  # (variable, start, extent) of the unit's loops around it
    guards: tuple[IExpr, ...]


def cells(node: object, loops: tuple[tuple[int, IExpr, IExpr], ...] = (),
          guards: tuple[IExpr, ...] = ()) -> Iterator[Cell]:
    """The accesses of a loop-form node (an ``Accum`` is a write; its read is at the same cell)."""
    if isinstance(node, L.Loop):
        for st in node.body.ops:
            yield from cells(st, loops + ((node.var, node.start, node.extent),), guards)
    elif isinstance(node, L.If):
        for st in node.body.ops:
            yield from cells(st, loops, guards + (node.cond,))
    elif isinstance(node, (L.Assign, L.Accum)):
        yield Cell(node.buf, True, node.index, loops, guards)
        for ld in L.loads(node.value):
            yield Cell(ld.buf, False, ld.index, loops, guards)
    elif isinstance(node, L.Decl):
        yield Cell(node.buf.name, True, None, loops, guards)


def may_touch(x: Cell, y: Cell, apart: frozenset[int], threads: Mapping[int, IExpr]) -> bool:
    """Whether ``x`` and ``y`` may touch the same cell (the rule above); ``threads`` maps each thread
    coordinate's variable to its extent."""
    if x.index is None or y.index is None or len(x.index) != len(y.index):
        return True
    conds: list[Optional[str]] = []
    exprs: list[IExpr] = []
    sides = []
    for side, c in ((1, x), (2, y)):
        own = apart | set(threads) | {v for v, _, _ in c.loops}
        if any(axis != 0 for e in (*c.index, *c.guards) for _, axis in free_vars(e)):
            return True  # a coordinate that is no loop variable: renaming could meet it
        rename = {v: IVar(v, side) for v in own}
        sub = lambda e: substitute_many(e, rename)  # noqa: E731
        for v, start, extent in c.loops:
            exprs += [sub(start), sub(extent), IVar(v, side)]
            conds.append(to_isl(IBin("le", sub(start), IVar(v, side))))
            conds.append(to_isl(IBin("lt", IVar(v, side), IBin("add", sub(start), sub(extent)))))
        for t, extent in threads.items():
            conds += [to_isl(IBin("le", IConst(0), IVar(t, side))), to_isl(IBin("lt", IVar(t, side), extent))]
            exprs += [extent, IVar(t, side)]
        guards = [to_isl(sub(g)) for g in c.guards]
        conds += [g for g in guards if g is not None]
        exprs += [sub(g) for g in c.guards]
        sides.append([sub(e) for e in c.index])
    for a, b in zip(*sides):
        conds.append(to_isl(IBin("eq", a, b)))
        exprs += [a, b]
    if any(c is None for c in conds):
        return True
    conds.append("(" + " or ".join(f"{var_name(t, 1)} != {var_name(t, 2)}" for t in threads) + ")" if threads
                 else "false")
    names = sorted({var_name(r, a) for e in exprs for r, a in free_vars(e)})
    params = sorted({solver_name(n) for e in exprs for n in size_names(e)})
    text = f"[{', '.join(params)}] -> {{ [{', '.join(names)}] : {' and '.join(conds) or 'true'} }}"
    try:
        return not isl.Set(text).is_empty()
    except isl.Error:
        return True

