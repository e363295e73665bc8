"""Index expressions as isl objects (Presburger arithmetic with symbolic sizes).

``to_isl`` renders an index expression in isl's syntax, or returns None when it is not
quasi-affine (a product of two non-constant terms, division by a non-constant). A
``Context`` collects the loop variables in scope with their ranges and the guards that
hold, and decides whether a condition always, never or sometimes holds there. A size is
written as its solver name (``solver_names``), so no user name is read as isl syntax or
meets a generated variable.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import islpy as isl

from .index import IBin, IConst, IExpr, INot, ISize, IVar, free_vars, size_names
from .solver_names import solver_name

ISL_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "=", "ne": "!="}


def var_name(region: int, axis: int) -> str:
    return f"i{region}_{axis}"


def isl_const(value: int) -> str:
    """isl text of an integer (a negative one in parentheses, so ``x - (-1)`` reads as meant)."""
    return str(value) if value >= 0 else f"({value})"


def isl_arith(op: str, a: str, b: str, a_value: Optional[int], b_value: Optional[int]) -> Optional[str]:
    """isl text of ``a op b`` (op: add, sub, mul, floordiv, mod, min, max) from the operands' texts
    ``a``, ``b`` and their values when they are constants; None where isl has no such term (a
    product of two non-constants, a division by a non-constant or by a constant <= 0). This is
    the one place the isl syntax of an index operator is written: ``to_isl`` renders index
    expressions with it, the checker's ``isl_solve`` its formulas."""
    if op in ("add", "sub"):
        return f"({a} {'+' if op == 'add' else '-'} {b})"
    if op == "mul":  # the constant first and bare: isl does not parse "(-1) * x"
        if a_value is not None:
            return f"({a_value} * {b})"
        return None if b_value is None else f"({b_value} * {a})"
    if op in ("floordiv", "mod"):
        if b_value is None or b_value <= 0:
            return None
        return f"floor(({a}) / {b_value})" if op == "floordiv" else f"(({a}) mod {b_value})"
    if op in ("min", "max"):
        return f"{op}({a}, {b})"
    return None


def to_isl(e: IExpr) -> Optional[str]:
    """isl text of ``e`` (an affine expression or a condition), or None if not quasi-affine."""
    if isinstance(e, IConst):
        return isl_const(e.value)
    if isinstance(e, ISize):
        return solver_name(e.name)
    if isinstance(e, IVar):
        return var_name(e.region, e.axis)
    if isinstance(e, INot):  # a constant operand is a truth value, as for and / or below
        a = f"({int(bool(e.a.value))} = 1)" if isinstance(e.a, IConst) else to_isl(e.a)
        return None if a is None else f"(not ({a}))"
    if not isinstance(e, IBin):
        return None
    a, b = to_isl(e.a), to_isl(e.b)
    if a is None or b is None:
        return None
    op = e.op
    if op in ISL_CMP:
        return f"({a} {ISL_CMP[op]} {b})"
    if op in ("and", "or"):  # a constant operand is a truth value: isl reads only comparisons there
        a, b = (f"({int(bool(x.value))} = 1)" if isinstance(x, IConst) else t for x, t in ((e.a, a), (e.b, b)))
        return f"(({a}) {op} ({b}))"
    return isl_arith(op, a, b, *(x.value if isinstance(x, IConst) else None for x in (e.a, e.b)))


@dataclass
class Context:
    """Loop variables in scope (with extents) and guards known to hold; sizes may be bound."""

    sizes: dict[str, int] = field(default_factory=dict)
    vars: list[tuple[int, int, IExpr, IExpr]] = field(default_factory=list)  # (region, axis, start, extent)
    facts: list[IExpr] = field(default_factory=list)

    def with_loop(self, region: int, start: IExpr, extent: IExpr) -> "Context":
        return Context(self.sizes, self.vars + [(region, 0, start, extent)], list(self.facts))

    def with_fact(self, cond: IExpr) -> "Context":
        return Context(self.sizes, list(self.vars), self.facts + [cond])

    def _params(self, exprs: list[IExpr]) -> list[str]:
        """The sizes ``exprs`` and the bindings read, as solver names."""
        names: set[str] = set(self.sizes)
        for e in exprs:
            names |= size_names(e)
        return sorted(solver_name(n) for n in names)

    def domain(self, extra: list[IExpr]) -> Optional[isl.Set]:
        """The set of variable values in scope where the facts hold (None if not affine)."""
        exprs = [x for _, _, s, n in self.vars for x in (s, n)] + self.facts + extra
        conds = []
        for r, a, s, n in self.vars:
            v = var_name(r, a)
            ts, tn = to_isl(s), to_isl(n)
            if ts is None or tn is None:
                return None
            conds.append(f"{ts} <= {v} < {ts} + {tn}")
        for f in self.facts:
            if f == IConst(1):  # a true guard (a stage block) states nothing
                continue
            t = to_isl(f)
            if t is not None:  # a non-affine fact is dropped: the domain only grows, which stays sound
                conds.append(t)
        for name, value in self.sizes.items():
            conds.append(f"{solver_name(name)} = {value}")
        params = self._params(exprs)
        for p in params:
            conds.append(f"{p} >= 0")
        vs = ", ".join(var_name(r, a) for r, a, _, _ in self.vars)
        text = f"[{', '.join(params)}] -> {{ [{vs}] : {' and '.join(conds) or 'true'} }}"
        return isl.Set(text)

    def decide(self, cond: IExpr) -> Optional[bool]:
        """True if ``cond`` holds everywhere in scope, False if nowhere, None if unknown or mixed."""
        if isinstance(cond, IConst):  # isl has no constant-only condition syntax
            return bool(cond.value)
        t = to_isl(cond)
        if t is None:
            return None
        known = {(r, a) for r, a, _, _ in self.vars}
        if not free_vars(cond) <= known:
            return None
        dom = self.domain([cond])
        if dom is None:
            return None
        vs = ", ".join(var_name(r, a) for r, a, _, _ in self.vars)
        params = dom.get_space().get_var_names(isl.dim_type.param)
        cset = isl.Set(f"[{', '.join(params)}] -> {{ [{vs}] : {t} }}")
        if dom.is_empty():
            return None
        if dom.is_subset(cset):
            return True
        if dom.intersect(cset).is_empty():
            return False
        return None
