"""Lemma behind ``reorder`` / ``swap`` (permuting the loops of a perfectly nested band).

In words:

1. swapping two loops reverses the order of exactly the pairs of iterations whose
   distance has direction ``(<, >)``: ``x <lex y and swap(y) <lex swap(x)  <=>  x0 < y0 and
   x1 > y1``; so a swap is legal iff no dependence has that direction;
2. in a fully permutable band (every dependence distance ``d = y - x`` has all components
   ``>= 0``), every permutation of the loops keeps every dependence in order
   (``pi(x) <lex pi(y)``), for bands of 2, 3 and 4 loops and each of their permutations;
3. a dependence carried by an outer loop (``d_0 > 0``) stays in order under any
   permutation of the loops inside it, whatever the signs of the inner distances
   (a ``<`` in the outer direction protects the inner loops, an ``=`` does not: see 1).

Discharged with isl (Presburger arithmetic: for all coordinates, no parameters needed).
"""
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lemma import Lemma  # noqa: E402


def lex_lt(xs: list[str], ys: list[str]) -> str:
    parts = []
    for k in range(len(xs)):
        eq = [f"{xs[j]} = {ys[j]}" for j in range(k)]
        parts.append("(" + " and ".join(eq + [f"{xs[k]} < {ys[k]}"]) + ")")
    return "(" + " or ".join(parts) + ")"


def main() -> int:
    lem = Lemma("reorder", "a permutation of a band keeps a dependence in order iff its permuted distance is "
                "lexicographically positive; fully permutable bands permute freely")
    lem.isl_equal("swap reverses exactly (<, >)", "x <lex y and (y1, y0) <lex (x1, x0) <=> x0 < y0 and x1 > y1",
                  "{ [x0, x1, y0, y1] : " + lex_lt(["x0", "x1"], ["y0", "y1"]) + " and "
                  + lex_lt(["y1", "y0"], ["x1", "x0"]) + " }",
                  "{ [x0, x1, y0, y1] : x0 < y0 and x1 > y1 }")
    for k in (2, 3, 4):
        xs, ys = [f"x{j}" for j in range(k)], [f"y{j}" for j in range(k)]
        dims = ", ".join(xs + ys)
        nonneg = " and ".join(f"{y} >= {x}" for x, y in zip(xs, ys))
        differ = " or ".join(f"{y} > {x}" for x, y in zip(xs, ys))
        for perm in itertools.permutations(range(k)):
            px, py = [xs[p] for p in perm], [ys[p] for p in perm]
            lem.isl_empty(f"fully permutable band of {k}, permutation {perm}",
                          "d >= 0 componentwise, d != 0 => pi(x) <lex pi(y)",
                          f"{{ [{dims}] : {nonneg} and ({differ}) and not {lex_lt(px, py)} }}")
        for perm in itertools.permutations(range(1, k)):
            px, py = [xs[0]] + [xs[p] for p in perm], [ys[0]] + [ys[p] for p in perm]
            lem.isl_empty(f"carried by the outer loop, band of {k}, inner permutation {perm}",
                          "x0 < y0 => pi(x) <lex pi(y) for pi fixing the outer loop",
                          f"{{ [{dims}] : x0 < y0 and not {lex_lt(px, py)} }}")
    return lem.finish()


if __name__ == "__main__":
    sys.exit(main())
