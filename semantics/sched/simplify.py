"""The simplifier: fold guards and selects that the enclosing loops and guards decide.

Rewrite rules (each with its side condition; ``ctx`` is the set of loop-variable values in
scope, intersected with the enclosing guards and the bound sizes):

- ``if c: B``  ->  ``B``          when ``ctx ⊆ {c}``      (the guard always holds)
- ``if c: B``  ->  (nothing)      when ``ctx ∩ {c} = ∅``  (the guard never holds)
- ``if a && b: B`` -> ``if b: B`` when ``ctx ⊆ {a}``      (a conjunct always holds)
- ``c ? x : y`` -> ``x`` / ``y``  under the same two conditions on ``c``
- ``loop i in [0, 0): B`` -> (nothing)   (an empty loop runs no iteration)

Conditions are decided with isl where they are quasi-affine; anything else is kept.
A decision depends only on the condition and the context (bound sizes, loop variables with
their ranges, facts), so it is memoized on exactly those: a schedule re-simplifies its whole
program after every op, and the statements an op did not touch are decided again for free,
which keeps replay linear in the number of ops.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Optional

from .. import ir
from .. import loopir as L
from ..affine import Context
from ..index import IBin, IConst, IExpr, conjuncts
from ..mapper import Mapper

_rebuilt = Mapper().rebuilt


@functools.lru_cache(maxsize=1 << 16)
def _decide(sizes: tuple[tuple[str, int], ...], loops: tuple[tuple[int, int, IExpr, IExpr], ...],
            facts: tuple[IExpr, ...], cond: IExpr) -> Optional[bool]:
    return Context(dict(sizes), list(loops), list(facts)).decide(cond)


def decide(ctx: Context, cond: IExpr) -> Optional[bool]:
    """``ctx.decide(cond)``, memoized on the whole context and the condition."""
    return _decide(tuple(sorted(ctx.sizes.items())), tuple(ctx.vars), tuple(ctx.facts), cond)


def simplify_cond(cond: IExpr, ctx: Context) -> IExpr:
    """``cond`` with proved conjuncts dropped; ``IConst(0)`` if one is refuted, ``IConst(1)`` if all hold."""
    whole = decide(ctx, cond)
    if whole is not None:
        return IConst(int(whole))
    kept = []
    for c in conjuncts(cond):
        if c == IConst(1):
            continue
        verdict = decide(ctx, c)
        if verdict is False:
            return IConst(0)
        if verdict is None:
            kept.append(c)
    if not kept:
        return IConst(1)
    out = kept[0]
    for c in kept[1:]:
        out = IBin("and", out, c)
    return out


def simplify_expr(e: L.SExpr, ctx: Context) -> L.SExpr:
    """``e`` with the selects ``ctx`` decides folded; ``e`` itself when nothing folds (so that a statement whose
    value is unchanged stays the same node)."""
    if isinstance(e, L.Sel):
        if isinstance(e.cond, L.Ix):
            c = simplify_cond(e.cond.expr, ctx)
            if c == IConst(1):
                return simplify_expr(e.a, ctx)
            if c == IConst(0):
                return simplify_expr(e.b, ctx)
            cond = e.cond if c == e.cond.expr else L.Ix(c, e.cond.dtype)
            return _rebuilt(e, cond=cond, a=simplify_expr(e.a, ctx.with_fact(c)), b=simplify_expr(e.b, ctx))
        return _rebuilt(e, cond=simplify_expr(e.cond, ctx), a=simplify_expr(e.a, ctx), b=simplify_expr(e.b, ctx))
    if isinstance(e, (L.Un, L.Cvt)):
        return _rebuilt(e, x=simplify_expr(e.x, ctx))
    if isinstance(e, L.Bin):
        return _rebuilt(e, a=simplify_expr(e.a, ctx), b=simplify_expr(e.b, ctx))
    return e


def simplify_block(block: ir.Block, ctx: Context) -> ir.Block:
    out: list[Any] = []
    for st in block.ops:
        if isinstance(st, L.Loop):
            if st.extent == IConst(0):
                continue
            inner = ctx.with_loop(st.var, st.start, st.extent)
            out.append(dataclasses.replace(st, body=simplify_block(st.body, inner)))
        elif isinstance(st, L.If):
            c = simplify_cond(st.cond, ctx)
            if c == IConst(0):
                continue
            body = simplify_block(st.body, ctx.with_fact(c) if c != IConst(1) else ctx)
            if isinstance(st, L.StageBlock):  # a stage subregion keeps its identity
                out.append(dataclasses.replace(st, body=body))
            elif c == IConst(1):
                out.extend(body.ops)
            else:
                out.append(L.If(c, body, st.loc))
        elif isinstance(st, (L.Assign, L.Accum)):  # an unchanged statement stays the same node (datamaps name it)
            value = simplify_expr(st.value, ctx)
            out.append(st if value is st.value else dataclasses.replace(st, value=value))
        else:
            out.append(st)
    return ir.Block(block.args, tuple(out), block.yields)


def simplify(p: ir.Program, sizes: dict[str, int] | None = None) -> ir.Program:
    """Fold every guard and select that the loop extents (and bound sizes) decide."""
    return dataclasses.replace(p, body=simplify_block(p.body, Context(dict(sizes or {}))))


def census(p: ir.Program) -> dict[str, int]:
    """How many loops, guards and selects the program has (for tests and reports)."""
    counts = {"loops": 0, "ifs": 0, "selects": 0}
    for st in ir.walk(p.body):
        if isinstance(st, L.Loop):
            counts["loops"] += 1
        elif isinstance(st, L.If):
            counts["ifs"] += 1
        elif isinstance(st, (L.Assign, L.Accum)):
            counts["selects"] += _selects(st.value)
    return counts


def _selects(e: L.SExpr) -> int:
    if isinstance(e, L.Sel):
        return 1 + _selects(e.a) + _selects(e.b)
    if isinstance(e, (L.Un, L.Cvt)):
        return _selects(e.x)
    if isinstance(e, L.Bin):
        return _selects(e.a) + _selects(e.b)
    return 0
