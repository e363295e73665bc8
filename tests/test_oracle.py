"""The differential oracle: wrong results are caught, legal reorderings pass.

Mutants are callables returning the specification's result (the tile-level interpreter)
perturbed; the legal side is the specification itself under adversarial reduction trees and
reverse / shuffled instance orders, the scheduled loop form, and compiled C of proved
schedules that reorder reductions. ``TILECERT_FULL=1`` runs the 1000-trial campaigns.
"""
import os

import numpy as np
import pytest

import tilecert as tc
from examples import EXAMPLES
from tilecert import bf16, f16, f32, f64, i32
from tilecert.backends.oracle import Mismatch, draw_inputs, edge_values, oracle_for, random_array
from tilecert.semantics.dtypes import round_bf16

FULL = os.environ.get("TILECERT_FULL") == "1"
LEGAL_TRIALS = 1000 if FULL else 25


@tc.kernel
def gemm_bf16(A: tc.Tensor[bf16, "M", "K"], B: tc.Tensor[bf16, "K", "N"], C: tc.Tensor[bf16, "M", "N"],
              b: int = 16):
    M, K = A.shape
    N = B.shape[1]
    for nest in tc.parallel(tc.cdiv(M, b), tc.cdiv(N, b)):
        a = A.tile((nest.index(0) * b, 0), (b, K)).load()
        bb = B.tile((0, nest.index(1) * b), (K, b)).load()
        C.tile((nest.index(0) * b, nest.index(1) * b), (b, b)).store(tc.mma(a, bb, tc.zeros(bf16, (b, b))))


@tc.kernel
def gemm_bf16_dropping(A: tc.Tensor[bf16, "M", "K"], B: tc.Tensor[bf16, "K", "N"], C: tc.Tensor[bf16, "M", "N"],
                       b: int = 16):
    """``gemm_bf16`` that skips the K terms k = 7, 15, 23, ... (one of every eight)."""
    M, K = A.shape
    N = B.shape[1]
    for nest in tc.parallel(tc.cdiv(M, b), tc.cdiv(N, b)):
        a = A.tile((nest.index(0) * b, 0), (b, K)).load()
        k = tc.iota(i32, (b, K), axis=1, dims=a.dims)
        a = tc.where(k % 8 == 7, tc.zeros(bf16, (b, K), dims=a.dims), a)
        bb = B.tile((0, nest.index(1) * b), (K, b)).load()
        C.tile((nest.index(0) * b, nest.index(1) * b), (b, b)).store(tc.mma(a, bb, tc.zeros(bf16, (b, b))))


@tc.kernel
def exp_f32(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"], b: int = 64):
    for p in tc.parallel(tc.cdiv(X.shape[0], b)):
        Y.tile((p.index() * b,), (b,)).store(tc.exp(X.tile((p.index() * b,), (b,)).load()))


@tc.kernel
def mul_i32(X: tc.Tensor[i32, "N"], Y: tc.Tensor[i32, "N"], Z: tc.Tensor[i32, "N"], b: int = 8):
    for p in tc.parallel(tc.cdiv(X.shape[0], b)):
        x = X.tile((p.index() * b,), (b,)).load()
        Z.tile((p.index() * b,), (b,)).store(x * Y.tile((p.index() * b,), (b,)).load())


@tc.kernel
def max_f32(X: tc.Tensor[f32, "M", "N"], Y: tc.Tensor[f32, "M", "N"], E: tc.Tensor[f32, "M", "N"],
            R: tc.Tensor[f32, "M"], bm: int = 4, bn: int = 16):
    """An elementwise maximum and a row max reduction (tree policy)."""
    M, N = X.shape
    for p in tc.parallel(tc.cdiv(M, bm)):
        x = X.tile((p.index() * bm, 0), (bm, bn)).load(fallback=float("-inf"))
        y = Y.tile((p.index() * bm, 0), (bm, bn)).load(fallback=float("-inf"))
        E.tile((p.index() * bm, 0), (bm, bn)).store(tc.maximum(x, y))
        R.tile((p.index() * bm,), (bm,)).store(tc.reduce(x, "N", "max"))


@tc.kernel
def mixed(X: tc.Tensor[f32, "M", "N"], H: tc.Tensor[f16, "M", "N"], S: tc.Tensor[f64, "M"],
          Q: tc.Tensor[f32, "M", "N"], bm: int = 2, bn: int = 16):
    """Non-linear ops on a reassociated reduction: division by it, a select on its sign, a sqrt."""
    M, N = X.shape
    for p in tc.parallel(tc.cdiv(M, bm)):
        x = X.tile((p.index() * bm, 0), (bm, bn)).load()
        h = H.tile((p.index() * bm, 0), (bm, bn)).load()
        s = tc.reduce(tc.cast(x, f64) * tc.cast(h, f64), "N", "add")
        S.tile((p.index() * bm,), (bm,)).store(tc.sqrt(abs(s)) + tc.where(s > 0.0, s, -s / 3.0))
        total = tc.reduce(x, "N", "add")
        Q.tile((p.index() * bm, 0), (bm, bn)).store(tc.tanh(x / (abs(total) + 1.0)) + tc.log(abs(x) + 1.0))


def spec_and_oracle(kernel, sizes, seed, edge=False, **config):
    """The specification's outputs and the oracle of one trial (built on the scheduled program)."""
    s = tc.schedule(kernel, **sizes, **config)
    arrays = draw_inputs(np.random.default_rng(seed), s.program, sizes, edge)
    return arrays, tc.run(kernel, **arrays, **config), oracle_for(s.program, sizes, arrays)


def check_caught(oracle, name, expected, got):
    bad = oracle.compare(name, expected, got)
    assert isinstance(bad, Mismatch), f"{name}: the mutant passed"
    return bad


# ----------------------------------------------------------------------------- mutants
GEMM = {"M": 64, "N": 64, "K": 64}


@pytest.mark.parametrize("seed", range(5))
def test_bf16_gemm_mutants_are_caught(seed):
    arrays, spec, oracle = spec_and_oracle(gemm_bf16, GEMM, seed)
    c = spec["C"]
    assert oracle.counts("C") == {"bitwise": 0, "bounded": 64 * 64, "unbounded": 0}
    for got in (np.zeros_like(c), -c, round_bf16(c / 2)):
        check_caught(oracle, "C", c, got)
    dropped = tc.run(gemm_bf16_dropping, **arrays)["C"]
    check_caught(oracle, "C", c, dropped)
    assert oracle.compare("C", c, c) is None


def test_f32_exp_wrong_by_half_on_half_the_elements_is_caught():
    for seed in range(3):
        _, spec, oracle = spec_and_oracle(exp_f32, {"N": 4096}, seed)
        y = spec["Y"]
        got = y.copy()
        got[::2] *= np.float32(1.5)
        assert check_caught(oracle, "Y", y, got).index == (0,)
        # a 1-ulp difference (another libm) is admitted: exp is bounded, not bitwise
        assert oracle.compare("Y", y, np.nextafter(y, np.float32(np.inf))) is None
        assert oracle.counts("Y")["bitwise"] == 0


def test_a_saturating_i32_multiply_is_caught_on_edge_trials():
    differed = 0
    for seed in range(6):
        arrays, spec, oracle = spec_and_oracle(mul_i32, {"N": 64}, seed, edge=True)
        wide = arrays["X"].astype(np.int64) * arrays["Y"].astype(np.int64)
        saturated = np.clip(wide, -2**31, 2**31 - 1).astype(np.int32)
        differs = not np.array_equal(saturated, spec["Z"])
        differed += differs
        assert (oracle.compare("Z", spec["Z"], saturated) is not None) == differs  # integers: bitwise
    assert differed


def test_a_nan_dropping_max_is_caught_elementwise_and_in_reductions():
    caught = {"E": 0, "R": 0}
    for seed in range(6):
        arrays, spec, oracle = spec_and_oracle(max_f32, {"M": 8, "N": 16}, seed, edge=True)
        x, y = arrays["X"], arrays["Y"]
        for name, got in (("E", np.fmax(x, y)), ("R", np.fmax.reduce(x, axis=1))):
            if np.isnan(spec[name]).any():
                caught[name] += check_caught(oracle, name, spec[name], got) is not None
        assert oracle.compare("E", spec["E"], np.maximum(x, y)) is None
    assert caught["E"] and caught["R"]


def test_edge_values_cover_each_dtype():
    for name in ("f16", "bf16", "f32", "f64"):
        v = edge_values(name)
        assert np.isnan(v).any() and np.isposinf(v).any() and np.isneginf(v).any()
        assert (np.signbit(v) & (v == 0)).any() and ((v != 0) & (np.abs(v) < np.finfo(np.float16).tiny)).any()
        if name == "bf16":
            assert np.array_equal(round_bf16(v), v, equal_nan=True)
    ints = edge_values("i32")
    assert {-2**31, 2**31 - 1, 0} <= set(ints.tolist())
    rng = np.random.default_rng(0)
    a = random_array(rng, "f32", (40,), edge=True)
    assert (~np.isfinite(a) | (np.abs(a) > 10) | (a == 0) | (np.abs(a) < 1e-30)).any()
    assert np.array_equal(random_array(np.random.default_rng(3), "i32", (9,)),
                          random_array(np.random.default_rng(3), "i32", (9,)))


def test_specials_bitwise_where_exact_and_by_class_where_bounded():
    _, spec, oracle = spec_and_oracle(max_f32, {"M": 4, "N": 16}, 0)
    e = spec["E"]
    assert oracle.counts("E")["bitwise"] == e.size  # elementwise: bitwise
    nan = e.copy()
    nan[0, 0] = np.nan
    assert oracle.compare("E", nan, np.where(np.isnan(nan), np.float32(-np.nan), nan)) is None  # NaN matches NaN
    z = np.zeros_like(e)
    assert check_caught(oracle, "E", z, -z).index == (0, 0)  # signed zeros where bitwise applies
    r = spec["R"]  # a tree max reduction: bounded, and specials by class
    assert oracle.counts("R")["bounded"] == r.size
    inf = r.copy()
    inf[1] = np.inf
    assert oracle.compare("R", inf, inf.copy()) is None
    assert check_caught(oracle, "R", inf, np.where(np.isinf(inf), -inf, inf)).index == (1,)
    assert check_caught(oracle, "R", inf, np.where(np.isinf(inf), np.float32(3e38), inf)).index == (1,)


def test_bounds_cover_an_independent_float64_reference():
    for seed in range(3):
        arrays, spec, oracle = spec_and_oracle(gemm_bf16, {"M": 32, "N": 32, "K": 64}, seed)
        exact = arrays["A"].astype(np.float64) @ arrays["B"].astype(np.float64)
        assert np.all(np.abs(spec["C"] - exact) <= oracle.bounds["C"])
        arrays, spec, oracle = spec_and_oracle(mixed, {"M": 6, "N": 16}, seed)
        x, h = arrays["X"].astype(np.float64), arrays["H"].astype(np.float64)
        s = (x * h).sum(axis=1)
        ref = np.sqrt(np.abs(s)) + np.where(s > 0, s, -s / 3)
        assert np.all(np.abs(spec["S"] - ref) <= oracle.bounds["S"])
        # Q's elementwise roundings are the same in every evaluation, so its bound is checked
        # against another evaluation order in f32 (numpy's pairwise row sum), not the exact value
        x32 = arrays["X"]
        one = np.float32(1)
        q = np.tanh(x32 / (np.abs(x32[:, ::-1].sum(axis=1, keepdims=True)) + one)) + np.log(np.abs(x32) + one)
        assert oracle.compare("Q", spec["Q"], q) is None


# ----------------------------------------------------------------------------- legal reorderings
LEGAL = [(gemm_bf16, {"M": 16, "N": 16, "K": 40}, "C"), (EXAMPLES["softmax"].kernel, {"M": 5, "N": 13}, "Y"),
         (EXAMPLES["layernorm"].kernel, {"M": 3, "N": 20}, None), (mixed, {"M": 4, "N": 16}, None),
         (max_f32, {"M": 5, "N": 16}, None), (EXAMPLES["rowreduce"].kernel, {"M": 5, "N": 19}, None)]


@pytest.mark.parametrize("kernel,sizes,_", LEGAL, ids=[k.fn.__name__ for k, _, _ in LEGAL])
def test_legal_reorderings_pass(kernel, sizes, _):
    """The spec under adversarial trees and reverse / shuffled orders, and the scheduled loop form
    (its own order), against the canonical spec; every third trial draws edge values."""
    s = tc.schedule(kernel, **sizes)
    seen = {"bounded": 0}
    for t in range(LEGAL_TRIALS):
        arrays = draw_inputs(np.random.default_rng([7, t]), s.program, sizes, edge=t % 3 == 2)
        try:
            spec = tc.run(kernel, **arrays)
        except tc.ExecutionError:
            continue
        oracle = oracle_for(s.program, sizes, arrays)
        order = ("canonical", "reverse", "shuffle")[t % 3]
        others = (tc.run(kernel, reduce_mode="adversarial", order=order, seed=t, **arrays),
                  s.run(checked=False, **arrays))
        for other in others:
            for name, want in spec.items():
                bad = oracle.compare(name, want, other[name])
                assert bad is None, f"trial {t}: {bad}"
        for name in spec:
            seen["bounded"] += oracle.counts(name)["bounded"]
    assert seen["bounded"]  # the reorderings were compared under finite bounds, not waved through


def test_compiled_c_of_a_proved_reduction_reordering_matches_the_spec():
    sizes = {"M": 32, "N": 32, "K": 48}
    s = tc.schedule(gemm_bf16, **sizes)
    outer, inner = s.split("full.mma.K", 8)
    s.swap(outer, inner)  # each cell now sums k = 0, 8, 16, ..., 1, 9, ...: a reassociation
    assert s.check().ok
    compiled = tc.compile(s)
    for t in range(6):
        arrays = draw_inputs(np.random.default_rng([9, t]), s.program, sizes, edge=t % 3 == 2)
        spec = tc.run(gemm_bf16, reduce_mode="adversarial", seed=t, **arrays)
        got = compiled(**{k: v.copy() for k, v in arrays.items()})
        oracle = oracle_for(s.program, sizes, arrays)
        assert oracle.compare("C", spec["C"], got["C"]) is None
        if t % 3 != 2:
            check_caught(oracle, "C", spec["C"], -got["C"])


@tc.kernel
def fold_mma(A: tc.Tensor[f32, "M", "K"], B: tc.Tensor[f32, "K", "N"], C: tc.Tensor[f32, "M", "N"],
             bm: int = 4, bn: int = 4, bk: int = 8):
    """A strict fold over K panels whose update is an mma (each panel's contraction is a tree)."""
    for nest in tc.parallel(tc.cdiv(A.shape[0], bm), tc.cdiv(B.shape[1], bn)):
        acc = tc.zeros(f32, (bm, bn))
        for r in nest.reduce(tc.cdiv(A.shape[1], bk), policy="fold_left"):
            a = A.tile((nest.index(0) * bm, r.index() * bk), (bm, bk)).load()
            b = B.tile((r.index() * bk, nest.index(1) * bn), (bk, bn)).load()
            acc = tc.mma(a, b, acc)
        C.tile((nest.index(0) * bm, nest.index(1) * bn), (bm, bn)).store(acc)


def test_an_mma_inside_a_fold_is_bounded_not_bitwise():
    sizes = {"M": 8, "N": 8, "K": 64}
    differs = 0
    for seed in range(5):
        arrays, spec, oracle = spec_and_oracle(fold_mma, sizes, seed)
        loop_form = tc.schedule(fold_mma, **sizes).run(checked=False, **arrays)["C"]
        differs += not np.array_equal(loop_form, spec["C"])
        assert oracle.counts("C")["bitwise"] == 0 and oracle.compare("C", spec["C"], loop_form) is None
    assert differs  # the loop form's sequential contraction is another association than the spec's
