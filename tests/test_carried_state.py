"""Carried state: names rebound inside serial / pipeline / reduce loops are loop-carried.

The source rewrite (``semantics/rewrite.py``) turns each region loop into an explicit
carried-state region; these tests check the meaning against plain Python / numpy
references, including zero-trip loops, simultaneous updates, nesting, Python loops that
still unroll at capture, and kernels that close over local variables.
"""
import numpy as np
import pytest

import tilecert as tc
from tilecert import f32, i64

TRIPS = (0, 1, 2, 3, 5, 9)


def ops_of(block, kind):
    return [op for op in block.ops if isinstance(op, kind)]


def all_ops(prog, kind):
    return [op for op in tc.ir.walk(prog.body) if isinstance(op, kind)]


# ---------------------------------------------------------------------------- mma accumulator in a pipeline

@tc.kernel
def gemm_pipe(A: tc.Tensor[f32, "M", "K"], B: tc.Tensor[f32, "K", "N"], C: tc.Tensor[f32, "M", "N"],
              bm: int = 4, bn: int = 3, bk: int = 2):
    M, K = A.shape
    N = B.shape[1]
    for nest in tc.parallel(tc.cdiv(M, bm), tc.cdiv(N, bn)):
        m0 = nest.index(0) * bm
        n0 = nest.index(1) * bn
        acc = tc.zeros(f32, (bm, bn))
        for k in nest.pipeline(tc.cdiv(K, bk), window=2):
            k.stage("load")
            a = A.tile((m0, k.index() * bk), (bm, bk)).load()
            b = B.tile((k.index() * bk, n0), (bk, bn)).load()
            k.stage("compute")
            acc = tc.mma(a, b, acc)
        C.tile((m0, n0), (bm, bn)).store(acc)


def test_mma_accumulator_is_carried_by_the_pipeline():
    prog = tc.capture(gemm_pipe)
    (pipe,) = all_ops(prog, tc.ir.Pipeline)
    # one carried value: the accumulator, initialised by the zeros and yielded by the mma
    assert len(pipe.inits) == 1 and len(pipe.outs) == 1 and len(pipe.body.args) == 1
    (mma,) = ops_of(pipe.body, tc.ir.Mma)
    assert mma.c == pipe.body.args[0].id
    assert pipe.body.yields == (mma.out.id,)
    (par,) = all_ops(prog, tc.ir.Parallel)
    (full,) = ops_of(par.body, tc.ir.Full)
    assert pipe.inits == (full.out.id,)
    (store,) = ops_of(par.body, tc.ir.ViewStore)
    assert store.value == pipe.outs[0].id  # the store reads the loop's result, not the body's value


@pytest.mark.parametrize("m,k,n", [(5, 7, 4), (4, 1, 3), (1, 0, 2), (8, 6, 6)])
def test_mma_accumulator_values(m, k, n):
    rng = np.random.default_rng(m * 100 + k * 10 + n)
    A = rng.standard_normal((m, k)).astype(np.float32)
    B = rng.standard_normal((k, n)).astype(np.float32)
    C = np.full((m, n), 99.0, np.float32)
    out = tc.run(gemm_pipe, A=A, B=B, C=C)["C"]
    np.testing.assert_allclose(out, A.astype(np.float64) @ B.astype(np.float64), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------- s = s - x

@tc.kernel
def subtract_rows(X: tc.Tensor[f32, "R", "F"], O: tc.Tensor[f32, "one", "F"], start: float = 10.0):
    R, F = X.shape
    for nest in tc.parallel(1):
        s = tc.full(f32, (1, F), start, dims=("R", "F"))
        for r in nest.serial(R):
            x = X.tile((r.index(), 0), (1, F)).load()
            s = s - x
        O.tile((0, 0), (1, F)).store(s)


@tc.kernel
def subtract_rows_augmented(X: tc.Tensor[f32, "R", "F"], O: tc.Tensor[f32, "one", "F"]):
    R, F = X.shape
    for nest in tc.parallel(1):
        s = tc.full(f32, (1, F), 10.0, dims=("R", "F"))
        for r in nest.serial(R):
            s -= X.tile((r.index(), 0), (1, F)).load()
        O.tile((0, 0), (1, F)).store(s)


@pytest.mark.parametrize("kernel", [subtract_rows, subtract_rows_augmented])
@pytest.mark.parametrize("rows", TRIPS)
def test_subtract_carried(kernel, rows):
    X = (np.arange(rows * 3, dtype=np.float32).reshape(rows, 3) + 1.0) / 4.0
    out = tc.run(kernel, X=X, O=np.zeros((1, 3), np.float32))["O"]
    ref = np.full(3, 10.0, np.float32)
    for row in X:
        ref = ref - row
    np.testing.assert_array_equal(out[0], ref)


def test_subtract_config_start_value():
    X = np.ones((2, 3), np.float32)
    out = tc.run(subtract_rows, X=X, O=np.zeros((1, 3), np.float32), start=-1.0)["O"]
    np.testing.assert_array_equal(out, [[-3.0, -3.0, -3.0]])


# ---------------------------------------------------------------------------- simultaneous updates

@tc.kernel
def swap_static(O: tc.Tensor[i64, "two"], n: int = 0):
    for nest in tc.parallel(1):
        a = tc.full(i64, (1,), 7)
        b = tc.full(i64, (1,), 11)
        for s in nest.serial(n):
            a, b = b, a
        O.tile((0,), (1,)).store(a)
        O.tile((1,), (1,)).store(b)


@tc.kernel
def fib_static(O: tc.Tensor[i64, "two"], n: int = 0):
    for nest in tc.parallel(1):
        a = tc.full(i64, (1,), 0)
        b = tc.full(i64, (1,), 1)
        for s in nest.serial(n):
            a, b = b, a + b
        O.tile((0,), (1,)).store(a)
        O.tile((1,), (1,)).store(b)


@tc.kernel
def fib_symbolic(T: tc.Tensor[i64, "n"], O: tc.Tensor[i64, "two"]):
    n = T.shape[0]  # the trip count is a size: one capture serves every n
    for nest in tc.parallel(1):
        a = tc.full(i64, (1,), 0)
        b = tc.full(i64, (1,), 1)
        for s in nest.serial(n):
            a, b = b, a + b
        O.tile((0,), (1,)).store(a)
        O.tile((1,), (1,)).store(b)


def py_swap(n):
    a, b = 7, 11
    for _ in range(n):
        a, b = b, a
    return [a, b]


def py_fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return [a, b]


@pytest.mark.parametrize("n", TRIPS)
def test_swap(n):
    out = tc.run(swap_static, O=np.zeros(2, np.int64), n=n)["O"]
    assert out.tolist() == py_swap(n)


@pytest.mark.parametrize("n", TRIPS)
def test_fibonacci(n):
    out = tc.run(fib_static, O=np.zeros(2, np.int64), n=n)["O"]
    assert out.tolist() == py_fib(n)


def test_fibonacci_symbolic_trip_count():
    prog = tc.capture(fib_symbolic)
    for n in TRIPS:
        out = tc.run(prog, T=np.zeros(n, np.int64), O=np.zeros(2, np.int64))["O"]
        assert out.tolist() == py_fib(n), n
    assert tc.capture(fib_symbolic) is prog  # captured once


def test_swap_ir_yields_the_permuted_args():
    prog = tc.capture(swap_static, n=3)
    (loop,) = all_ops(prog, tc.ir.Serial)
    a_arg, b_arg = loop.body.args
    # the body computes nothing: it yields its own arguments, swapped
    assert loop.body.ops == ()
    assert loop.body.yields == (b_arg.id, a_arg.id)


# ---------------------------------------------------------------------------- a pipeline with two carried tiles

@tc.kernel
def sum_and_max(X: tc.Tensor[f32, "T", "F"], O: tc.Tensor[f32, "two", "F"]):
    T, F = X.shape
    for nest in tc.parallel(1):
        s = tc.full(f32, (1, F), 1.5, dims=("T", "F"))
        m = tc.full(f32, (1, F), -7.0, dims=("T", "F"))
        for k in nest.pipeline(T, window=3, interval=1):
            k.stage("load")
            row = X.tile((k.index(), 0), (1, F)).load()
            k.stage("compute")
            s = s + row * 0.5
            m = tc.maximum(m, row)
        O.tile((0, 0), (1, F)).store(s)
        O.tile((1, 0), (1, F)).store(m)


def sum_and_max_ref(X):
    s = np.full(X.shape[1], 1.5, np.float32)
    m = np.full(X.shape[1], -7.0, np.float32)
    for row in X:
        s = (s + row * np.float32(0.5)).astype(np.float32)
        m = np.maximum(m, row)
    return np.stack([s, m])


@pytest.mark.parametrize("trips", TRIPS)
def test_pipeline_two_carried_tiles(trips):
    rng = np.random.default_rng(trips)
    X = (rng.standard_normal((trips, 5)) * 4).astype(np.float32)
    out = tc.run(sum_and_max, X=X, O=np.zeros((2, 5), np.float32))["O"]
    np.testing.assert_allclose(out, sum_and_max_ref(X), rtol=1e-6, atol=1e-6)
    if trips == 0:  # zero trips leave the initial values
        np.testing.assert_array_equal(out, [[1.5] * 5, [-7.0] * 5])


def test_pipeline_two_carried_tiles_ir():
    (pipe,) = all_ops(tc.capture(sum_and_max), tc.ir.Pipeline)
    assert len(pipe.inits) == len(pipe.outs) == len(pipe.body.args) == 2
    assert pipe.window == 3 and pipe.interval == 1
    stages = [op.name for op in ops_of(pipe.body, tc.ir.Stage)]
    assert stages == ["load", "compute"]


# ---------------------------------------------------------------------------- nested loops

@tc.kernel
def nested_both_levels(X: tc.Tensor[f32, "I", "J"], O: tc.Tensor[f32, "one"]):
    I, J = X.shape
    for nest in tc.parallel(1):
        acc = tc.full(f32, (1,), 1.0)
        for i in nest.serial(I):
            acc = acc * 0.5
            for j in i.serial(J):
                acc = acc + X.at(i.index(), j.index()).load() * 2.0
        O.tile((0,), (1,)).store(acc)


def nested_both_ref(X):
    acc = np.float32(1.0)
    for i in range(X.shape[0]):
        acc = np.float32(acc * np.float32(0.5))
        for j in range(X.shape[1]):
            acc = np.float32(acc + X[i, j] * np.float32(2.0))
    return acc


@tc.kernel
def nested_inner_only(X: tc.Tensor[f32, "I", "J"], O: tc.Tensor[f32, "one"]):
    I, J = X.shape
    for nest in tc.parallel(1):
        acc = tc.zeros(f32, (1,))
        for i in nest.serial(I):
            w = tc.full(f32, (1,), 3.0)
            for j in i.serial(J):
                acc = acc + X.at(i.index(), j.index()).load() * w
        O.tile((0,), (1,)).store(acc)


@tc.kernel
def nested_three_levels(X: tc.Tensor[f32, "I", "J"], O: tc.Tensor[f32, "one"], reps: int = 2):
    I, J = X.shape
    for nest in tc.parallel(1):
        acc = tc.zeros(f32, (1,))
        for r in nest.pipeline(reps):
            for i in r.serial(I):
                for j in i.reduce(J, policy="fold_left"):
                    acc = acc + X.at(i.index(), j.index()).load()
        O.tile((0,), (1,)).store(acc)


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (1, 1), (2, 3), (5, 2)])
def test_nested_serial_carries_through_both_levels(shape):
    X = (np.arange(np.prod(shape), dtype=np.float32).reshape(shape) - 2.0) / 8.0
    out = tc.run(nested_both_levels, X=X, O=np.zeros(1, np.float32))["O"]
    np.testing.assert_allclose(out[0], nested_both_ref(X), rtol=1e-6)


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 3), (4, 1)])
def test_value_updated_only_in_nested_loop(shape):
    X = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 1.0
    out = tc.run(nested_inner_only, X=X, O=np.zeros(1, np.float32))["O"]
    assert out[0] == pytest.approx(3.0 * X.sum())


def test_nested_loops_ir_carry_at_every_level():
    prog = tc.capture(nested_inner_only)
    outer, inner = all_ops(prog, tc.ir.Serial)
    # both loops carry acc; the outer body's yield is the inner loop's result
    assert len(outer.inits) == 1 and len(inner.inits) == 1
    assert inner.inits == (outer.body.args[0].id,)
    assert outer.body.yields == (inner.outs[0].id,)
    # w is not carried: it is defined in the outer body and only read in the inner one
    assert len(outer.body.args) == 1


@pytest.mark.parametrize("reps", [0, 1, 3])
def test_three_levels_mixed_region_kinds(reps):
    X = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = tc.run(nested_three_levels, X=X, O=np.zeros(1, np.float32), reps=reps)["O"]
    assert out[0] == reps * X.sum()
    loops = [op for op in tc.ir.walk(tc.capture(nested_three_levels, reps=reps).body)
             if isinstance(op, tc.ir.LOOP_TYPES)]
    assert [type(op).__name__ for op in loops] == ["Pipeline", "Serial", "Reduce"]
    assert all(len(op.inits) == 1 for op in loops)


# ---------------------------------------------------------------------------- Python loops unroll at capture

@tc.kernel
def python_unroll(X: tc.Tensor[f32, "N"]):
    for nest in tc.parallel(1):
        acc = tc.zeros(f32, (4,))
        for i in range(3):
            acc = acc + float(i + 1)
        X.tile((0,), (4,)).store(acc)


@tc.kernel
def python_unroll_in_loop(X: tc.Tensor[f32, "N"], O: tc.Tensor[f32, "four"]):
    N = X.shape[0]
    for nest in tc.parallel(1):
        acc = tc.zeros(f32, (4,), dims=("N",))  # the dim of X's tiles
        for s in nest.serial(tc.cdiv(N, 4)):
            for i in range(3):
                acc = acc + X.tile((s.index() * 4,), (4,)).load() * float(10 ** i)
        O.tile((0,), (4,)).store(acc)


def test_python_range_loop_unrolls():
    prog = tc.capture(python_unroll)
    (par,) = all_ops(prog, tc.ir.Parallel)
    adds = [op for op in par.body.ops if isinstance(op, tc.ir.Binary) and op.fn == "add"]
    assert len(adds) == 3  # three copies, no loop region
    assert not all_ops(prog, tc.ir.Serial)
    consts = sorted(op.value for op in ops_of(par.body, tc.ir.Full) if op.out.type.rank == 0)
    assert consts == [1.0, 2.0, 3.0]
    # the copies chain: each add reads the previous one
    assert adds[1].a == adds[0].out.id and adds[2].a == adds[1].out.id
    out = tc.run(python_unroll, X=np.zeros(4, np.float32))["X"]
    np.testing.assert_array_equal(out, [6.0] * 4)


def test_python_range_loop_unrolls_inside_a_region():
    prog = tc.capture(python_unroll_in_loop)
    (loop,) = all_ops(prog, tc.ir.Serial)
    assert len(ops_of(loop.body, tc.ir.ViewLoad)) == 3
    assert len([op for op in loop.body.ops if isinstance(op, tc.ir.Binary) and op.fn == "add"]) == 3
    assert len(loop.inits) == 1
    X = np.arange(8, dtype=np.float32)
    out = tc.run(python_unroll_in_loop, X=X, O=np.zeros(4, np.float32))["O"]
    np.testing.assert_allclose(out, 111.0 * (X[:4] + X[4:]))


# ---------------------------------------------------------------------------- kernels with closures

def test_kernel_defined_in_function_uses_closure_variables():
    scale = 3.0
    width = 4

    def helper(t):
        return t * scale

    @tc.kernel
    def k(X: tc.Tensor[f32, "N"], O: tc.Tensor[f32, "W"]):
        N = X.shape[0]
        for nest in tc.parallel(1):
            acc = tc.zeros(f32, (width,), dims=("N",))
            for s in nest.serial(tc.cdiv(N, width)):
                acc = helper(acc) + X.tile((s.index() * width,), (width,)).load()
            O.tile((0,), (width,)).store(acc)

    X = np.arange(12, dtype=np.float32)
    out = tc.run(k, X=X, O=np.zeros(4, np.float32))["O"]
    ref = np.zeros(4, np.float32)
    for c in range(3):
        ref = ref * 3.0 + X[c * 4:(c + 1) * 4]
    np.testing.assert_array_equal(out, ref)


def test_closure_variables_are_read_at_capture_time():
    factor = 2.0

    @tc.kernel
    def k(O: tc.Tensor[f32, "N"], n: int = 1):
        for nest in tc.parallel(1):
            acc = tc.full(f32, (2,), 1.0)
            for s in nest.serial(n):
                acc = acc * factor
            O.tile((0,), (2,)).store(acc)

    out = tc.run(k, O=np.zeros(2, np.float32), n=3)["O"]
    np.testing.assert_array_equal(out, [8.0, 8.0])
    factor = 10.0  # a later capture (other config) sees the closure's current value, like Python would
    out = tc.run(k, O=np.zeros(2, np.float32), n=2)["O"]
    np.testing.assert_array_equal(out, [100.0, 100.0])


def test_nested_kernel_factory_closures():
    def make(bias):
        @tc.kernel
        def k(X: tc.Tensor[f32, "N"]):
            N = X.shape[0]
            for nest in tc.parallel(1):
                acc = tc.full(f32, (3,), bias, dims=(X.dim(0),))
                for s in nest.serial(N // 3):
                    acc = acc + X.tile((s.index() * 3,), (3,)).load()
                X.tile((0,), (3,)).store(acc)
        return k

    k1, k2 = make(1.0), make(-5.0)
    X = np.ones(6, np.float32)
    np.testing.assert_array_equal(tc.run(k1, X=X)["X"][:3], [3.0] * 3)
    np.testing.assert_array_equal(tc.run(k2, X=X)["X"][:3], [-3.0] * 3)


def test_closure_captured_kernel_diagnostics_point_into_the_function():
    @tc.kernel
    def k(X: tc.Tensor[f32, "N"]):
        for nest in tc.parallel(1):
            acc = tc.zeros(f32, (2,))
            for s in nest.serial(2):
                acc = tc.zeros(f32, (3,))
    with pytest.raises(tc.CaptureError) as info:
        tc.capture(k)
    lines, start = __import__("inspect").getsourcelines(k.fn)
    offending = start + next(i for i, text in enumerate(lines) if "(3,)" in text)
    assert info.value.loc.file == __file__ and info.value.loc.line == offending
    assert info.value.hint
