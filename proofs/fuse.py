"""Lemma behind ``fuse`` and ``coalesce`` (mixed-radix merging of a rectangular band).

In words: for extents ``N >= 0`` and ``M >= 1``, ``tau(f) = (f div M, f mod M)`` maps
``[0, N*M)`` onto ``[0, N) x [0, M)`` bijectively, and ``f < g`` iff ``tau(f) <lex tau(g)``:
the fused loop runs every iteration of the band once, in the band's order. For three
levels (``coalesce`` of ``N0 x N1 x N2``, ``N1, N2 >= 1``),
``tau(f) = (f div (N1*N2), (f div N2) mod N1, f mod N2)`` is the same kind of bijection: every
``f`` has unique mixed-radix digits ``(q, a, b)`` (``f = q*N1*N2 + a*N2 + b``, ``0 <= a < N1``,
``0 <= b < N2``), ``tau`` returns them, and integers compare as their digits do.
Discharged with z3 for all extents (non-linear: the extents are symbolic).
"""
import sys
from pathlib import Path

import z3

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lemma import Lemma, lex_lt  # noqa: E402


def main() -> int:
    lem = Lemma("fuse", "mixed radix is an order-preserving bijection between [0, prod N) and the band")
    n, m, f, g, a, b = z3.Ints("N M f g a b")
    base = [n >= 0, m >= 1]
    lem.valid("two levels: into", "0 <= f < N*M => 0 <= f div M < N and 0 <= f mod M < M",
              z3.Implies(z3.And(0 <= f, f < n * m), z3.And(0 <= f / m, f / m < n, 0 <= f % m, f % m < m)), base)
    lem.valid("two levels: onto", "0 <= a < N, 0 <= b < M => f = a*M + b lies in [0, N*M) and tau(f) = (a, b)",
              z3.Implies(z3.And(0 <= a, a < n, 0 <= b, b < m),
                         z3.And(0 <= a * m + b, a * m + b < n * m, (a * m + b) / m == a, (a * m + b) % m == b)), base)
    lem.valid("two levels: injective", "tau(f) = tau(g) => f = g",
              z3.Implies(z3.And(f / m == g / m, f % m == g % m), f == g), base)
    lem.valid("two levels: order", "f < g <=> tau(f) <lex tau(g)",
              (f < g) == lex_lt([f / m, f % m], [g / m, g % m]), base)
    n0, n1, n2 = z3.Ints("N0 N1 N2")
    three = [n0 >= 0, n1 >= 1, n2 >= 1]

    def tau3(x):
        return [x / (n1 * n2), (x / n2) % n1, x % n2]

    x0, x1, x2 = z3.Ints("x0 x1 x2")
    lem.valid("three levels: onto", "a point (x0, x1, x2) of the box is tau3(x0*N1*N2 + x1*N2 + x2)",
              z3.Implies(z3.And(0 <= x0, x0 < n0, 0 <= x1, x1 < n1, 0 <= x2, x2 < n2),
                         z3.And(*[t == x for t, x in zip(tau3(x0 * n1 * n2 + x1 * n2 + x2), (x0, x1, x2))])), three)
    lem.valid("three levels: into", "0 <= f < N0*N1*N2 => tau3(f) lies in the box",
              z3.Implies(z3.And(0 <= f, f < n0 * n1 * n2),
                         z3.And(*[z3.And(0 <= t, t < e) for t, e in zip(tau3(f), (n0, n1, n2))])), three)
    q, q2, a2, b2 = z3.Ints("q q2 a2 b2")

    def flat(u, v, w):
        return u * n1 * n2 + v * n2 + w

    digits = [0 <= a, a < n1, 0 <= b, b < n2]
    x, mm, d = z3.Ints("x M' d")
    lem.valid("division", "M >= 1, 0 <= d < M => (x*M + d) div M = x and (x*M + d) mod M = d, for every integer x",
              z3.Implies(z3.And(mm >= 1, 0 <= d, d < mm), z3.And((x * mm + d) / mm == x, (x * mm + d) % mm == d)))

    def division(xv, mv, dv):  # an instance of the claim just proved (so a sound hypothesis)
        return z3.Implies(z3.And(mv >= 1, 0 <= dv, dv < mv),
                          z3.And((xv * mv + dv) / mv == xv, (xv * mv + dv) % mv == dv))

    lem.valid("three levels: digits", "0 <= a < N1, 0 <= b < N2 => tau3(q*N1*N2 + a*N2 + b) = (q, a, b) "
              "(from the division claim at (q*N1 + a, N2, b), (q, N1, a) and (q, N1*N2, a*N2 + b))",
              z3.Implies(z3.And(*digits), z3.And(*[t == v for t, v in zip(tau3(flat(q, a, b)), (q, a, b))])),
              three + [division(q * n1 + a, n2, b), division(q, n1, a), division(q, n1 * n2, a * n2 + b),
                       flat(q, a, b) == (q * n1 + a) * n2 + b, flat(q, a, b) == q * (n1 * n2) + (a * n2 + b)])
    r = f % (n1 * n2)
    lem.valid("three levels: every f has digits", "f = q*N1*N2 + a*N2 + b with q = f div (N1*N2), "
              "a = (f mod (N1*N2)) div N2 in [0, N1), b = (f mod (N1*N2)) mod N2 in [0, N2)",
              z3.And(f == flat(f / (n1 * n2), r / n2, r % n2), 0 <= r / n2, r / n2 < n1, 0 <= r % n2, r % n2 < n2),
              three)
    lem.valid("three levels: order", "for digits (q, a, b), (q2, a2, b2): flat < flat2 <=> (q, a, b) <lex (q2, a2, b2)",
              z3.Implies(z3.And(*digits, 0 <= a2, a2 < n1, 0 <= b2, b2 < n2),
                         (flat(q, a, b) < flat(q2, a2, b2)) == lex_lt([q, a, b], [q2, a2, b2])), three)
    return lem.finish()


if __name__ == "__main__":
    sys.exit(main())
