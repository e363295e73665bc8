"""Lemma behind ``expand_dim`` and the ``lift_alloc`` that follows it.

In words: for loops ``v_1 .. v_k`` over ``[s_i, s_i + n_i)`` around a declaration of shape ``S``,
the expanded cell of an access ``u`` in iteration ``v`` is ``(v_1 - s_1, .., v_k - s_k, u)``. Then
(1) the leading index lies in ``[0, n)``: an expanded access is in bounds exactly when the old one
was; (2) the map ``v -> v - s`` is injective: distinct iterations use disjoint slices, so once the
declaration is lifted out of the loops (one buffer for all iterations) no cell is shared between
iterations and each still finds its cells zero (``lift_alloc``'s condition holds vacuously); (3)
the slices tile the new buffer: every cell of ``[0, n) x S`` belongs to exactly one iteration's slice
(shown for a one-axis ``S``; more axes are untouched components), each slice a copy of ``S``. Discharged with isl for ``k = 1, 2, 3`` with
the starts, extents and ``S`` symbolic.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lemma import Lemma  # noqa: E402


def main() -> int:
    lem = Lemma("expand_dim", "v - s indexes disjoint in-bounds slices, one per iteration")
    for k in range(1, 4):
        ks = range(1, k + 1)
        params = "[" + ", ".join([f"s{i}" for i in ks] + [f"n{i}" for i in ks] + ["S"]) + "] -> "
        dom1 = " and ".join(f"s{i} <= v{i} < s{i} + n{i}" for i in ks)
        dom2 = " and ".join(f"s{i} <= w{i} < s{i} + n{i}" for i in ks)
        vs, ws = ", ".join(f"v{i}" for i in ks), ", ".join(f"w{i}" for i in ks)
        out = " or ".join(f"v{i} - s{i} < 0 or v{i} - s{i} >= n{i}" for i in ks)
        lem.isl_empty(f"{k} loop(s): in bounds", "v in its loops' ranges => 0 <= v - s < n",
                      f"{params}{{ [{vs}] : {dom1} and ({out}) }}")
        same = " and ".join(f"v{i} - s{i} = w{i} - s{i}" for i in ks)
        differ = " or ".join(f"v{i} != w{i}" for i in ks)
        lem.isl_empty(f"{k} loop(s): disjoint slices", "v != w => (v - s, u) != (w - s, u') for all u, u'",
                      f"{params}{{ [{vs}, {ws}, u, u2] : {dom1} and {dom2} and ({differ}) and {same} "
                      f"and u = u2 and 0 <= u < S }}")
        cs = ", ".join(f"c{i}" for i in ks)
        onto = " and ".join(f"c{i} = v{i} - s{i}" for i in ks)
        box = " and ".join(f"0 <= c{i} < n{i}" for i in ks)
        lem.isl_equal(f"{k} loop(s): the slices tile the new buffer", "{(v - s, u) : v in range, u in [0, S)} = "
                      "[0, n) x [0, S)",
                      f"{params}{{ [{cs}, u] : exists ({vs}: {dom1} and {onto}) and 0 <= u < S }}",
                      f"{params}{{ [{cs}, u] : {box} and 0 <= u < S }}")
    return lem.finish()


if __name__ == "__main__":
    sys.exit(main())
