"""Lemma behind ``pad`` (extend a loop to a multiple of ``t`` and guard its effects).

In words: for ``t >= 1`` and ``N >= 0``, the padded extent ``M = ceil(N/t)*t`` satisfies
``N <= M < N + t`` and ``t | M``, and the iterations that keep their effects,
``{0 <= i < M : i < N}``, are exactly ``[0, N)``: tau is the identity restricted to ``i < N``,
so every original iteration runs once, in its order, and the padding iterations have no
effect (their stores and updates are guarded off; index expressions, declarations and
barriers change no cell). Discharged with z3 for all ``t`` and ``N``.
"""
import sys
from pathlib import Path

import z3

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lemma import Lemma  # noqa: E402


def main() -> int:
    lem = Lemma("pad", "padding to a multiple of t keeps exactly the iterations [0, N)")
    t, n, i = z3.Ints("t N i")
    base = [t >= 1, n >= 0]
    big = (n + t - 1) / t * t
    lem.valid("extent", "N <= M < N + t and M mod t = 0, M = ceil(N/t)*t",
              z3.And(n <= big, big < n + t, big % t == 0), base)
    lem.valid("active iterations", "0 <= i < M and i < N <=> 0 <= i < N",
              z3.And(0 <= i, i < big, i < n) == z3.And(0 <= i, i < n), base)
    return lem.finish()


if __name__ == "__main__":
    sys.exit(main())
