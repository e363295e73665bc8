"""Lemma behind ``fission`` and its inverse ``merge`` (loop distribution over a body's statements).

In words: a loop over ``[s, e)`` whose body is the statements ``0 .. n-1``, cut after statement
``k`` (``0 <= k < n - 1``), runs the instance ``(p, i)`` (statement ``p`` at iteration ``i``)
before ``(q, j)`` when ``i < j``, or ``i = j`` and ``p < q``. The two loops of the fission run
``(p, i)`` before ``(q, j)`` when ``p``'s half comes first, or both lie in one half and the old
order holds. Then:

- coverage: tau (``i := i`` on the first loop, ``i := i2`` on the second) maps the new instances
  onto the old ones, each exactly once;
- order: both orders are total, and the pairs they order oppositely are exactly
  ``{(p, i), (q, j) : p <= k < q, j < i}``: a first-half statement at a later iteration than a
  second-half one. So fission preserves every dependence iff none of those pairs conflicts.

``merge`` is the same rewrite read backwards (its old order is the fission's new one), so the
pairs it reverses are the same set: a first-loop statement at ``i`` and a second-loop one at
``j < i``. Discharged with isl for symbolic ``s``, ``e``, ``n`` and ``k``.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lemma import Lemma  # noqa: E402

PARAMS = "[s, e, n, k] -> "
SHAPE = "s <= i < e and s <= j < e and 0 <= p < n and 0 <= q < n and 0 <= k < n - 1"
OLD = "(i < j or (i = j and p < q))"
OLD_BACK = "(j < i or (j = i and q < p))"  # the old order, (q, j) first
SPLIT, SPLIT_BACK = "(p <= k and q > k)", "(q <= k and p > k)"  # p's half first; q's half first
SAME = "((p <= k and q <= k) or (p > k and q > k))"
NEW = f"({SPLIT} or ({SAME} and {OLD}))"
NEW_BACK = f"({SPLIT_BACK} or ({SAME} and {OLD_BACK}))"


def pairs(condition: str) -> str:
    return f"{PARAMS}{{ [p, i, q, j] : {SHAPE} and ({condition}) }}"


def main() -> int:
    lem = Lemma("fission", "distributing a loop over its body reverses exactly the pairs (first half at i, "
                "second half at j < i); merge, its inverse, the same pairs")
    lem.isl_equal("coverage", "tau maps the instances of both loops onto the old instances, once each",
                  f"{PARAMS}{{ [p, i] : 0 <= k < n - 1 and 0 <= p < n and s <= i < e and "
                  "(p <= k or (exists (i2 : p > k and s <= i2 < e and i = i2))) }",
                  f"{PARAMS}{{ [p, i] : 0 <= k < n - 1 and 0 <= p < n and s <= i < e }}")
    lem.isl_empty("the old order is total", "distinct instances are ordered one way",
                  pairs(f"(p != q or i != j) and not {OLD} and not {OLD_BACK}"))
    lem.isl_empty("the new order is total", "distinct instances are ordered one way",
                  pairs(f"(p != q or i != j) and not {NEW} and not {NEW_BACK}"))
    lem.isl_equal("fission reverses exactly these pairs", "OLD(y, x) and not NEW(y, x) <=> p <= k < q and j < i",
                  pairs(f"{OLD_BACK} and not {NEW_BACK}"), pairs("p <= k < q and j < i"))
    lem.isl_equal("merge reverses exactly these pairs", "NEW(x, y) and not OLD(x, y) <=> p <= k < q and j < i",
                  pairs(f"{NEW} and not {OLD}"), pairs("p <= k < q and j < i"))
    return lem.finish()


if __name__ == "__main__":
    sys.exit(main())
