"""Lemma behind ``split`` (strip-mining), with a guarded tail and with a partitioned tail.

In words: for every factor ``f >= 1`` and extent ``N >= 0``,

1. guarded tail: ``tau(o, ii) = f*o + ii`` maps the new domain
   ``D' = {(o, ii) : 0 <= o < ceil(N/f), 0 <= ii < f, f*o + ii < N}`` onto ``[0, N)``,
   bijectively, and is strictly increasing in the lexicographic order of ``(o, ii)``;
2. partitioned tail: the main nest ``{0 <= o < N div f, 0 <= ii < f}`` with
   ``tau = f*o + ii`` and the remainder loop ``{0 <= r < N - f*(N div f)}`` with
   ``tau = f*(N div f) + r`` have disjoint images whose union is ``[0, N)``, each increasing,
   every main image before every remainder image.

So every iteration runs exactly once (coverage) in its original order (dependence).
Discharged with z3 for all values (``f`` symbolic makes it non-linear).
"""
import sys
from pathlib import Path

import z3

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lemma import Lemma, lex_lt  # noqa: E402


def main() -> int:
    lem = Lemma("split", "strip-mining by f >= 1 is an order-preserving bijection onto [0, N), with either tail")
    f, n, o, ii, o2, ii2, i, r, r2 = z3.Ints("f N o ii o2 ii2 i r r2")
    base = [f >= 1, n >= 0]
    ceil = (n + f - 1) / f

    def guarded(a, b):
        return z3.And(0 <= a, a < ceil, 0 <= b, b < f, f * a + b < n)

    lem.valid("guarded: into", "(o, ii) in D' => 0 <= f*o + ii < N",
              z3.Implies(guarded(o, ii), z3.And(0 <= f * o + ii, f * o + ii < n)), base)
    lem.valid("guarded: injective", "(o, ii), (o2, ii2) in D', f*o + ii = f*o2 + ii2 => (o, ii) = (o2, ii2)",
              z3.Implies(z3.And(guarded(o, ii), guarded(o2, ii2), f * o + ii == f * o2 + ii2),
                         z3.And(o == o2, ii == ii2)), base)
    lem.valid("guarded: onto", "0 <= i < N => (i div f, i mod f) in D' and f*(i div f) + i mod f = i",
              z3.Implies(z3.And(0 <= i, i < n), z3.And(guarded(i / f, i % f), f * (i / f) + i % f == i)), base)
    lem.valid("guarded: increasing", "(o, ii) <lex (o2, ii2), both in 0 <= ii < f => f*o + ii < f*o2 + ii2",
              z3.Implies(z3.And(0 <= ii, ii < f, 0 <= ii2, ii2 < f, lex_lt([o, ii], [o2, ii2])),
                         f * o + ii < f * o2 + ii2), base)

    q = n / f

    def main_(a, b):
        return z3.And(0 <= a, a < q, 0 <= b, b < f)

    def tail(c):
        return z3.And(0 <= c, c < n - f * q)

    lem.valid("partition: main into", "main(o, ii) => 0 <= f*o + ii < f*(N div f) <= N",
              z3.Implies(main_(o, ii), z3.And(0 <= f * o + ii, f * o + ii < f * q, f * q <= n)), base)
    lem.valid("partition: tail into", "tail(r) => f*(N div f) <= f*(N div f) + r < N",
              z3.Implies(tail(r), z3.And(f * q <= f * q + r, f * q + r < n)), base)
    lem.valid("partition: injective and disjoint",
              "main and tail images are each injective, and no main image equals a tail image",
              z3.And(z3.Implies(z3.And(main_(o, ii), main_(o2, ii2), f * o + ii == f * o2 + ii2),
                                z3.And(o == o2, ii == ii2)),
                     z3.Implies(z3.And(tail(r), tail(r2), f * q + r == f * q + r2), r == r2),
                     z3.Implies(z3.And(main_(o, ii), tail(r)), f * o + ii != f * q + r)), base)
    lem.valid("partition: onto", "0 <= i < N => main(i div f, i mod f) or tail(i - f*(N div f))",
              z3.Implies(z3.And(0 <= i, i < n),
                         z3.Or(z3.And(main_(i / f, i % f), f * (i / f) + i % f == i), tail(i - f * q))), base)
    lem.valid("partition: order", "main images increase with (o, ii), tail images with r, main before tail",
              z3.And(z3.Implies(z3.And(main_(o, ii), main_(o2, ii2), lex_lt([o, ii], [o2, ii2])),
                                f * o + ii < f * o2 + ii2),
                     z3.Implies(z3.And(main_(o, ii), tail(r)), f * o + ii < f * q + r)), base)
    return lem.finish()


if __name__ == "__main__":
    sys.exit(main())
