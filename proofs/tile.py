"""Lemma behind ``tile`` (split every loop of a 2-d band, then all outer loops before all inner ones).

In words, for tile sizes ``bi, bj >= 1`` and extents ``N, M >= 0``:

1. coverage: ``tau(io, jo, ii, jj) = (bi*io + ii, bj*jo + jj)`` maps the guarded domain
   ``{0 <= io < ceil(N/bi), 0 <= jo < ceil(M/bj), 0 <= ii < bi, 0 <= jj < bj,
   bi*io + ii < N, bj*jo + jj < M}`` onto ``[0, N) x [0, M)`` bijectively (the split lemma on
   each axis; the permutation of the loops does not change the set of points);
2. order: a dependence whose distance is ``>= 0`` on both axes (a fully permutable band)
   stays in order: ``(i, j) != (i2, j2), i <= i2, j <= j2  =>
   (i div bi, j div bj, i mod bi, j mod bj) <lex (i2 div bi, j2 div bj, i2 mod bi, j2 mod bj)``,
   using that division by ``b >= 1`` is monotone.

Discharged with z3 for all tile sizes and extents.
"""
import sys
from pathlib import Path

import z3

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lemma import Lemma, lex_lt  # noqa: E402


def main() -> int:
    lem = Lemma("tile", "tiling a 2-d band is a bijection that keeps every non-negative dependence in order")
    bi, bj, n, m, i, j, i2, j2 = z3.Ints("bi bj N M i j i2 j2")
    io, jo, ii, jj, io2, jo2, ii2, jj2 = z3.Ints("io jo ii jj io2 jo2 ii2 jj2")
    base = [bi >= 1, bj >= 1, n >= 0, m >= 0]

    def dom(a, b, c, d):
        return z3.And(0 <= a, a < (n + bi - 1) / bi, 0 <= b, b < (m + bj - 1) / bj, 0 <= c, c < bi, 0 <= d, d < bj,
                      bi * a + c < n, bj * b + d < m)

    lem.valid("coverage: into", "tile domain => 0 <= bi*io + ii < N and 0 <= bj*jo + jj < M",
              z3.Implies(dom(io, jo, ii, jj), z3.And(0 <= bi * io + ii, bi * io + ii < n, 0 <= bj * jo + jj,
                                                     bj * jo + jj < m)), base)
    lem.valid("coverage: injective", "tau(p) = tau(p2) on the tile domain => p = p2",
              z3.Implies(z3.And(dom(io, jo, ii, jj), dom(io2, jo2, ii2, jj2), bi * io + ii == bi * io2 + ii2,
                                bj * jo + jj == bj * jo2 + jj2),
                         z3.And(io == io2, jo == jo2, ii == ii2, jj == jj2)), base)
    lem.valid("coverage: onto", "(i, j) in [0, N) x [0, M) => (i div bi, j div bj, i mod bi, j mod bj) is in the tile "
              "domain and maps to (i, j)",
              z3.Implies(z3.And(0 <= i, i < n, 0 <= j, j < m),
                         z3.And(dom(i / bi, j / bj, i % bi, j % bj), bi * (i / bi) + i % bi == i,
                                bj * (j / bj) + j % bj == j)), base)
    a, b, q = z3.Ints("a b q")
    lem.valid("division is monotone", "a <= b, q >= 1 => a div q <= b div q; a div q = b div q and a <= b => "
              "a mod q <= b mod q, with equality only if a = b",
              z3.Implies(z3.And(a <= b, q >= 1), z3.And(a / q <= b / q,
                                                        z3.Implies(a / q == b / q, z3.And(a % q <= b % q,
                                                                   z3.Implies(a % q == b % q, a == b))))))

    def mono(x, y, k):  # an instance of the claim just proved (so a sound hypothesis)
        return z3.Implies(z3.And(x <= y, k >= 1), z3.And(x / k <= y / k, z3.Implies(x / k == y / k, z3.And(
            x % k <= y % k, z3.Implies(x % k == y % k, x == y)))))

    lem.valid("order of non-negative dependences", "i <= i2, j <= j2, (i, j) != (i2, j2) => tile(i, j) <lex "
              "tile(i2, j2) with tile(i, j) = (i div bi, j div bj, i mod bi, j mod bj)",
              z3.Implies(z3.And(i <= i2, j <= j2, z3.Or(i != i2, j != j2)),
                         lex_lt([i / bi, j / bj, i % bi, j % bj], [i2 / bi, j2 / bj, i2 % bi, j2 % bj])),
              base + [mono(i, i2, bi), mono(j, j2, bj)])
    return lem.finish()


if __name__ == "__main__":
    sys.exit(main())
