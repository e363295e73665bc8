"""The tile interpreters: noninterference, bounds, snapshots, memories, dtypes,
reduction policies, instance orders and batched / per-instance agreement.

Every kernel here is run through ``run_all`` where it is legal: the fast interpreter
(``tc.run``) checked and unchecked under every instance order, and the reference
interpreter (``semantics.interp``) in canonical order, must give identical results.
"""

import numpy as np
import pytest

import tilecert as tc
from tilecert import bf16, bool_, f16, f32, f64, i8, i16, i32, i64, u8
from tilecert.semantics import interp as reference
from tilecert.semantics import interp_fast as interp_mod
from examples.gemm import gemm

ORDERS = (("canonical", 0), ("reverse", 0), ("shuffle", 0), ("shuffle", 1), ("shuffle", 7))


def run_all(k, **kwargs):
    """Run ``k`` checked and unchecked under every order, and on the reference interpreter
    (``semantics.interp``) in canonical order; all results must be identical."""
    results = []
    for checked in (True, False):
        for order, seed in ORDERS:
            out = tc.run(k, order=order, seed=seed, checked=checked, **kwargs)
            results.append(((checked, order, seed), out))
    args = dict(kwargs)
    program = tc.capture(k, **k.split_config(args))
    for checked in (True, False):
        results.append(((checked, "reference"), reference.interpret(program, checked=checked, **args)))
    ref = results[0][1]
    for key, out in results[1:]:
        assert out.keys() == ref.keys()
        for name in ref:
            assert out[name].dtype == ref[name].dtype
            np.testing.assert_array_equal(out[name], ref[name], err_msg=f"{name} differs under {key}")
    return ref


def conflict(k, **kwargs):
    """The ``NoninterferenceError`` message of ``tc.run(k)``; the reference interpreter must raise the same."""
    with pytest.raises(tc.NoninterferenceError) as fast:
        tc.run(k, **{n: v.copy() if isinstance(v, np.ndarray) else v for n, v in kwargs.items()})
    with pytest.raises(tc.NoninterferenceError) as ref:
        reference.interpret(tc.capture(k), **kwargs)
    assert ref.value.message == fast.value.message and fast.value.hint
    return str(fast.value)


def ints_as_f32(rng, shape, lo=-4, hi=5):
    """Small integers in float32: sums and products are exact, so every order agrees."""
    return rng.integers(lo, hi, shape).astype(np.float32)


# ----------------------------------------------------------------------------- noninterference


@tc.kernel
def racy_store(X: tc.Tensor[i32, "N"], Y: tc.Tensor[i32, "P"]):
    N = X.shape[0]
    for nest in tc.parallel(N):
        Y.at(0).store(X.at(nest.index()).load())


def test_racy_store_is_caught_in_checked_mode():
    X = np.arange(10, 18, dtype=np.int32)
    msg = conflict(racy_store, X=X, Y=np.zeros(1, np.int32))
    assert "instances (0,) and (1,)" in msg
    assert "Y[0]" in msg
    assert msg.count("store at") == 2 and "test_interp.py" in msg


@tc.kernel
def shift_few(X: tc.Tensor[f32, "N"]):
    for nest in tc.parallel(4):
        i = nest.index()
        X.at(i).store(X.at(i + 1).load() + 1)


def test_conflicts_in_a_large_tensor_touched_sparsely_are_caught():
    X = np.arange(4, dtype=np.int32)
    assert "Y[0]" in conflict(racy_store, X=X, Y=np.zeros(100_000, np.int32))
    assert "X[1]" in conflict(shift_few, X=np.arange(100_000, dtype=np.float32))


def test_racy_store_depends_on_the_order_when_unchecked():
    X = np.arange(10, 18, dtype=np.int32)
    Y = np.zeros(1, np.int32)
    canon = tc.run(racy_store, X=X, Y=Y, checked=False)["Y"]
    rev = tc.run(racy_store, X=X, Y=Y, checked=False, order="reverse")["Y"]
    assert canon[0] == 17 and rev[0] == 10
    assert canon[0] != rev[0]


@tc.kernel
def shift_left(X: tc.Tensor[f32, "N"]):
    N = X.shape[0]
    for nest in tc.parallel(N):
        i = nest.index()
        v = X.at(i + 1).load()
        X.at(i).store(v + 1)


def test_read_write_race_is_caught():
    msg = conflict(shift_left, X=np.arange(6, dtype=np.float32))
    assert "load at" in msg and "store at" in msg
    assert "X[1]" in msg and "(0,)" in msg and "(1,)" in msg


@tc.kernel
def shared_reads(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"]):
    N = X.shape[0]
    for nest in tc.parallel(N):
        i = nest.index()
        Y.at(i).store(X.at(i).load() + X.at(0).load())


def test_shared_reads_are_legal():
    X = np.arange(1, 9, dtype=np.float32)
    out = run_all(shared_reads, X=X, Y=np.zeros(8, np.float32))
    np.testing.assert_array_equal(out["Y"], X + X[0])


@tc.kernel
def nested_inner_race(Y: tc.Tensor[i32, "N"]):
    for outer in tc.parallel(2):
        for inner in outer.parallel(4):
            Y.at(outer.index()).store(tc.full(i32, (), 1) + inner.index())


@tc.kernel
def nested_outer_race(Y: tc.Tensor[i32, "N"]):
    for outer in tc.parallel(2):
        for inner in outer.parallel(4):
            Y.at(inner.index()).store(tc.full(i32, (), 1) + outer.index())


@tc.kernel
def nested_legal(X: tc.Tensor[i32, "N"], Y: tc.Tensor[i32, "N"]):
    for o in tc.parallel(4):
        for i in o.parallel(4):
            # transpose a 4x4 matrix: the origin mixes both levels' coordinates
            Y.at(o.index() * 4 + i.index()).store(X.at(i.index() * 4 + o.index()).load() * 10 + o.index())


def _regions(k, **config):
    return [op.region for op in tc.semantics.ir.walk(tc.capture(k, **config).body)
            if isinstance(op, tc.semantics.ir.Parallel)]


def test_nested_conflict_between_inner_instances():
    outer, inner = _regions(nested_inner_race)
    msg = conflict(nested_inner_race, Y=np.zeros(4, np.int32))
    assert f"parallel region r{inner}:" in msg and "Y[0]" in msg and "instances (0,) and (1,)" in msg


def test_nested_conflict_between_outer_instances():
    outer, inner = _regions(nested_outer_race)
    msg = conflict(nested_outer_race, Y=np.zeros(4, np.int32))
    assert f"parallel region r{outer}:" in msg and "instances (0,) and (1,)" in msg


def test_nested_legal_parallels_agree():
    X = np.arange(16, dtype=np.int32)
    out = run_all(nested_legal, X=X, Y=np.zeros(16, np.int32))
    expect = X.reshape(4, 4).T.reshape(-1) * 10 + np.repeat(np.arange(4), 4)
    np.testing.assert_array_equal(out["Y"], expect)


@tc.kernel
def serial_around_parallel(Y: tc.Tensor[f32, "N"]):
    N = Y.shape[0]
    for s in tc.serial(3):
        for p in s.parallel(N):
            cell = (p.index() + s.index()) % N  # each iteration touches every cell again
            Y.at(cell).store(Y.at(cell).load() + 1)


def test_serial_iterations_around_a_parallel_do_not_conflict():
    out = run_all(serial_around_parallel, Y=np.zeros(5, np.float32))
    np.testing.assert_array_equal(out["Y"], np.full(5, 3, np.float32))


@tc.kernel
def serial_inside_instance(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"]):
    N = X.shape[0]
    for p in tc.parallel(N):
        i = p.index()
        for s in p.serial(4):
            Y.at(i).store(Y.at(i).load() + X.at(i).load() * s.index())


def test_repeated_accesses_of_one_instance_are_not_conflicts():
    X = np.arange(6, dtype=np.float32)
    out = run_all(serial_inside_instance, X=X, Y=np.ones(6, np.float32))
    np.testing.assert_array_equal(out["Y"], 1 + 6 * X)


# ----------------------------------------------------------------------------- bounds


@tc.kernel
def load_zero_fill(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "P"]):
    for p in tc.parallel(1):
        Y.tile((0,), (3,)).store(X.tile((3,), (3,)).load())


@tc.kernel
def masked_store(X: tc.Tensor[f32, "N"]):
    for p in tc.parallel(1):
        X.tile((3,), (4,)).store(tc.full(f32, (4,), 7.0))


@tc.kernel
def load_fallback(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "P"]):
    for p in tc.parallel(1):
        Y.tile((0,), (4,)).store(X.tile((3,), (4,)).load(fallback=-1.0))


@tc.kernel
def negative_origins(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"], Z: tc.Tensor[f32, "P"]):
    for p in tc.parallel(1):
        Z.tile((0,), (4,)).store(X.tile((-2,), (4,)).load())
        Y.tile((-1,), (3,)).store(tc.iota(f32, (3,)) + 10)


@tc.kernel
def assume_load(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "P"], at: int = 3):
    for p in tc.parallel(1):
        Y.tile((0,), (3,)).store(X.tile((at,), (3,), bounds="assume").load())


@tc.kernel
def assume_store(X: tc.Tensor[f32, "N"]):
    N = X.shape[0]
    for p in tc.parallel(N):
        X.at(p.index() * 2, bounds="assume").store(tc.full(f32, (), 1.0))


def test_zero_fill_load():
    X = np.arange(1, 6, dtype=np.float32)
    out = run_all(load_zero_fill, X=X, Y=np.full(3, 9, np.float32))
    np.testing.assert_array_equal(out["Y"], [4, 5, 0])


def test_masked_store_skips_out_of_bounds_cells():
    out = run_all(masked_store, X=np.zeros(5, np.float32))
    np.testing.assert_array_equal(out["X"], [0, 0, 0, 7, 7])


def test_load_fallback():
    X = np.arange(1, 6, dtype=np.float32)
    out = run_all(load_fallback, X=X, Y=np.zeros(4, np.float32))
    np.testing.assert_array_equal(out["Y"], [4, 5, -1, -1])


def test_negative_origins():
    X = np.arange(1, 6, dtype=np.float32)
    out = run_all(negative_origins, X=X, Y=np.zeros(5, np.float32), Z=np.zeros(4, np.float32))
    np.testing.assert_array_equal(out["Z"], [0, 0, 1, 2])
    np.testing.assert_array_equal(out["Y"], [11, 12, 0, 0, 0])


def test_assume_in_bounds_is_fine_and_out_of_bounds_raises_with_coordinates():
    X = np.arange(1, 6, dtype=np.float32)
    out = run_all(assume_load, X=X, Y=np.zeros(3, np.float32), at=2)
    np.testing.assert_array_equal(out["Y"], [3, 4, 5])
    for checked in (True, False):
        with pytest.raises(tc.ExecutionError) as err:
            tc.run(assume_load, X=X, Y=np.zeros(3, np.float32), checked=checked)
        assert "(5,)" in str(err.value) and "out of bounds" in str(err.value)
        with pytest.raises(tc.ExecutionError) as err:
            tc.run(assume_store, X=np.zeros(5, np.float32), checked=checked)
        assert "(6,)" in str(err.value) and "store" in str(err.value)


def test_ragged_gemm_matches_numpy():
    rng = np.random.default_rng(1)
    A, B = ints_as_f32(rng, (10, 13)), ints_as_f32(rng, (13, 7))
    out = run_all(gemm, A=A, B=B, C=np.full((10, 7), 99, np.float32))
    np.testing.assert_array_equal(out["C"], A @ B)


# ----------------------------------------------------------------------------- snapshots and memories


@tc.kernel
def shift_by_one(X: tc.Tensor[f32, "N"]):
    x = X.tile((0,), (8,)).load()
    X.tile((1,), (8,)).store(x)


@tc.kernel
def shift_by_one_in_parallel(X: tc.Tensor[f32, "N"]):
    for p in tc.parallel(1):
        x = X.tile((0,), (8,)).load()
        X.tile((1,), (8,)).store(x)


def test_loads_are_snapshots():
    X = np.arange(9, dtype=np.float32)
    expect = np.array([0, 0, 1, 2, 3, 4, 5, 6, 7], np.float32)
    np.testing.assert_array_equal(run_all(shift_by_one, X=X)["X"], expect)
    np.testing.assert_array_equal(run_all(shift_by_one_in_parallel, X=X)["X"], expect)


@tc.kernel
def memory_per_instance(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"]):
    N = X.shape[0]
    for p in tc.parallel(tc.cdiv(N, 4)):
        m = tc.memory(f32, (4,))
        m.store(X.tile((p.index() * 4,), (4,)).load() * 2)
        Y.tile((p.index() * 4,), (4,)).store(m.load() + 1)


@tc.kernel
def memory_in_loop(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"]):
    N = X.shape[0]
    for p in tc.parallel(N):
        m = tc.memory(f32, ())
        m.store(X.at(p.index()).load())
        for s in p.serial(3):
            m.store(m.load() * 2 + s.index())
        Y.at(p.index()).store(m.load())


def test_memories_are_per_instance():
    X = np.arange(10, dtype=np.float32)
    out = run_all(memory_per_instance, X=X, Y=np.zeros(10, np.float32))
    np.testing.assert_array_equal(out["Y"], X * 2 + 1)
    out = run_all(memory_in_loop, X=X, Y=np.zeros(10, np.float32))
    np.testing.assert_array_equal(out["Y"], ((X * 2 + 0) * 2 + 1) * 2 + 2)


# ----------------------------------------------------------------------------- dtypes


def make_arith(dt):
    @tc.kernel
    def arith(X: tc.Tensor[dt, "N"], Y: tc.Tensor[dt, "N"], S: tc.Tensor[dt, "N"], P: tc.Tensor[dt, "N"],
              D: tc.Tensor[dt, "N"]):
        N = X.shape[0]
        for p in tc.parallel(tc.cdiv(N, 4)):
            box = (p.index() * 4,)
            x = X.tile(box, (4,)).load()
            y = Y.tile(box, (4,)).load()
            S.tile(box, (4,)).store(x + y)
            P.tile(box, (4,)).store(x * y)
            D.tile(box, (4,)).store(x - y)
    return arith


ARITH = {dt.name: make_arith(dt) for dt in (f16, bf16, f32, f64, i8, i16, i32, i64, u8)}


def _arith(dt, X, Y):
    z = np.zeros_like(X)
    return run_all(ARITH[dt.name], X=X, Y=Y, S=z, P=z, D=z)


@pytest.mark.parametrize("dt", [f16, f32, f64], ids=lambda d: d.name)
def test_float_arithmetic_matches_numpy(dt):
    rng = np.random.default_rng(2)
    X = rng.standard_normal(22).astype(dt.storage)
    Y = rng.standard_normal(22).astype(dt.storage)
    out = _arith(dt, X, Y)
    np.testing.assert_array_equal(out["S"], X + Y)
    np.testing.assert_array_equal(out["P"], X * Y)
    np.testing.assert_array_equal(out["D"], X - Y)


@pytest.mark.parametrize("dt", [i8, i16, i32, i64, u8], ids=lambda d: d.name)
def test_integer_arithmetic_wraps(dt):
    info = np.iinfo(dt.storage)
    rng = np.random.default_rng(3)
    X = rng.integers(info.min, info.max, 20, endpoint=True, dtype=dt.storage)
    Y = rng.integers(info.min, info.max, 20, endpoint=True, dtype=dt.storage)
    out = _arith(dt, X, Y)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out["S"], X + Y)
        np.testing.assert_array_equal(out["P"], X * Y)
        np.testing.assert_array_equal(out["D"], X - Y)


def test_small_integer_wraparound_examples():
    out = _arith(u8, np.array([200, 255, 0, 1], np.uint8), np.array([100, 1, 255, 255], np.uint8))
    np.testing.assert_array_equal(out["S"], [44, 0, 255, 0])
    np.testing.assert_array_equal(out["D"], [100, 254, 1, 2])
    out = _arith(i8, np.array([127, -128, 100, 64], np.int8), np.array([1, -1, 100, 2], np.int8))
    np.testing.assert_array_equal(out["S"], [-128, 127, -56, 66])
    np.testing.assert_array_equal(out["P"], [127, -128, 16, -128])


def bf16_ref(x):
    """Round float64 values to bfloat16 (nearest, ties to even) at the bit level."""
    b = np.asarray(x, np.float64).view(np.uint64)
    drop = np.uint64(45)  # float64 keeps 52 fraction bits, bfloat16 keeps 7
    lsb = (b >> drop) & np.uint64(1)
    r = (b + (np.uint64(1) << np.uint64(44)) - np.uint64(1) + lsb) >> drop << drop
    return r.view(np.float64).astype(np.float32)


def bf16_values(rng, n):
    return bf16_ref(rng.standard_normal(n) * np.exp2(rng.integers(-6, 6, n)))


def test_bf16_rounds_to_nearest_even_after_each_op():
    rng = np.random.default_rng(4)
    X, Y = bf16_values(rng, 4096), bf16_values(rng, 4096)
    # exact ties: 1 + k 2^-7 plus half an ulp, and 1.5 * (1 + 2^-7)
    k = np.arange(8)
    X[:8] = 1 + k * 2.0 ** -7
    Y[:8] = 2.0 ** -8
    X[8:16] = -(1 + k * 2.0 ** -7)
    Y[8:16] = -(2.0 ** -8)
    X[16], Y[16] = 1 + 2.0 ** -7, 1.5
    X[17], Y[17] = 1 + 3 * 2.0 ** -7, 1.5
    out = _arith(bf16, X, Y)
    x, y = X.astype(np.float64), Y.astype(np.float64)
    np.testing.assert_array_equal(out["S"], bf16_ref(x + y))
    np.testing.assert_array_equal(out["P"], bf16_ref(x * y))
    np.testing.assert_array_equal(out["D"], bf16_ref(x - y))
    assert out["S"][0] == 1.0 and out["S"][1] == 1 + 2 * 2.0 ** -7  # ties go to the even neighbour
    assert out["P"][16] == 1.5 + 2.0 ** -6
    sums = out["S"].astype(np.float64)
    ties = (x + y) != sums
    assert np.count_nonzero(bf16_ref(x + y) != (x + y).astype(np.float32)) > 100 and ties.any()


@tc.kernel
def bf16_chain(X: tc.Tensor[bf16, "N"], Y: tc.Tensor[bf16, "N"], Z: tc.Tensor[bf16, "N"]):
    N = X.shape[0]
    for p in tc.parallel(N):
        x = X.at(p.index()).load()
        y = Y.at(p.index()).load()
        Z.at(p.index()).store((x + y) * x - y / x)


def test_bf16_chain_rounds_every_step():
    rng = np.random.default_rng(5)
    X, Y = bf16_values(rng, 2000), bf16_values(rng, 2000)
    out = run_all(bf16_chain, X=X, Y=Y, Z=np.zeros(2000, np.float32))
    x, y = X.astype(np.float64), Y.astype(np.float64)
    s = bf16_ref(x + y).astype(np.float64)
    m = bf16_ref(s * x).astype(np.float64)
    q = bf16_ref(y / x).astype(np.float64)
    np.testing.assert_array_equal(out["Z"], bf16_ref(m - q))


def test_bf16_inputs_are_rounded():
    X = np.array([1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 3.0], np.float32)
    out = tc.run(ARITH["bf16"], X=X, Y=np.zeros(3, np.float32), S=np.zeros(3, np.float32),
                 P=np.zeros(3, np.float32), D=np.zeros(3, np.float32))
    np.testing.assert_array_equal(out["S"], [1.0, 1 + 2.0 ** -6, 3.0])


@tc.kernel
def casts(F: tc.Tensor[f32, "N"], D: tc.Tensor[f64, "N"], I: tc.Tensor[i32, "N"], U: tc.Tensor[u8, "N"],
          J: tc.Tensor[i8, "N"], B: tc.Tensor[bf16, "N"], G: tc.Tensor[f32, "N"]):
    N = F.shape[0]
    for p in tc.parallel(N):
        i = p.index()
        f = F.at(i).load()
        I.at(i).store(tc.cast(f, i32))
        U.at(i).store(tc.cast(f, u8))
        J.at(i).store(tc.cast(f, i8))
        B.at(i).store(tc.cast(D.at(i).load(), bf16))
        G.at(i).store(tc.cast(I.at(i).load(), f32))


def test_casts_truncate_and_wrap():
    F = np.array([3.7, -3.7, 300.5, -1.5, np.nan, 255.9], np.float32)
    # just above a bf16 tie, but float32 would round it onto the tie
    D = np.array([1 + 2.0 ** -8 + 2.0 ** -30, 1 + 2.0 ** -8, -(1 + 2.0 ** -8 + 2.0 ** -30), 2.5, 1e-3, 7.0])
    z = np.zeros(6)
    out = run_all(casts, F=F, D=D, I=z.astype(np.int32), U=z.astype(np.uint8), J=z.astype(np.int8),
                  B=z.astype(np.float32), G=z.astype(np.float32))
    np.testing.assert_array_equal(out["I"], [3, -3, 300, -1, 0, 255])
    np.testing.assert_array_equal(out["U"], [3, 253, 44, 255, 0, 255])
    np.testing.assert_array_equal(out["J"], [3, -3, 44, -1, 0, -1])
    np.testing.assert_array_equal(out["B"], bf16_ref(D))
    assert out["B"][0] == 1 + 2.0 ** -7 and out["B"][1] == 1.0


@tc.kernel
def logic(A: tc.Tensor[bool_, "N"], B: tc.Tensor[bool_, "N"], C: tc.Tensor[bool_, "N"], X: tc.Tensor[i32, "N"],
          O: tc.Tensor[bool_, "N"], L: tc.Tensor[bool_, "N"]):
    N = A.shape[0]
    for p in tc.parallel(N):
        i = p.index()
        a, b, c = A.at(i).load(), B.at(i).load(), C.at(i).load()
        O.at(i).store((a & b) | ~c)
        L.at(i).store((X.at(i).load() < 2) & ~a)


def test_bool_logic():
    rng = np.random.default_rng(6)
    A, B, C = (rng.integers(0, 2, 16).astype(bool) for _ in range(3))
    X = rng.integers(0, 4, 16).astype(np.int32)
    z = np.zeros(16, bool)
    out = run_all(logic, A=A, B=B, C=C, X=X, O=z, L=z)
    np.testing.assert_array_equal(out["O"], (A & B) | ~C)
    np.testing.assert_array_equal(out["L"], (X < 2) & ~A)


@tc.kernel
def int_division(X: tc.Tensor[i32, "N"], Y: tc.Tensor[i32, "N"], Q: tc.Tensor[i32, "N"], R: tc.Tensor[i32, "N"]):
    N = X.shape[0]
    for p in tc.parallel(N):
        x, y = X.at(p.index()).load(), Y.at(p.index()).load()
        Q.at(p.index()).store(x // y)
        R.at(p.index()).store(x % y)


def test_integer_division_floors_and_zero_divisors_raise():
    X = np.array([7, -7, 7, -7], np.int32)
    Y = np.array([2, 2, -2, -2], np.int32)
    z = np.zeros(4, np.int32)
    out = run_all(int_division, X=X, Y=Y, Q=z, R=z)
    np.testing.assert_array_equal(out["Q"], X // Y)
    np.testing.assert_array_equal(out["R"], X % Y)
    for checked in (True, False):
        with pytest.raises(tc.ExecutionError, match="by zero"):
            tc.run(int_division, X=X, Y=np.array([1, 0, 1, 1], np.int32), Q=z, R=z, checked=checked)
        # the compiled interpreter is reused after an error
        out = tc.run(int_division, X=X, Y=Y, Q=z, R=z, checked=checked)
        np.testing.assert_array_equal(out["Q"], X // Y)


# ----------------------------------------------------------------------------- reduction policies


@tc.kernel
def folds(X: tc.Tensor[f32, "N"], Out: tc.Tensor[f32, "P"]):
    N = X.shape[0]
    s = tc.full(f32, (), 0.5)
    for r in tc.reduction(N, policy="fold_left"):
        s = s - X.at(r.index()).load()
    Out.at(0).store(s)
    t = tc.full(f32, (), 0.5)
    for r in tc.reduction(N, policy="fold_right"):
        t = X.at(r.index()).load() - t
    Out.at(1).store(t)
    x = X.tile((0,), (N,)).load()
    Out.at(2).store(tc.reduce(x, 0, lambda a, b: a - b, policy="fold_left", init=0.5))
    Out.at(3).store(tc.reduce(x, 0, lambda a, b: a - b, policy="fold_right", init=0.5))
    u = tc.full(f32, (), 0.5)
    for r in tc.reduction(N, policy="fold_right"):
        u = u - X.at(r.index()).load()  # a recognised merge, replayed in reverse order
    Out.at(4).store(u)


def test_fold_left_and_fold_right_are_exact():
    rng = np.random.default_rng(7)
    X = (rng.standard_normal(37) * 1e3).astype(np.float32)
    out = run_all(folds, X=X, Out=np.zeros(5, np.float32))["Out"]
    f = np.float32
    left = f(0.5)
    for x in X:
        left = f(left - x)
    right = f(0.5)
    for x in X[::-1]:
        right = f(x - right)
    rev = f(0.5)
    for x in X[::-1]:
        rev = f(rev - x)
    assert out[0] == left and out[2] == left
    assert out[1] == right and out[3] == right
    assert out[4] == rev


@tc.kernel
def int_sums(X: tc.Tensor[i32, "N"], Out: tc.Tensor[i32, "P"]):
    N = X.shape[0]
    s = tc.full(i32, (), 3)
    for r in tc.reduction(N, policy="ordered_tree"):
        s = s + X.at(r.index()).load()
    Out.at(0).store(s)
    t = tc.full(i32, (), 3)
    for r in tc.reduction(N, policy="unordered_tree"):
        t = t + X.at(r.index()).load()
    Out.at(1).store(t)
    x = X.tile((0,), (N,)).load()
    Out.at(2).store(tc.reduce(x, 0, "add", policy="ordered_tree", init=3))
    Out.at(3).store(tc.reduce(x, 0, "add", policy="unordered_tree", init=3))
    m = tc.full(i32, (), 0)
    for r in tc.reduction(N, policy="unordered_tree"):
        m = m - X.at(r.index()).load()
    Out.at(4).store(m)


def test_integer_trees_are_exact_under_every_seed():
    rng = np.random.default_rng(8)
    X = rng.integers(-2 ** 31, 2 ** 31, 101, dtype=np.int64).astype(np.int32)  # the sums wrap
    with np.errstate(over="ignore"):
        total = np.int32(3) + X.sum(dtype=np.int32)
        neg = np.int32(0) - X.sum(dtype=np.int32)
    for seed in range(10):
        for checked in (True, False):
            out = tc.run(int_sums, X=X, Out=np.zeros(5, np.int32), reduce_mode="adversarial", seed=seed,
                         checked=checked)["Out"]
            np.testing.assert_array_equal(out, [total] * 4 + [neg])


def _mat2(v):
    return np.array([[v % 16, (v // 16) % 16], [(v // 256) % 16, (v // 4096) % 16]], np.int64)


def _enc(m):
    return int(m[0, 0] + 16 * m[0, 1] + 256 * m[1, 0] + 4096 * m[1, 1])


def mat2_product(a, b):
    """2x2 matrices with entries mod 16, packed four nibbles to an int: associative, not commutative."""
    a00, a01, a10, a11 = a % 16, (a // 16) % 16, (a // 256) % 16, (a // 4096) % 16
    b00, b01, b10, b11 = b % 16, (b // 16) % 16, (b // 256) % 16, (b // 4096) % 16
    c00 = (a00 * b00 + a01 * b10) % 16
    c01 = (a00 * b01 + a01 * b11) % 16
    c10 = (a10 * b00 + a11 * b10) % 16
    c11 = (a10 * b01 + a11 * b11) % 16
    return c00 + c01 * 16 + c10 * 256 + c11 * 4096


@tc.kernel
def mat_products(X: tc.Tensor[i32, "N"], Out: tc.Tensor[i32, "P"]):
    N = X.shape[0]
    x = X.tile((0,), (N,)).load()
    Out.at(0).store(tc.reduce(x, 0, mat2_product, policy="ordered_tree", init=4097))
    Out.at(1).store(tc.reduce(x, 0, mat2_product, policy="unordered_tree", init=4097))
    Out.at(2).store(tc.reduce(x, 0, mat2_product, policy="fold_left", init=4097))


def test_noncommutative_reducer_under_ordered_and_unordered_trees():
    rng = np.random.default_rng(9)
    X = rng.integers(0, 2 ** 16, 12).astype(np.int32)
    prod = np.eye(2, dtype=np.int64)
    for v in X:
        prod = (prod @ _mat2(int(v))) % 16
    expect = _enc(prod)
    canon = run_all(mat_products, X=X, Out=np.zeros(3, np.int32))["Out"]
    np.testing.assert_array_equal(canon, [expect] * 3)
    differs = False
    for seed in range(20):
        out = tc.run(mat_products, X=X, Out=np.zeros(3, np.int32), reduce_mode="adversarial", seed=seed)["Out"]
        assert out[0] == expect and out[2] == expect
        differs |= out[1] != expect
    assert differs


@tc.kernel
def no_merge(X: tc.Tensor[f32, "N"], Out: tc.Tensor[f32, "P"]):
    N = X.shape[0]
    s = tc.full(f32, (), 0)
    for r in tc.reduction(N, policy="ordered_tree"):
        s = s * 2 + X.at(r.index()).load()
    Out.at(0).store(s)


def test_tree_policy_without_a_known_merge_raises_with_a_hint():
    for checked in (True, False):
        with pytest.raises(tc.TilecertError) as err:
            tc.run(no_merge, X=np.ones(4, np.float32), Out=np.zeros(1, np.float32), checked=checked)
        assert "no known merge" in str(err.value) and "fold_left" in err.value.hint


@tc.kernel
def tree_reduce_tiles(X: tc.Tensor[f32, "M", "N"], Out: tc.Tensor[f32, "N"], bm: int = 4):
    M, N = X.shape
    acc = tc.zeros(f32, (N,), dims=("N",))
    hi = tc.full(f32, (N,), float("-inf"), dims=("N",))
    for r in tc.reduction(tc.cdiv(M, bm), policy="ordered_tree"):
        x = X.tile((r.index() * bm, 0), (bm, N)).load()
        acc = acc + tc.reduce(x, "M", "add")
        hi = tc.maximum(hi, tc.reduce(X.tile((r.index() * bm, 0), (bm, N)).load(fallback=float("-inf")), "M", "max"))
    Out.tile((0,), (N,)).store(acc + hi)


@tc.kernel
def tree_rows(X: tc.Tensor[f32, "M", "N"], Out: tc.Tensor[f32, "N"]):
    M, N = X.shape
    acc = tc.full(f32, (N,), 0.25, dims=("N",))
    for r in tc.reduction(M, policy="unordered_tree"):
        acc = acc + tc.reshape(X.tile((r.index(), 0), (1, N)).load(), (N,), dims=("N",))
    Out.tile((0,), (N,)).store(acc)


def test_tree_reduce_region_batched_and_per_iteration_agree():
    rng = np.random.default_rng(10)
    X = rng.standard_normal((37, 5)).astype(np.float32)
    out = run_all(tree_reduce_tiles, X=X, Out=np.zeros(5, np.float32))
    np.testing.assert_allclose(out["Out"], X.sum(0) + X.max(0), rtol=1e-5)
    for seed in range(4):  # no other random choices: both evaluations draw the same random tree
        a = tc.run(tree_rows, X=X, Out=np.zeros(5, np.float32), reduce_mode="adversarial", seed=seed)
        b = tc.run(tree_rows, X=X, Out=np.zeros(5, np.float32), reduce_mode="adversarial", seed=seed,
                   checked=False)
        np.testing.assert_array_equal(a["Out"], b["Out"])
        np.testing.assert_allclose(a["Out"], X.sum(0) + 0.25, rtol=1e-5)


# ----------------------------------------------------------------------------- orders and batching


def test_gemm_agrees_under_every_order_and_mode():
    rng = np.random.default_rng(11)
    A, B = ints_as_f32(rng, (40, 33)), ints_as_f32(rng, (33, 21))
    out = run_all(gemm, A=A, B=B, C=np.zeros((40, 21), np.float32), bm=8, bn=4, bk=5)
    np.testing.assert_array_equal(out["C"], A @ B)


def test_gemm_with_random_floats_is_close_in_both_modes():
    rng = np.random.default_rng(12)
    A = rng.standard_normal((64, 48)).astype(np.float32)
    B = rng.standard_normal((48, 40)).astype(np.float32)
    for checked in (True, False):
        out = tc.run(gemm, A=A, B=B, C=np.zeros((64, 40), np.float32), bm=16, bn=8, bk=16, checked=checked)
        np.testing.assert_allclose(out["C"], A @ B, rtol=1e-4, atol=1e-4)


@tc.kernel
def triangular(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"], Z: tc.Tensor[f32, "N"]):
    N = X.shape[0]
    for p in tc.parallel(N):
        i = p.index()
        acc = tc.zeros(f32, ())
        for j in p.serial(i + 1):  # the inner extent depends on the instance's own coordinate
            acc = acc + X.at(j.index()).load()
        Y.at(i).store(acc)
        Z.at(i).store(tc.reduce(X.tile((0,), (i + 1,)).load(), 0, "max"))


def test_triangular_parallel_falls_back_to_per_instance():
    X = np.arange(1, 9, dtype=np.float32) * np.array([1, -1] * 4, np.float32)
    out = run_all(triangular, X=X, Y=np.zeros(8, np.float32), Z=np.zeros(8, np.float32))
    np.testing.assert_array_equal(out["Y"], np.cumsum(X))
    np.testing.assert_array_equal(out["Z"], np.maximum.accumulate(X))
    p = tc.capture(triangular)
    it = interp_mod.Interpreter(p, {"N": 8}, {}, checked=False)
    region = next(op for op in tc.semantics.ir.walk(p.body) if isinstance(op, tc.semantics.ir.Parallel))
    assert not it.batchable(region)


@tc.kernel
def row_softmax(X: tc.Tensor[f32, "M", "N"], Y: tc.Tensor[f32, "M", "N"], bm: int = 3, bc: int = 8):
    M, N = X.shape
    for p in tc.parallel(tc.cdiv(M, bm)):
        m0 = p.index() * bm
        x = X.tile((m0, 0), (bm, bc)).load(fallback=float("-inf"))
        e = tc.exp(x - tc.reduce(x, "N", "max"))
        Y.tile((m0, 0), (bm, bc)).store(e / tc.reduce(e, "N", "add"))


def test_softmax_agrees_and_matches_numpy():
    rng = np.random.default_rng(13)
    X = rng.standard_normal((10, 7)).astype(np.float32)
    out = run_all(row_softmax, X=X, Y=np.zeros_like(X))["Y"]
    e = np.exp(X - X.max(1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(1, keepdims=True), rtol=1e-6)


# ----------------------------------------------------------------------------- loops evaluated at once


@tc.kernel
def folds_in_parallel(X: tc.Tensor[f32, "M", "N"], S: tc.Tensor[f32, "M"], H: tc.Tensor[f32, "M"],
                      G: tc.Tensor[f32, "M"], D: tc.Tensor[f32, "M"], K: tc.Tensor[f32, "M"]):
    M, N = X.shape
    for p in tc.parallel(M):
        i = p.index()
        s = tc.zeros(f32, ())
        h = tc.full(f32, (), float("-inf"))
        g = tc.full(f32, (), float("inf"))
        d = tc.full(f32, (), 1.0)
        k = tc.full(f32, (), 0.0)
        for j in p.serial(N):
            x = X.at(i, j.index()).load()
            s = s + x
            h = tc.maximum(x, h)  # the state second: operand order is kept (signed zeros)
            g = tc.minimum(g, x * 2)
            d = d - x
            k = k * 0.5 + x  # no merge: this loop runs iteration by iteration
        S.at(i).store(s)
        H.at(i).store(h)
        G.at(i).store(g)
        D.at(i).store(d)
        K.at(i).store(k)


@tc.kernel
def pure_folds(X: tc.Tensor[f32, "M", "N"], S: tc.Tensor[f32, "M"], H: tc.Tensor[f32, "M"],
               D: tc.Tensor[f32, "M"]):
    M, N = X.shape
    for p in tc.parallel(M):
        i = p.index()
        s = tc.zeros(f32, ())
        h = tc.full(f32, (), -0.0)
        d = tc.full(f32, (), 1.0)
        for j in p.pipeline(N, window=2):
            j.stage("load")
            x = X.at(i, j.index()).load()
            j.stage("compute")
            s = s + x
            h = tc.maximum(x, h)
            d = d - x
        S.at(i).store(s)
        H.at(i).store(h)
        D.at(i).store(d)


def test_loop_folds_agree_with_iteration_by_iteration():
    rng = np.random.default_rng(14)
    X = rng.standard_normal((5, 40)).astype(np.float32)
    X[:, ::7] = 0.0
    X[:, 1::9] = -0.0
    z = np.zeros(5, np.float32)
    out = run_all(folds_in_parallel, X=X, S=z, H=z, G=z, D=z, K=z)
    out2 = run_all(pure_folds, X=X, S=z, H=z, D=z)
    f = np.float32
    for i in range(5):
        s, d = f(0), f(1)
        for x in X[i]:
            s, d = f(s + x), f(d - x)
        assert out["S"][i] == s and out2["S"][i] == s
        assert out["D"][i] == d and out2["D"][i] == d
    np.testing.assert_array_equal(out["H"], X.max(1))
    np.testing.assert_array_equal(out["G"], (X * 2).min(1))


@tc.kernel
def bf16_fold(X: tc.Tensor[bf16, "N"], S: tc.Tensor[bf16, "P"]):
    N = X.shape[0]
    s = tc.zeros(bf16, ())
    for k in tc.serial(N):
        s = s + X.at(k.index()).load()
    S.at(0).store(s)


@tc.kernel
def i8_fold(X: tc.Tensor[i8, "M", "N"], S: tc.Tensor[i8, "M"], P: tc.Tensor[i8, "M"]):
    M, N = X.shape
    for p in tc.parallel(M):
        s = tc.zeros(i8, ())
        q = tc.full(i8, (), 1)
        for k in p.serial(N):
            x = X.at(p.index(), k.index()).load()
            s = s + x
            q = x * q
        S.at(p.index()).store(s)
        P.at(p.index()).store(q)


def test_narrow_type_folds_round_and_wrap_every_step():
    rng = np.random.default_rng(15)
    X = bf16_values(rng, 300)
    s = np.float64(0)
    for x in X:
        s = np.float64(bf16_ref(s + np.float64(x)))
    out = run_all(bf16_fold, X=X, S=np.zeros(1, np.float32))
    assert out["S"][0] == np.float32(s)
    Xi = rng.integers(-128, 128, (3, 50)).astype(np.int8)
    out = run_all(i8_fold, X=Xi, S=np.zeros(3, np.int8), P=np.zeros(3, np.int8))
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out["S"], Xi.sum(1, dtype=np.int8))
        np.testing.assert_array_equal(out["P"], Xi.prod(1, dtype=np.int8))


@tc.kernel
def fold_2d_domain(X: tc.Tensor[f32, "M", "N"], S: tc.Tensor[f32, "P"]):
    M, N = X.shape
    s = tc.zeros(f32, (2,))
    for k in tc.serial(M, N):
        s = s + tc.reshape(X.tile((k.index(0), k.index(1)), (1, 2)).load(fallback=0.5), (2,))
    S.tile((0,), (2,)).store(s)


def test_fold_over_a_2d_domain_runs_in_lexicographic_order():
    rng = np.random.default_rng(16)
    X = rng.standard_normal((4, 6)).astype(np.float32)
    out = run_all(fold_2d_domain, X=X, S=np.zeros(2, np.float32))
    pad = np.concatenate([X, np.full((4, 1), 0.5, np.float32)], axis=1)
    s = np.zeros(2, np.float32)
    for i in range(4):
        for j in range(6):
            s = s + pad[i, j:j + 2]
    np.testing.assert_array_equal(out["S"], s)


@tc.kernel
def loop_with_store(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"], S: tc.Tensor[f32, "P"]):
    N = X.shape[0]
    s = tc.zeros(f32, ())
    for k in tc.serial(N):
        x = X.at(k.index()).load()
        s = s + x
        Y.at(k.index()).store(s)  # a running prefix sum: the body stores, so no batching
    S.at(0).store(s)


def test_loop_with_stores_runs_in_order():
    X = np.arange(1, 11, dtype=np.float32)
    out = run_all(loop_with_store, X=X, Y=np.zeros(10, np.float32), S=np.zeros(1, np.float32))
    np.testing.assert_array_equal(out["Y"], np.cumsum(X))


def test_small_batch_budget_forces_chunks(monkeypatch):
    monkeypatch.setattr(interp_mod, "BATCH_BUDGET", 7)
    interp_mod._COMPILED.clear()
    rng = np.random.default_rng(17)
    X = rng.standard_normal((5, 40)).astype(np.float32)
    z = np.zeros(5, np.float32)
    run_all(folds_in_parallel, X=X, S=z, H=z, G=z, D=z, K=z)
    A, B = ints_as_f32(rng, (40, 33)), ints_as_f32(rng, (33, 21))
    out = run_all(gemm, A=A, B=B, C=np.zeros((40, 21), np.float32), bm=8, bn=4, bk=5)
    np.testing.assert_array_equal(out["C"], A @ B)
    run_all(tree_reduce_tiles, X=rng.standard_normal((37, 5)).astype(np.float32), Out=np.zeros(5, np.float32))
    interp_mod._COMPILED.clear()


def test_results_do_not_depend_on_earlier_runs():
    rng = np.random.default_rng(18)
    X = rng.standard_normal((6, 9)).astype(np.float32)
    first = tc.run(row_softmax, X=X, Y=np.zeros_like(X), checked=False)["Y"]
    tc.run(row_softmax, X=X * 3, Y=np.zeros_like(X), checked=False)
    again = tc.run(row_softmax, X=X, Y=np.zeros_like(X), checked=False)["Y"]
    np.testing.assert_array_equal(first, again)
    Y = np.zeros_like(X)
    tc.run(row_softmax, X=X, Y=Y, checked=False)
    assert not Y.any()  # run works on copies of the caller's arrays


def _loops(k, **config):
    return [op for op in tc.semantics.ir.walk(tc.capture(k, **config).body)
            if isinstance(op, (tc.semantics.ir.Serial, tc.semantics.ir.Pipeline, tc.semantics.ir.Reduce))]


def test_which_loops_are_evaluated_at_once():
    def folds_at_once(k, **config):
        p = tc.capture(k, **config)
        sizes = {name: 4 for name in p.sizes}
        it = interp_mod.Interpreter(p, sizes, {t.name: np.zeros((4,) * len(t.shape), np.float32)
                                              for t in p.tensors}, checked=False)
        return [it._fold(op) is not None for op in _loops(k, **config)]

    assert folds_at_once(pure_folds) == [True]
    assert folds_at_once(bf16_fold) == [True]
    assert folds_at_once(i8_fold) == [True]
    assert folds_at_once(gemm, bm=2, bn=2, bk=2) == [True]
    assert folds_at_once(fold_2d_domain) == [True]
    assert folds_at_once(folds_in_parallel) == [False]  # one update has no merge
    assert folds_at_once(loop_with_store) == [False]  # the body stores
    assert folds_at_once(memory_in_loop) == [False]  # the body stores to a memory
    assert folds_at_once(triangular) == [True]  # its extent depends on the parallel's coordinate only


@tc.kernel
def invariant_contributions(X: tc.Tensor[f32, "N"], S: tc.Tensor[f32, "P"]):
    N = X.shape[0]
    c = X.at(0).load()
    s = tc.full(f32, (), 0.1)
    for k in tc.serial(N):
        s = s + c  # the same contribution in every iteration
    t = tc.full(f32, (), 0.1)
    for k in tc.reduction(N, policy="ordered_tree"):
        t = t + X.at(1).load()
    u = tc.full(f32, (), 0.1)
    for k in tc.serial(3, N):
        u = u + X.at(k.index(1)).load()  # varies along the inner axis only
    S.at(0).store(s)
    S.at(1).store(t)
    S.at(2).store(u)


def test_loop_invariant_contributions_count_every_iteration():
    X = np.array([0.3, 0.7, 1.1, 2.9, 5.0], np.float32)
    out = run_all(invariant_contributions, X=X, S=np.zeros(3, np.float32))["S"]
    f = np.float32
    s = f(0.1)
    for _ in range(5):
        s = f(s + X[0])
    u = f(0.1)
    for _ in range(3):
        for x in X:
            u = f(u + x)
    assert out[0] == s and out[2] == u
    np.testing.assert_allclose(out[1], 0.1 + 5 * 0.7, rtol=1e-6)


@tc.kernel
def reduce_kinds(X: tc.Tensor[f32, "M", "N"], I: tc.Tensor[i8, "M", "N"], Mx: tc.Tensor[f32, "M"],
                 Mn: tc.Tensor[f32, "M"], Sf: tc.Tensor[f32, "M"], Si: tc.Tensor[i8, "M"], Pi: tc.Tensor[i8, "M"]):
    M, N = X.shape
    for p in tc.parallel(M):
        x = X.tile((p.index(), 0), (1, N)).load()
        i = I.tile((p.index(), 0), (1, N)).load()
        Mx.tile((p.index(),), (1,)).store(tc.reduce(x, "N", "max"))
        Mn.tile((p.index(),), (1,)).store(tc.reduce(x, "N", "min", init=0.0))
        Sf.tile((p.index(),), (1,)).store(tc.reduce(x, "N", "add"))
        Si.tile((p.index(),), (1,)).store(tc.reduce(i, "N", "add", init=5))
        Pi.tile((p.index(),), (1,)).store(tc.reduce(i, "N", "mul", policy="fold_left"))


def test_reduce_expressions_follow_the_canonical_tree_bit_for_bit():
    from tilecert.semantics.reduction import combine
    from tilecert.semantics.ufuncs import maximum as ieee_maximum, minimum as ieee_minimum
    rng = np.random.default_rng(19)
    X = rng.standard_normal((5, 9)).astype(np.float32)
    X[0] = np.array([0.0, -0.0] * 4 + [-0.0], np.float32)
    X[1, 3] = np.nan
    X[2, ::2] = -0.0
    X[3] = -np.abs(X[3])
    I = rng.integers(-128, 128, (5, 9)).astype(np.int8)
    z = np.zeros(5, np.float32)
    out = run_all(reduce_kinds, X=X, I=I, Mx=z, Mn=z, Sf=z, Si=z.astype(np.int8), Pi=z.astype(np.int8))

    def tree(seed, row, fn):
        return combine(np.asarray(seed, row.dtype), row, lambda a, b: fn(a, b).astype(row.dtype),
                       "unordered_tree", False, None)

    bits = lambda a: np.asarray(a, np.float32).view(np.uint32)  # noqa: E731
    for r in range(5):
        assert bits(out["Mx"][r]) == bits(tree(-np.inf, X[r], ieee_maximum)), r  # IEEE 754-2019 maximum
        assert bits(out["Mn"][r]) == bits(tree(0.0, X[r], ieee_minimum)), r
        assert bits(out["Sf"][r]) == bits(tree(0.0, X[r], np.add)) or np.isnan(out["Sf"][r])
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out["Si"], np.int8(5) + I.sum(1, dtype=np.int8))
        np.testing.assert_array_equal(out["Pi"], I.prod(1, dtype=np.int8))


@tc.kernel
def tiles_3d(X: tc.Tensor[f32, "A", "B", "C"], Y: tc.Tensor[f32, "A", "B", "C"]):
    A, B, C = X.shape
    for p in tc.parallel(tc.cdiv(A, 2), tc.cdiv(B, 3), tc.cdiv(C, 2)):
        o = (p.index(0) * 2, p.index(1) * 3 - 1, p.index(2) * 2)  # ragged, with negative origins
        t = X.tile(o, (2, 3, 2)).load(fallback=-5.0)
        Y.tile(o, (2, 3, 2)).store(t * 2 + tc.iota(f32, (2, 3, 2), axis=1, dims=("A", "B", "C")))


def test_rank3_ragged_tiles():
    X = np.random.default_rng(20).standard_normal((5, 7, 3)).astype(np.float32)
    out = run_all(tiles_3d, X=X, Y=np.zeros_like(X))["Y"]
    expect = np.zeros_like(X)
    for b0 in range(0, 5, 2):
        for b1 in range(-1, 7, 3):
            for b2 in range(0, 3, 2):
                for i in range(2):
                    for j in range(3):
                        for k in range(2):
                            x, y, z = b0 + i, b1 + j, b2 + k
                            if x < 5 and 0 <= y < 7 and z < 3:
                                expect[x, y, z] = X[x, y, z] * 2 + j
    np.testing.assert_array_equal(out, expect)


@tc.kernel
def nested_ragged(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"]):
    for o in tc.parallel(4):
        for p in o.parallel(4):
            t = X.tile((o.index() * 4,), (p.index() + 1,)).load()  # the inner region runs per instance
            Y.at(o.index() * 4 + p.index()).store(tc.reduce(t, 0, "add"))


def test_batched_outer_around_a_per_instance_inner_parallel():
    X = np.arange(16, dtype=np.float32) - 5
    out = run_all(nested_ragged, X=X, Y=np.zeros(16, np.float32))["Y"]
    np.testing.assert_array_equal(out, np.cumsum(X.reshape(4, 4), axis=1).reshape(-1))
    p = tc.capture(nested_ragged)
    it = interp_mod.Interpreter(p, {"N": 16}, {}, checked=False)
    outer, inner = [op for op in tc.semantics.ir.walk(p.body) if isinstance(op, tc.semantics.ir.Parallel)]
    assert it.batchable(outer) and not it.batchable(inner)


@tc.kernel
def shift_copy(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"]):
    N = X.shape[0]
    for p in tc.parallel(N):
        Y.at(p.index()).store(X.at(p.index() + 1).load())


def test_callers_arrays_are_never_written_even_when_passed_twice():
    A = np.arange(6, dtype=np.float32)
    before = A.copy()
    out = run_all(shift_copy, X=A, Y=A)
    np.testing.assert_array_equal(out["Y"], [1, 2, 3, 4, 5, 0])
    np.testing.assert_array_equal(A, before)
    assert not np.shares_memory(out["Y"], A)
