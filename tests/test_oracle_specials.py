"""Oracle cases found by attacking it: special results of exact operands compare by class, a
backend must return the tensor's dtype, and a bound that admits the value's negation makes a trial
inconclusive, never a match. Also: schedule ops refuse integers the backends' int64 would wrap."""
import numpy as np
import pytest

import tilecert as tc
from tilecert import bf16, f32


@tc.kernel
def klog(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"]):
    for n in tc.parallel(X.shape[0]):
        i = n.index()
        Y.tile((i,), (1,)).store(tc.log(X.tile((i,), (1,)).load()))


@tc.kernel
def kexp(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"]):
    for n in tc.parallel(X.shape[0]):
        i = n.index()
        Y.tile((i,), (1,)).store(tc.exp(X.tile((i,), (1,)).load() * 100.0))


@tc.kernel
def add(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"]):
    for n in tc.parallel(X.shape[0]):
        i = n.index()
        Y.tile((i,), (1,)).store(X.tile((i,), (1,)).load() + 1.0)


@tc.kernel
def gemm(A: tc.Tensor[bf16, "M", "K"], B: tc.Tensor[bf16, "K", "N"], C: tc.Tensor[bf16, "M", "N"]):
    M, K = A.shape
    N = B.shape[1]
    for nest in tc.parallel(1):
        a = A.tile((0, 0), (M, K)).load()
        b = B.tile((0, 0), (K, N)).load()
        C.tile((0, 0), (M, N)).store(tc.mma(a, b, C.tile((0, 0), (M, N)).load()))


def _log_nan_as_42(X, Y, **_):
    with np.errstate(all="ignore"):
        y = np.log(X).astype(np.float32)
    y[np.isnan(y) & ~np.isnan(X)] = 42.0
    return {"Y": y}


def _exp_overflow_as_0(X, Y, **_):
    with np.errstate(all="ignore"):
        y = np.exp(X * np.float32(100)).astype(np.float32)
    y[np.isinf(y) & np.isfinite(X)] = 0.0
    return {"Y": y}


def _bit_patterns(X, Y, **_):
    return {"Y": (X + np.float32(1)).view(np.int32)}


@pytest.mark.parametrize("kernel, backend", [(klog, _log_nan_as_42), (kexp, _exp_overflow_as_0), (add, _bit_patterns)])
def test_special_results_and_dtypes_are_compared(kernel, backend):
    s = tc.schedule(kernel, N=64)
    report = tc.differential(s, trials=4, backend=backend)
    assert not report.matched and report.failed and report.label == "MISMATCH", str(report)
    assert tc.differential(s, trials=4).matched  # the compiled kernel computes the same specials


def test_a_bound_that_admits_the_negation_is_inconclusive_not_a_match():
    s = tc.schedule(gemm, M=4, N=4, K=256)  # bf16: u * L = 2**-8 * 256 >= 1
    report = tc.differential(s, trials=3, backend=lambda A, B, C, **_: {"C": np.zeros_like(C)})
    assert not report.matched and not report.failed and report.label == "INCONCLUSIVE", str(report)
    assert any(t.outcome == "inconclusive" for t in report.trials)
    short = tc.schedule(gemm, M=4, N=4, K=4)
    assert tc.differential(short, trials=3).matched


@pytest.mark.parametrize("op, args", [("split", (2**63,)), ("pad", (2**64,)), ("tile", ([2**70],))])
def test_ops_refuse_integers_outside_int64(op, args):
    s = tc.schedule(add, N=9)
    loop = s.loops()[0].name
    with pytest.raises(tc.ScheduleError, match="outside int64"):
        getattr(s, op)([loop] if op == "tile" else loop, *args)
