"""Lemma behind ``stage`` (read a source through a tile, in its modes).

In words: (1) a tile part ``c1*v1 + c2*v2`` with ``c_i >= 1`` over ``v_i in [0, n_i)`` lies in
``[0, d)``, ``d = 1 + c1*(n1 - 1) + c2*(n2 - 1)``, so every remapped read is inside the tile, and
``o + u`` for ``u`` in the tile part is the cell the read read before; (2) the cooperative lanes
cover the copy loop exactly once: ``{l in [0, w) : l < e} = [0, e)`` for ``e <= w``, and
``(c, l) -> w*c + l`` maps ``[0, e/w) x [0, w)`` onto ``[0, e)`` injectively when ``w | e``; (3) a
hoisted pack indexes the source bijectively: ``(q, u) -> q*d + u`` maps ``[0, Q) x [0, d)`` onto
``[0, Q*d)`` injectively, and a read at ``o + t`` with ``d | o`` reads pack cell ``(o/d, t)``; (4) the
double-buffered ring never prefetches into the slot being read, ``(k + 1) mod 2 != k mod 2``, and
iteration ``k`` reads the slot iteration ``k - 1`` filled, ``((k - 1) + 1) mod 2 = k mod 2``; (5) a
padded minor extent ``ceil(d/p)*p`` holds the unpadded one. Discharged with z3 and isl for all values.
"""
import sys
from pathlib import Path

import z3

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lemma import Lemma  # noqa: E402


def main() -> int:
    lem = Lemma("stage", "a staged read reads the tile cell holding the source cell it read before")
    c1, c2, n1, n2, v1, v2 = z3.Ints("c1 c2 n1 n2 v1 v2")
    d = 1 + c1 * (n1 - 1) + c2 * (n2 - 1)
    part = c1 * v1 + c2 * v2
    lem.valid("tile extent", "0 <= c1*v1 + c2*v2 < 1 + c1*(n1-1) + c2*(n2-1)", z3.And(0 <= part, part < d),
              [c1 >= 1, c2 >= 1, 0 <= v1, v1 < n1, 0 <= v2, v2 < n2])
    lem.isl_equal("lanes over a short copy loop", "{ [l] : 0 <= l < w and l < e } = { [l] : 0 <= l < e }, e <= w",
                  "[w, e] -> { [l] : 0 <= l < w and l < e and 0 <= e <= w }",
                  "[w, e] -> { [l] : 0 <= l < e and 0 <= e <= w }")
    w, c, l, c_, l_, m, y = z3.Ints("w c l c_ l_ m y")
    lem.valid("chunks cover the copy loop", "0 <= y < m*w => y = w*c + l with c = y div w in [0, m), l = y mod w",
              z3.And(y == w * (y / w) + y % w, 0 <= y / w, y / w < m, 0 <= y % w, y % w < w),
              [w >= 1, m >= 0, 0 <= y, y < m * w])
    lem.valid("chunks are injective", "w*c + l = w*c' + l' with 0 <= l, l' < w => (c, l) = (c', l')",
              z3.Implies(w * c + l == w * c_ + l_, z3.And(c == c_, l == l_)),
              [w >= 1, 0 <= l, l < w, 0 <= l_, l_ < w])
    x, q, u, q_, u_, dd, o, t = z3.Ints("x q u q_ u_ dd o t")  # dd: the tile extent d
    lem.valid("pack cells are distinct", "q*d + u = q'*d + u' with 0 <= u, u' < d => (q, u) = (q', u')",
              z3.Implies(q * dd + u == q_ * dd + u_, z3.And(q == q_, u == u_)),
              [dd >= 1, 0 <= u, u < dd, 0 <= u_, u_ < dd])
    lem.valid("pack covers the source", "0 <= x => x = (x div d)*d + x mod d with 0 <= x mod d < d",
              z3.And(x == (x / dd) * dd + x % dd, 0 <= x % dd, x % dd < dd), [dd >= 1, x >= 0])
    lem.valid("a read reads its pack cell", "d | o => (o div d)*d + t = o + t",
              (o / dd) * dd + t == o + t, [dd >= 1, o % dd == 0])
    k = z3.Int("k")
    lem.valid("the prefetch writes the other slot", "(k + 1) mod 2 != k mod 2", (k + 1) % 2 != k % 2, [k >= 0])
    lem.valid("iteration k reads what k - 1 filled", "((k - 1) + 1) mod 2 = k mod 2", ((k - 1) + 1) % 2 == k % 2,
              [k >= 1])
    p = z3.Int("p")
    lem.valid("padding holds the row", "d <= ceil(d/p)*p", dd <= (dd + p - 1) / p * p, [dd >= 1, p >= 2])
    return lem.finish()


if __name__ == "__main__":
    sys.exit(main())
