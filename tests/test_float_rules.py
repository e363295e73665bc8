"""The float rules shared by the interpreter and the C backend, compared bitwise.

- min / max are IEEE 754-2019 minimum / maximum: NaN propagates, min(+0, -0) = -0 and
  max(+0, -0) = +0 in either operand order (all float dtypes, interpreter vs C, and the
  reference below, which is written from the rule and not from either implementation);
- exp, log, sqrt, tanh on bf16 and f16 compute the f32 result and round it once to the storage
  type: every one of the 65536 bit patterns of each, interpreter vs compiled C.
"""

import itertools
import math

import numpy as np
import pytest

import tilecert as tc
from tilecert import bf16, f16, f32, f64
from tilecert.semantics.ufuncs import maximum, minimum

FLOATS = {"f16": f16, "bf16": bf16, "f32": f32, "f64": f64}
SPECIALS = [0.0, -0.0, math.nan, -math.nan, math.inf, -math.inf, 1.0, -1.0, 2.5]


def make_binary(dt, fn):
    @tc.kernel
    def minmax(A: tc.Tensor[dt, "N"], B: tc.Tensor[dt, "N"], C: tc.Tensor[dt, "N"]):
        N = A.shape[0]
        for p in tc.parallel(N):
            i = p.index()
            C.tile((i,), (1,)).store(fn(A.tile((i,), (1,)).load(), B.tile((i,), (1,)).load()))
    return minmax


def make_reduce(dt, op):
    @tc.kernel
    def red(A: tc.Tensor[dt, "M", "N"], C: tc.Tensor[dt, "M"]):
        M = A.shape[0]
        N = A.shape[1]
        for p in tc.parallel(M):
            i = p.index()
            C.tile((i,), (1,)).store(tc.reduce(A.tile((i, 0), (1, N)).load(), 1, op))
    return red


def make_unary(dt, fn):
    @tc.kernel
    def un(A: tc.Tensor[dt, "N"], C: tc.Tensor[dt, "N"]):
        N = A.shape[0]
        for p in tc.parallel(tc.cdiv(N, 256)):
            i = p.index() * 256
            C.tile((i,), (256,)).store(fn(A.tile((i,), (256,)).load()))
    return un


def reference(fn: str, a: float, b: float) -> float:
    """IEEE 754-2019 minimum / maximum, from the rule."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if a == b == 0:
        neg = (math.copysign(1, a) < 0) or (math.copysign(1, b) < 0) if fn == "min" else \
            (math.copysign(1, a) < 0) and (math.copysign(1, b) < 0)
        return -0.0 if neg else 0.0
    return min(a, b) if fn == "min" else max(a, b)


def same_bits(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Elementwise: equal values with equal sign bits, or both NaN (payload-insensitive)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    return (np.isnan(x) & np.isnan(y)) | ((x == y) & (np.signbit(x) == np.signbit(y)))


@pytest.mark.parametrize("name", list(FLOATS))
@pytest.mark.parametrize("fn", ["min", "max"])
def test_min_max_of_signed_zeros_and_nan_follow_ieee_interpreter_and_c_bitwise(name, fn):
    dt = FLOATS[name]
    pairs = list(itertools.product(SPECIALS, SPECIALS))
    st = dt.storage
    a = np.array([p[0] for p in pairs], st)
    b = np.array([p[1] for p in pairs], st)
    k = make_binary(dt, tc.minimum if fn == "min" else tc.maximum)
    want = np.array([reference(fn, float(x), float(y)) for x, y in zip(a, b)])
    got_interp = tc.run(k, A=a, B=b, C=np.zeros_like(a))["C"]
    got_c = tc.compile(k, N=len(a))(A=a, B=b, C=np.zeros_like(a))["C"]
    assert same_bits(got_interp, want).all()
    assert same_bits(got_c, want).all()


@pytest.mark.parametrize("name", list(FLOATS))
@pytest.mark.parametrize("op", ["min", "max"])
def test_min_max_reductions_of_signed_zeros_agree_in_every_order(name, op):
    dt = FLOATS[name]
    rows = [list(r) for r in itertools.product([0.0, -0.0], repeat=3)] + [[0.0, -0.0, math.nan], [-0.0, 1.0, 0.0]]
    a = np.array(rows, dt.storage)
    want = []
    for r in rows:
        acc = r[0]
        for x in r[1:]:
            acc = reference(op, acc, x)
        want.append(acc)
    k = make_reduce(dt, op)
    c = tc.compile(k, M=a.shape[0], N=a.shape[1])(A=a, C=np.zeros(a.shape[0], dt.storage))["C"]
    assert same_bits(c, np.array(want)).all()
    for order in ("canonical", "reverse"):
        got = tc.run(k, order=order, A=a, C=np.zeros(a.shape[0], dt.storage))["C"]
        assert same_bits(got, np.array(want)).all()


def test_signed_zero_rule_holds_for_the_ufunc_methods():
    x = np.array([0.0, -0.0, 0.0, 3.0], np.float32)
    assert np.signbit(minimum.reduce(x)) and not np.signbit(maximum.reduce(x))
    acc = minimum.accumulate(x)
    assert list(np.signbit(acc)) == [False, True, True, True]
    arr = np.array([0.0, -0.0], np.float16)
    minimum.at(arr, (np.array([0, 0]),), np.array([-0.0, 0.0], np.float16))
    maximum.at(arr, (np.array([1]),), np.array([0.0], np.float16))
    assert list(np.signbit(arr)) == [True, False]


def all_patterns(name: str) -> np.ndarray:
    bits = np.arange(1 << 16, dtype=np.uint32)
    if name == "f16":
        return bits.astype(np.uint16).view(np.float16)
    return (bits << np.uint32(16)).view(np.float32)


@pytest.mark.parametrize("name", ["bf16", "f16"])
@pytest.mark.parametrize("fn", ["exp", "log", "sqrt", "tanh"])
def test_transcendentals_on_every_bit_pattern_match_compiled_c(name, fn):
    dt = FLOATS[name]
    a = all_patterns(name)
    k = make_unary(dt, getattr(tc, fn))
    with np.errstate(all="ignore"):
        got = tc.run(k, checked=False, A=a, C=np.zeros_like(a))["C"]
    c = tc.compile(k, N=len(a))(A=a, C=np.zeros_like(a))["C"]
    bad = ~same_bits(got, c)
    assert not bad.any(), f"{int(bad.sum())} differ, first at input {a[bad][:4]}: {got[bad][:4]} vs {c[bad][:4]}"
