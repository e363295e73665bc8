"""The fast interpreter against the reference one (the definition).

In canonical order the two must agree bitwise on every written tensor, in checked and unchecked
mode, and raise the same error where a program has no meaning (the same message for a
noninterference conflict): over random kernels (``tc.strategies.kernels``), the examples with
random floats, the kernels of ``test_interp`` (its ``run_all``) and a few that exercise the
reference's rules one by one.
"""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tilecert as tc
from examples import EXAMPLES
from tilecert import bf16, f16, f32, i32, strategies
from tilecert.semantics import conflicts, interp, interp_fast


def outcome(fn, p, **kwargs):
    """``("ok", results)`` or ``(error type, message)``."""
    try:
        return "ok", fn(p, **kwargs)
    except tc.TilecertError as exc:
        return type(exc).__name__, exc.message


def assert_agree(k, *, reduce_mode="canonical", **kwargs):
    """Reference and fast, checked and unchecked, canonical order: identical bits or the same error.
    A program with a conflict has no meaning: unchecked, its results depend on how instances
    interleave, so only checked mode is compared then."""
    config = k.split_config(kwargs) if isinstance(k, tc.Kernel) else {}
    p = tc.capture(k, **config)
    racy = False
    for checked in (True, False):
        if racy:
            break
        ref = outcome(interp.interpret, p, checked=checked, reduce_mode=reduce_mode,
                      **{n: v.copy() if isinstance(v, np.ndarray) else v for n, v in kwargs.items()})
        fast = outcome(interp_fast.interpret, p, checked=checked, reduce_mode=reduce_mode,
                       **{n: v.copy() if isinstance(v, np.ndarray) else v for n, v in kwargs.items()})
        assert ref[0] == fast[0], (checked, ref, fast)
        if ref[0] != "ok":
            if ref[0] == "NoninterferenceError":
                assert ref[1] == fast[1]
                racy = True
            continue
        assert ref[1].keys() == fast[1].keys()
        for name, want in ref[1].items():
            got = fast[1][name]
            assert got.dtype == want.dtype and got.shape == want.shape
            assert want.tobytes() == got.tobytes(), f"{name} differs (checked={checked})"
    return ref


@given(strategies.kernels())
def test_random_kernels_fast_equals_reference(case):
    assert_agree(case.kernel, **case.inputs())


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_examples_with_random_floats_agree_bitwise(name):
    entry = EXAMPLES[name]
    inputs = entry.make_inputs(np.random.default_rng(3))
    assert_agree(entry.kernel, **inputs)


def test_gemm_mma_contraction_agrees_bitwise_on_ragged_sizes():
    from examples.gemm import gemm
    rng = np.random.default_rng(1)
    a = rng.standard_normal((37, 45)).astype(np.float32)
    b = rng.standard_normal((45, 29)).astype(np.float32)
    status, out = assert_agree(gemm, A=a, B=b, C=np.zeros((37, 29), np.float32), bm=16, bn=8, bk=16)
    assert status == "ok" and np.allclose(out["C"], a @ b, rtol=1e-4, atol=1e-4)


def test_contract_sums_in_contracted_index_order():
    """The reference's mma product is ((p0 + p1) + p2): checked against a scalar loop in float32."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 5)).astype(np.float32)
    b = rng.standard_normal((5, 4)).astype(np.float32)
    want = np.zeros((3, 4), np.float32)
    for i in range(3):
        for j in range(4):
            s = a[i, 0] * b[0, j]
            for k in range(1, 5):
                s = np.float32(s + a[i, k] * b[k, j])
            want[i, j] = s
    assert interp.contract("ik,kj->ij", a, b, np.dtype(np.float32)).tobytes() == want.tobytes()
    # transposed operand labels land in the output's order
    assert interp.contract("ki,kj->ij", a.T.copy(), b, np.dtype(np.float32)).tobytes() == want.tobytes()


@tc.kernel
def narrow(X: tc.Tensor[f16, "N"], Y: tc.Tensor[bf16, "N"], Z: tc.Tensor[f16, "P"]):
    N = X.shape[0]
    acc = tc.zeros(f16, ())
    for k in tc.serial(N):
        acc = acc + X.at(k.index()).load() * 3
    Z.at(0).store(acc)
    for nest in tc.parallel(tc.cdiv(N, 4)):
        x = X.tile((nest.index() * 4,), (4,)).load()
        Y.tile((nest.index() * 4,), (4,)).store(tc.cast(tc.exp(tc.cast(x, f32)), bf16))


def test_narrow_float_folds_and_casts_agree_bitwise():
    x = np.random.default_rng(2).standard_normal(37).astype(np.float16)
    assert_agree(narrow, X=x, Y=np.zeros(37, np.float32), Z=np.zeros(1, np.float16))


@tc.kernel
def signed_zero_max(X: tc.Tensor[f32, "M", "N"], Y: tc.Tensor[f32, "M"]):
    M, N = X.shape
    for nest in tc.parallel(1):
        x = X.tile((0, 0), (M, N)).load()
        Y.tile((0,), (M,)).store(tc.reduce(x, "N", "max"))


def test_max_of_signed_zeros_follows_the_canonical_tree():
    x = np.array([[0.0, -0.0, 0.0], [-0.0, 0.0, -0.0], [-0.0, -0.0, 0.0]], np.float32)
    assert_agree(signed_zero_max, X=x, Y=np.zeros(3, np.float32))


@tc.kernel
def tree_region(X: tc.Tensor[f32, "N"], S: tc.Tensor[f32, "P"]):
    N = X.shape[0]
    acc = tc.zeros(f32, ())
    for k in tc.reduction(N, policy="unordered_tree"):
        acc = acc + X.at(k.index()).load()
    S.at(0).store(acc)


def test_tree_reduce_regions_agree_in_canonical_and_adversarial_mode():
    x = np.random.default_rng(4).standard_normal(23).astype(np.float32)
    for mode in ("canonical", "adversarial"):
        assert_agree(tree_region, reduce_mode=mode, X=x, S=np.zeros(1, np.float32))


@tc.kernel
def racy_nested(X: tc.Tensor[i32, "N"], Y: tc.Tensor[i32, "N"]):
    N = X.shape[0]
    for outer in tc.parallel(2):
        for inner in outer.parallel(N):
            Y.at(inner.index()).store(X.at(outer.index()).load())


@tc.kernel
def racy_read(X: tc.Tensor[i32, "N"]):
    N = X.shape[0]
    for nest in tc.parallel(N - 1):
        i = nest.index()
        X.at(i).store(X.at(i + 1).load())


@pytest.mark.parametrize("k", [racy_nested, racy_read], ids=lambda k: k.name)
def test_conflicts_are_the_same_in_both_interpreters(k):
    status, _ = assert_agree(k, X=np.arange(6, dtype=np.int32),
                             **({"Y": np.zeros(6, np.int32)} if k is racy_nested else {}))
    assert status == "NoninterferenceError"
    with pytest.raises(tc.NoninterferenceError) as ref:
        interp.interpret(tc.capture(k), X=np.arange(6, dtype=np.int32),
                         **({"Y": np.zeros(6, np.int32)} if k is racy_nested else {}))
    assert "instances (0,) and (1,)" in ref.value.message


def test_the_recorder_reports_independently_of_record_order():
    """Two instances of one execution conflict on cells 3 and 5: the smallest cell is reported, and
    the writer's first write, whatever order the records came in."""
    def run(order):
        rec = conflicts.Recorder()
        rec.begin("r", None, [(0,), (1,), (2,)])
        recs = [(np.array([5, 3]), True, np.array([1, 1]), "store a"), (np.array([3]), False, np.array([2]), "load b"),
                (np.array([5]), False, np.array([0]), "load c"), (np.array([3]), True, np.array([1]), "store d")]
        for i in order:
            cells, w, insts, what = recs[i]
            rec.record("T", cells, w, what, insts)
        with pytest.raises(tc.NoninterferenceError) as err:
            rec.end(lambda buf, cell: (cell,))
        return err.value.message
    first = run([0, 1, 2, 3])
    assert "T[3]" in first and "instances (1,) and (2,)" in first and "by the store a" in first
    assert run([1, 0, 3, 2]) == first


def test_grouped_scopes_compare_only_instances_of_one_execution():
    rec = conflicts.Recorder()
    rec.begin("outer", None, [(0,), (1,)])
    rec.begin("inner", None, [(0,), (1,)], group=2)
    # executions 0 and 1 of the inner region both write cell 7 from their instance 0: no inner conflict
    rec.record("T", np.array([7, 7]), True, "store", np.array([0, 2]))
    with pytest.raises(tc.NoninterferenceError, match=r"concurrent outer: instances \(0,\) and \(1,\)"):
        rec.end(lambda buf, cell: (cell,), lift=lambda x: x // 2)
        rec.end(lambda buf, cell: (cell,))


@given(st.integers(1, 9), st.integers(1, 4))
def test_shifted_stores_conflict_exactly_when_boxes_overlap(n, width):
    """Instance i stores X[i*step : i*step + width]: the interpreters agree with the arithmetic."""
    step = 2

    @tc.kernel
    def strided(X: tc.Tensor[i32, "M"], w: int = 1):
        for nest in tc.parallel(n):
            X.tile((nest.index() * step,), (w,)).store(tc.full(i32, (w,), 1))

    status, msg = outcome(interp_fast.interpret, tc.capture(strided, w=width), X=np.zeros(2 * n + 4, np.int32))
    assert (status == "NoninterferenceError") == (n > 1 and width > step)
    assert_agree(strided, X=np.zeros(2 * n + 4, np.int32), w=width)


@pytest.mark.parametrize("pairs", [0, conflicts.PAIRS_MAX])
def test_box_records_decide_like_cell_records(monkeypatch, pairs):
    """Batched accesses are recorded as boxes and compared pairwise, or cell by cell past PAIRS_MAX:
    either way the verdict and the report are the reference's."""
    monkeypatch.setattr(conflicts, "PAIRS_MAX", pairs)
    X = np.arange(100, dtype=np.int32)
    for k, kw in ((racy_read, dict(X=X)), (racy_nested, dict(X=X[:6], Y=np.zeros(6, np.int32)))):
        assert_agree(k, **kw)
    from examples.gemm import gemm
    rng = np.random.default_rng(5)
    assert_agree(gemm, A=rng.standard_normal((9, 7)).astype(np.float32),
                 B=rng.standard_normal((7, 6)).astype(np.float32), C=np.zeros((9, 6), np.float32), bm=4, bn=4, bk=4)


@tc.kernel
def fold_reads_written(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "P"]):
    N = X.shape[0]
    for nest in tc.parallel(4):
        acc = tc.zeros(f32, ())
        for k in nest.serial(N):
            acc = acc + X.at(k.index()).load()
        Y.at(nest.index()).store(acc)
        X.at(nest.index() + N - 4).store(acc)


def test_reads_inside_a_folded_loop_are_recorded_for_their_instance():
    """The serial loop folds into one batched evaluation; its loads of X still count, per parallel
    instance, against the other instances' stores to X (and the report is the reference's)."""
    status, message = outcome(interp_fast.interpret, tc.capture(fold_reads_written), X=np.ones(6, np.float32),
                              Y=np.zeros(4, np.float32))
    assert status == "NoninterferenceError" and "X[2]" in message, message
    assert_agree(fold_reads_written, X=np.ones(6, np.float32), Y=np.zeros(4, np.float32))
