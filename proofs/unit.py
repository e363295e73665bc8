"""Lemma behind ``insert_unit`` / ``remove_unit`` (adding or dropping a level with one iteration).

In words, for any domain ``D`` of the other coordinates (an arbitrary predicate) and a
start ``s``:

1. insertion: ``{(u, x) : 0 <= u < 1, x in D} -> x`` is a bijection onto ``D`` and keeps the
   lexicographic order (``u`` is always 0, so ``(u, x) <lex (u2, x2) <=> x <lex x2``);
2. removal: a loop over ``[s, s + 1)`` runs the single value ``u = s``, so substituting ``s``
   for ``u`` is a bijection between ``{(u, x) : s <= u < s + 1, x in D}`` and ``D``.

So the identity isomorphism of seed 004: every old cut maps to a new one, and the cut the
level adds or removes has exactly one instance per prefix (tau_j bijective). Discharged
with z3, with ``D`` an uninterpreted predicate (so for every domain).
"""
import sys
from pathlib import Path

import z3

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lemma import Lemma, lex_lt  # noqa: E402


def main() -> int:
    lem = Lemma("unit", "a level with one iteration is the identity isomorphism")
    dom = z3.Function("D", z3.IntSort(), z3.IntSort(), z3.BoolSort())
    u, u2, x, y, x2, y2, s = z3.Ints("u u2 x y x2 y2 s")
    lem.valid("insertion: the unit coordinate is 0", "0 <= u < 1 => u = 0",
              z3.Implies(z3.And(0 <= u, u < 1), u == 0))
    lem.valid("insertion: bijective", "(u, x), (u2, x2) in {0} x D with equal images are equal; every x in D has the "
              "preimage (0, x)",
              z3.And(z3.Implies(z3.And(0 <= u, u < 1, 0 <= u2, u2 < 1, dom(x, y), dom(x2, y2), x == x2, y == y2),
                                u == u2),
                     z3.Implies(dom(x, y), z3.And(z3.IntVal(0) >= 0, z3.IntVal(0) < 1, dom(x, y)))))
    lem.valid("insertion: order", "(u, x, y) <lex (u2, x2, y2) <=> (x, y) <lex (x2, y2) for u, u2 in [0, 1)",
              z3.Implies(z3.And(0 <= u, u < 1, 0 <= u2, u2 < 1),
                         lex_lt([u, x, y], [u2, x2, y2]) == lex_lt([x, y], [x2, y2])))
    lem.valid("removal: the one value is the start", "s <= u < s + 1 => u = s",
              z3.Implies(z3.And(s <= u, u < s + 1), u == s))
    return lem.finish()


if __name__ == "__main__":
    sys.exit(main())
