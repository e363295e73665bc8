"""Decide the queries isl cannot (products of variables, division by a size) with z3.

A case ``pos - neg`` becomes the z3 problem ``pos and not neg`` over integer variables,
with Python's floor division and modulo (``a // b`` is ``a div b`` for ``b > 0`` and
``(-a) div (-b)`` for ``b < 0``) and every non-constant divisor required to be non-zero (an
index expression dividing by zero has no meaning, so no execution reaches such a point).
When z3 cannot decide the problem, a second attempt with every variable bounded by
``small`` may still find a witness. z3's ``unknown`` (a timeout, incomplete non-linear
arithmetic, a quantifier it cannot instantiate) is reported as such: never as a proof.
"""
from __future__ import annotations

from typing import Optional, Sequence

import z3

from .formula import And, Cmp, Const, Exists, Formula, Ite, Or, Term, Var, divisors, variables


class _Translator:
    def __init__(self) -> None:
        self.vars: dict[str, z3.ArithRef] = {}

    def var(self, name: str) -> z3.ArithRef:
        if name not in self.vars:
            self.vars[name] = z3.Int(name)
        return self.vars[name]

    def term(self, t: Term) -> z3.ArithRef:
        if isinstance(t, Var):
            return self.var(t.name)
        if isinstance(t, Const):
            return z3.IntVal(t.value)
        if isinstance(t, Ite):
            return z3.If(self.formula(t.cond), self.term(t.a), self.term(t.b))
        a, b = self.term(t.a), self.term(t.b)
        if t.op == "add":
            return a + b
        if t.op == "sub":
            return a - b
        if t.op == "mul":
            return a * b
        if t.op in ("min", "max"):
            return z3.If(a <= b, a, b) if t.op == "min" else z3.If(a >= b, a, b)
        if isinstance(t.b, Const) and t.b.value > 0:
            q = a / b
        else:
            q = z3.If(b < 0, (-a) / (-b), a / b)
        return q if t.op == "floordiv" else a - b * q

    def formula(self, f: Formula) -> z3.BoolRef:
        if isinstance(f, Cmp):
            a, b = self.term(f.a), self.term(f.b)
            return {"lt": a < b, "le": a <= b, "eq": a == b, "ne": a != b}[f.op]
        if isinstance(f, And):
            return z3.And([self.formula(p) for p in f.parts]) if f.parts else z3.BoolVal(True)
        if isinstance(f, Or):
            return z3.Or([self.formula(p) for p in f.parts]) if f.parts else z3.BoolVal(False)
        if isinstance(f, Exists):
            return z3.Exists([z3.Int(n) for n in f.names], self.formula(f.body))
        raise TypeError(type(f).__name__)


def find_point(names: Sequence[str], pos: Formula, neg: Formula, timeout_ms: int,
               small: int = 64) -> tuple[str, Optional[dict[str, int]], str]:
    """``("sat", point, "")``, ``("unsat", None, "")`` or ``("unknown", None, reason)`` for ``pos and not neg``."""
    tr = _Translator()
    problem = [tr.formula(pos), z3.Not(tr.formula(neg))]
    problem += [tr.term(d) != 0 for d in divisors(pos) + divisors(neg)]
    free = [n for n in names if n in variables(pos) | variables(neg)]
    reason = ""
    for bounded in (False, True):
        solver = z3.Solver()
        solver.set("timeout", timeout_ms)
        solver.add(*problem)
        if bounded:
            solver.add(*[z3.And(tr.var(n) >= -small, tr.var(n) <= small) for n in free])
        answer = solver.check()
        if answer == z3.sat:
            model = solver.model()
            return "sat", {n: model.eval(tr.var(n), model_completion=True).as_long() for n in names}, ""
        if answer == z3.unsat and not bounded:
            return "unsat", None, ""
        if answer == z3.unknown and not bounded:
            reason = f"z3 returned unknown ({solver.reason_unknown()})"
    return "unknown", None, reason
