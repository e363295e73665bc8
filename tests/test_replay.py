"""Replaying long schedule histories: the index identities that keep split/fuse cycles from growing the
program (checked against brute-force evaluation), and histories of a few hundred ops replaying exactly."""
from __future__ import annotations

import itertools

import numpy as np

import tilecert as tc
from tilecert.semantics.index import IBin, IConst, IVar, evaluate, ibin

from examples import EXAMPLES

X = IVar(0, 0)


def values_agree(folded, unfolded, xs=range(-60, 61)) -> bool:
    return all(evaluate(folded, {}, {(0, 0): x}) == evaluate(unfolded, {}, {(0, 0): x}) for x in xs)


def test_a_product_plus_a_small_remainder_divided_by_its_factor_folds_to_the_multiplicand():
    for c, d, product_first in itertools.product(range(2, 8), range(-2, 10), (True, False)):
        product = IBin("mul", X, IConst(c)) if product_first else IBin("mul", IConst(c), X)
        numerator = IBin("add", product, IConst(d)) if d else product
        folded = ibin("floordiv", ibin("add", product, IConst(d)) if d else product, IConst(c))
        assert values_agree(folded, IBin("floordiv", numerator, IConst(c))), (c, d)
        assert (folded == X) == (0 <= d < c), (c, d, folded)  # folded exactly when the identity holds


def test_quotient_and_remainder_recombine():
    for c in range(1, 8):
        q, r = IBin("floordiv", X, IConst(c)), IBin("mod", X, IConst(c))
        for product in (IBin("mul", IConst(c), q), IBin("mul", q, IConst(c))):
            assert ibin("add", product, r) == X
        other = IBin("mod", X, IConst(c + 1))  # a remainder by another divisor does not recombine
        kept = ibin("add", IBin("mul", IConst(c), q), other)
        assert kept != X and values_agree(kept, IBin("add", IBin("mul", IConst(c), q), other))


def split_fuse(n: int, names: bool = True) -> tc.Schedule:
    s = tc.schedule(EXAMPLES["elementwise"].kernel, N=64)
    loop = "nest"
    for _ in range(n):
        outer, inner = s.split(loop, 2, **({"outer": "a", "inner": "b"} if names else {}))
        loop = s.fuse(outer, inner, **({"name": "nest"} if names else {}))
    return s


def test_split_fuse_cycles_leave_the_program_the_same_size():
    short, long = split_fuse(2), split_fuse(100)
    assert tc.digest(long.program) == tc.digest(short.program)  # the same program up to renaming
    assert str(long.loops()[0].extent) == str(short.loops()[0].extent)


def test_default_names_of_merged_loops_stay_bounded():
    s = split_fuse(40, names=False)
    assert max(len(lp.name) for lp in s.loops()) <= 64 + len(".o")


def test_a_history_of_200_ops_replays_to_the_same_program():
    s = tc.schedule(EXAMPLES["gemm"].kernel, M=16, N=16, K=16)
    for k in range(200):
        s.swap(*(("nest.0", "nest.1") if k % 2 == 0 else ("nest.1", "nest.0")))
    back = tc.Schedule.from_json(s.to_json(), s.kernel)
    assert len(back.history) == 200 and back.program == s.program
    long = split_fuse(100)
    again = tc.Schedule.from_json(long.to_json(), long.kernel)
    assert len(again.history) == 200 and again.program == long.program
    arrays = {"X": np.arange(64, dtype=np.float32), "B": np.ones(64, np.float32), "Y": np.zeros(64, np.float32)}
    assert np.array_equal(again.run(**arrays)["Y"], 2.5 * arrays["X"] + 1)
