"""Lemma behind the simplifier's rewrite rules (``semantics/sched/simplify.py``).

Let ``ctx`` be the set of loop-variable values in scope (loops, enclosing guards, bound
sizes) and ``c``, ``a``, ``b`` conditions, ``va``, ``vb`` values (all arbitrary: uninterpreted
predicates and functions, so the rules hold whatever isl decided the side conditions on).
In words, each rule keeps the instances of every statement and the value of every
expression:

1. ``if c: B -> B`` when ``ctx ⊆ c``: ``ctx ∩ c = ctx``;
2. ``if c: B -> nothing`` when ``ctx ∩ c = ∅``: ``B`` has no instance under ``ctx ∩ c``;
3. ``if a && b: B -> if b: B`` when ``ctx ⊆ a``: ``ctx ∩ (a ∩ b) = ctx ∩ b``;
4. ``c ? va : vb -> va`` when ``ctx ⊆ c``, ``-> vb`` when ``ctx ∩ c = ∅``: equal values on ``ctx``;
5. ``loop i in [0, 0): B -> nothing``: the loop has no iteration (isl, any start).

Discharged with z3 (quantified, uninterpreted) and isl.
"""
import sys
from pathlib import Path

import z3

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lemma import Lemma  # noqa: E402


def main() -> int:
    lem = Lemma("simplifier", "folding decided guards and selects keeps every instance and value")
    ctx, c, a, b = (z3.Function(n, z3.IntSort(), z3.BoolSort()) for n in ("ctx", "c", "a", "b"))
    va, vb = (z3.Function(n, z3.IntSort(), z3.IntSort()) for n in ("va", "vb"))
    x = z3.Int("x")
    always = z3.ForAll([x], z3.Implies(ctx(x), c(x)))
    never = z3.ForAll([x], z3.Not(z3.And(ctx(x), c(x))))
    y = z3.Int("y")
    lem.valid("guard always holds", "ctx ⊆ c => (ctx ∩ c = ctx)",
              z3.Implies(always, z3.And(ctx(y), c(y)) == ctx(y)))
    lem.valid("guard never holds", "ctx ∩ c = ∅ => no instance of B in ctx ∩ c",
              z3.Implies(never, z3.Not(z3.And(ctx(y), c(y)))))
    lem.valid("conjunct always holds", "ctx ⊆ a => ctx ∩ (a ∩ b) = ctx ∩ b",
              z3.Implies(z3.ForAll([x], z3.Implies(ctx(x), a(x))),
                         z3.And(ctx(y), a(y), b(y)) == z3.And(ctx(y), b(y))))
    lem.valid("select folds to its first branch", "ctx ⊆ c => on ctx, (c ? va : vb) = va",
              z3.Implies(z3.And(always, ctx(y)), z3.If(c(y), va(y), vb(y)) == va(y)))
    lem.valid("select folds to its second branch", "ctx ∩ c = ∅ => on ctx, (c ? va : vb) = vb",
              z3.Implies(z3.And(never, ctx(y)), z3.If(c(y), va(y), vb(y)) == vb(y)))
    lem.isl_empty("an empty loop runs nothing", "{ i : s <= i < s + 0 } = ∅", "[s] -> { [i] : s <= i < s + 0 }")
    return lem.finish()


if __name__ == "__main__":
    sys.exit(main())
