"""Barrier uniformity in the loop-form interpreter: the participants of a scope instance.

A block barrier's participants are all threads of a block (every block, warp and lane
axis together); a warp barrier's are the lanes of one warp, so different warps may differ.
"""
from __future__ import annotations

import numpy as np
import pytest

import tilecert as tc
from test_checker_programs import assign, barrier, guard, ld, loop, lt, program, tensor, v

from tilecert.semantics.index import IBin, IConst


def two_d_block(cond) -> tc.Program:
    """A 2 x 4 thread block; each thread writes its cell, the barrier sits under ``cond``."""
    body = loop(0, "ty", 2, loop(1, "tx", 4,
                                 assign("A", (v(0), v(1)), ld("X", v(0), v(1))),
                                 guard(cond, barrier("block")),
                                 kind="parallel", binding="block0"),
                kind="parallel", binding="block1")
    return program("blk", ("R", "C"), [tensor("A", ("R", "C")), tensor("X", ("R", "C"), written=False)], body)


def warps(cond) -> tc.Program:
    """Two warps of four lanes; the warp barrier sits under ``cond``."""
    body = loop(0, "w", 2, loop(1, "l", 4,
                                assign("A", (v(0), v(1)), ld("X", v(0), v(1))),
                                guard(cond, barrier("warp")),
                                kind="parallel", binding="lane"),
                kind="parallel", binding="warp")
    return program("wrp", ("R", "C"), [tensor("A", ("R", "C")), tensor("X", ("R", "C"), written=False)], body)


def arrays():
    x = np.arange(8, dtype=np.int32).reshape(2, 4)
    return {"A": np.zeros((2, 4), np.int32), "X": x}


def test_a_block_barrier_skipped_by_two_threads_of_one_row_is_divergent():
    # threads (1, 2) and (1, 3) skip it: each axis alone is reached by some thread at every coordinate
    skip = IBin("or", lt(v(0), 1), lt(v(1), 2))
    with pytest.raises(tc.ExecutionError, match=r"block barrier reached by participants \(ty, tx\)") as err:
        tc.run(two_d_block(skip), **arrays())
    assert "(1, 2)" in err.value.message and err.value.hint


def test_a_uniform_block_barrier_runs():
    out = tc.run(two_d_block(IConst(1)), **arrays())
    assert np.array_equal(out["A"], arrays()["X"])


def test_a_warp_barrier_reached_by_every_lane_of_one_warp_and_none_of_another_is_legal():
    out = tc.run(warps(lt(v(0), 1)), **arrays())
    assert np.array_equal(out["A"], arrays()["X"])


def test_a_warp_barrier_reached_by_some_lanes_of_a_warp_is_divergent():
    with pytest.raises(tc.ExecutionError, match=r"warp barrier reached by participants \(l\)"):
        tc.run(warps(lt(v(1), 3)), **arrays())
