"""Lemma behind ``partition`` (index-set splitting into consecutive segments).

In words: for a loop over ``[s, e)`` and breakpoints ``s < b_1 < ... < b_m < e``, the
segments ``[s, b_1), [b_1, b_2), ..., [b_m, e)`` are pairwise disjoint, their union is
``[s, e)``, and every iteration of a segment comes before every iteration of the next; with
each segment run in increasing order, every iteration runs exactly once, in its original
order (tau is the identity on the coordinate). Discharged with isl for ``m = 1, 2, 3`` with
``s``, ``e`` and the breakpoints symbolic; any ``m`` follows by induction, since adding a
breakpoint splits one segment as the case ``m = 1`` does.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lemma import Lemma  # noqa: E402


def main() -> int:
    lem = Lemma("partition", "consecutive segments tile [s, e) disjointly and in order")
    for m in (1, 2, 3):
        bs = [f"b{k}" for k in range(1, m + 1)]
        bounds = ["s"] + bs + ["e"]
        params = f"[{', '.join(['s'] + bs + ['e'])}] -> "
        chain = " < ".join(bounds)
        segs = [f"({lo} <= i < {hi})" for lo, hi in zip(bounds, bounds[1:])]
        later = [f"({lo} <= i2 < {hi})" for lo, hi in zip(bounds, bounds[1:])]
        lem.isl_equal(f"{m} breakpoint(s): cover", f"{chain} => union of segments = [s, e)",
                      f"{params}{{ [i] : {chain} and ({' or '.join(segs)}) }}",
                      f"{params}{{ [i] : {chain} and s <= i < e }}")
        for j in range(m + 1):
            for k in range(j + 1, m + 1):
                lem.isl_empty(f"{m} breakpoint(s): segments {j} and {k} are disjoint and ordered",
                              f"{chain}, i in segment {j}, i2 in segment {k} => i < i2",
                              f"{params}{{ [i, i2] : {chain} and {segs[j]} and {later[k]} and i >= i2 }}")
    return lem.finish()


if __name__ == "__main__":
    sys.exit(main())
