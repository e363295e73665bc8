"""The C backend: emitted source, compilation and caching, the callable's input checks, errors."""
import dataclasses
import re

import numpy as np
import pytest

import tilecert as tc
from examples import EXAMPLES
from tilecert import bf16, f32, i32
from tilecert.backends import CompileError, UnknownTarget
from tilecert.backends.c import build
from tilecert.backends.c.emit import emit_c
from tilecert.backends.c.runner import CKernel
from tilecert.backends.c.emit import standalone_main
from tilecert.backends.errors import SanitizerError
from tilecert.lowering import lower, validate
from tilecert.lowering.program import Store, walk
from tilecert.semantics.index import IBin, IConst


@tc.kernel
def divide(A: tc.Tensor[i32, "N"], B: tc.Tensor[i32, "N"], Q: tc.Tensor[i32, "N"], b: int = 4):
    N = A.shape[0]
    for p in tc.parallel(tc.cdiv(N, b)):
        n0 = p.index() * b
        Q.tile((n0,), (b,)).store(A.tile((n0,), (b,)).load() // B.tile((n0,), (b,)).load())


@tc.kernel
def shift(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"], b: int = 4):
    N = X.shape[0]
    for p in tc.parallel(tc.cdiv(N, b)):
        x = X.tile((p.index() * b + 1,), (b,), bounds="assume").load()
        Y.tile((p.index() * b,), (b,)).store(x)


@tc.kernel
def halve(X: tc.Tensor[bf16, "N"], Y: tc.Tensor[bf16, "N"]):
    N = X.shape[0]
    for p in tc.parallel(N):
        Y.tile((p.index(),), (1,)).store(X.tile((p.index(),), (1,)).load() * 0.5)


def gemm_schedule():
    s = tc.schedule(EXAMPLES["gemm"].kernel, M=32, N=32, K=16, bm=4, bn=8, bk=8)
    s.bind("nest.0", "grid0")
    s.bind("nest.1", "grid1")
    s.bind("C.store.N", "vector")
    s.bind("acc.full.p0", "unrolled")
    return s


def test_emitted_source_is_readable_c99_with_openmp():
    src = tc.emit(gemm_schedule())
    assert src.count("void tc_kernel(") == 1
    assert "const float *restrict T0_A" in src and "float *restrict T2_C" in src
    assert "#pragma omp parallel for schedule(static) collapse(2)" in src
    assert "#pragma omp simd" in src
    assert "/* nest.0: parallel bound to grid0 */" in src and "/* C.store.N: parallel bound to vector" in src
    assert "/* acc.full.p0 = 3 */" in src  # an unrolled copy
    assert src.startswith("/* tilecert C backend: kernel gemm */\n/* checker: schedule of gemm: 34 proved, 0 disproved, "
                          "0 unknown for K = 16, M = 32, N = 32 */\n"
                          "/* checker: lowering of gemm: 2 proved, 0 disproved, 0 unknown for K = 16, M = 32, N = 32 */\n")
    assert "NOT PROVED" not in src


def test_dsl_names_cannot_inject_code():
    p = tc.schedule(EXAMPLES["transpose"].kernel).program
    evil = 'A*/ int x; /*"\nsystem("rm")'
    tensors = (dataclasses.replace(p.tensors[0], name=evil),) + p.tensors[1:]
    body = _rename(p.body, "A", evil)
    p = dataclasses.replace(p, name='k"; abort(); //', tensors=tensors, body=body)
    src = tc.emit(p)
    body_text = src[src.index("void tc_kernel"):]
    assert "system(" not in body_text and "abort()" not in body_text and 'x; /*"' not in body_text
    assert all(c.count("/*") == 1 and c.endswith("*/") for c in re.findall(r"/\*.*?\*/", body_text))
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = tc.compile(p)(**{evil: a, "B": np.zeros((4, 3), np.float32)})
    assert np.array_equal(out["B"], a.T)


def _rename(node, old, new):
    from tilecert.semantics import ir
    from tilecert.semantics import loopir as L
    if isinstance(node, ir.Block):
        return ir.Block(node.args, tuple(_rename(x, old, new) for x in node.ops), node.yields)
    if isinstance(node, (L.Loop, L.If)):
        return dataclasses.replace(node, body=_rename(node.body, old, new))
    if isinstance(node, (L.Assign, L.Accum)):
        return dataclasses.replace(node, value=_rename(node.value, old, new))
    if isinstance(node, L.Ld) and node.buf == old:
        return dataclasses.replace(node, buf=new)
    if isinstance(node, L.Sel):
        return dataclasses.replace(node, cond=_rename(node.cond, old, new), a=_rename(node.a, old, new),
                                   b=_rename(node.b, old, new))
    return node


def test_compiled_kernel_returns_written_tensors_like_run():
    s = gemm_schedule()
    rng = np.random.default_rng(1)
    a = rng.standard_normal((32, 16)).astype(np.float32)
    b = rng.standard_normal((16, 32)).astype(np.float32)
    c = np.zeros((32, 32), np.float32)
    out = tc.compile(s)(A=a, B=b, C=c)
    assert set(out) == {"C"} and not c.any()  # inputs are copied
    np.testing.assert_allclose(out["C"], s.run(A=a, B=b, C=c)["C"], rtol=1e-5, atol=1e-5)
    inplace = np.zeros_like(c)
    tc.compile(s).run_in_place(A=a, B=b, C=inplace)
    assert np.array_equal(inplace, out["C"])


def test_binaries_are_cached_by_source_and_flags():
    s = gemm_schedule()
    k1, k2 = tc.compile(s), tc.compile(s.replay())
    assert k1.binary == k2.binary and k1.binary.exists() and k1.binary.with_suffix(".c").exists()
    other = tc.compile(tc.schedule(EXAMPLES["gemm"].kernel, M=32, N=32, K=24, bm=4, bn=8, bk=8))
    assert other.binary != k1.binary
    assert tc.compile(s, sanitize=True).binary != k1.binary


@pytest.mark.parametrize("bad, message", [
    (dict(A=np.zeros((4, 6)), B=np.zeros((6, 5), np.float32), C=np.zeros((4, 5), np.float32)), "dtype float64"),
    (dict(A=np.zeros((4, 6), np.float32), B=np.zeros((6, 5), np.float32), C=np.zeros(5, np.float32)), "rank 1"),
    (dict(A=np.zeros((6, 4), np.float32).T, B=np.zeros((6, 5), np.float32), C=np.zeros((4, 5), np.float32)),
     "not C-contiguous"),
    (dict(A=np.zeros((4, 6), np.float32), B=np.zeros((7, 5), np.float32), C=np.zeros((4, 5), np.float32)),
     "size K is 6"),
    (dict(A=np.zeros((4, 6), np.float32), B=np.zeros((6, 5), np.float32)), "missing array for tensor C"),
    (dict(A=np.zeros((4, 6), np.float32), B=np.zeros((6, 5), np.float32), C=np.zeros((4, 5), np.float32), Z=1),
     "unknown size or argument 'Z'"),
    (dict(A=[[1.0]], B=np.zeros((1, 1), np.float32), C=np.zeros((1, 1), np.float32)), "must be a numpy array"),
])
def test_bad_inputs_raise_input_errors_with_hints(bad, message):
    k = tc.compile(EXAMPLES["gemm"].kernel)
    with pytest.raises(tc.InputError, match=message) as info:
        k(**bad)
    assert info.value.hint


def test_schedule_bound_sizes_are_enforced_and_unknown_targets_refused():
    k = tc.compile(tc.schedule(EXAMPLES["transpose"].kernel, M=4, N=3))
    with pytest.raises(tc.InputError, match="4 from the schedule but 5 from A"):
        k(A=np.zeros((5, 3), np.float32), B=np.zeros((3, 5), np.float32))
    with pytest.raises(UnknownTarget, match="unknown target 'opencl'"):
        tc.compile(EXAMPLES["transpose"].kernel, target="opencl")
    with pytest.raises(UnknownTarget):
        tc.emit(EXAMPLES["transpose"].kernel, target="llvm")


def test_integer_division_by_zero_is_an_execution_error_like_the_interpreter():
    a = np.arange(8, dtype=np.int32) - 4
    b = np.array([3, -2, 1, 5, 2, -3, 7, 2], np.int32)
    out = tc.compile(divide)(A=a, B=b, Q=np.zeros(8, np.int32))
    assert np.array_equal(out["Q"], a // b)  # floor semantics for negative operands
    b[5] = 0
    with pytest.raises(tc.ExecutionError, match="by zero"):
        tc.run(divide, A=a, B=b, Q=np.zeros(8, np.int32))
    with pytest.raises(tc.ExecutionError, match="by zero"):
        tc.compile(divide)(A=a, B=b, Q=np.zeros(8, np.int32))


def test_out_of_bounds_sizes_are_refused_before_running():
    with pytest.raises(tc.UnprovedScheduleError, match="bounds disproved at initial program shift"):
        tc.compile(shift)
    k = tc.compile(shift, allow_unproved=True)  # the checker disproves bounds; the gate is opened explicitly
    assert "/* NOT PROVED: bounds disproved at initial program shift */" in k.source
    assert not k.validation.ok  # the assumed-in-bounds read leaves the tensor for some sizes
    with pytest.raises(tc.ExecutionError, match="out of bounds"):
        k(X=np.zeros(8, np.float32), Y=np.zeros(8, np.float32))
    with pytest.raises(tc.ExecutionError):
        tc.run(shift, X=np.zeros(8, np.float32), Y=np.zeros(8, np.float32))


def test_bf16_inputs_are_rounded_like_the_interpreter():
    x = np.array([1.00390625, 3.0078125, -2.01171875], np.float32)  # not bf16 values
    got = tc.compile(halve)(X=x, Y=np.zeros(3, np.float32))["Y"]
    assert np.array_equal(got, tc.run(halve, X=x, Y=np.zeros(3, np.float32))["Y"])
    assert np.array_equal(got, np.array([0.5, 1.5, -1.0078125], np.float32))  # ties to even, then * 0.5


def test_sanitizer_build_reports_memory_errors():
    s = tc.schedule(EXAMPLES["transpose"].kernel, M=4, N=3)
    p = s.program
    lp = lower(p, s.sizes)
    from tests.test_lowering import replace_nodes
    oob = dataclasses.replace(lp, body=replace_nodes(lp.body, lambda n: [
        dataclasses.replace(n, index=(IBin("add", n.index[0], IConst(64)),) + n.index[1:])
        if isinstance(n, Store) else n]))
    source = emit_c(oob) + "\n" + standalone_main(oob)
    binary = build.build(source, build.SANITIZE_FLAGS, shared=False)
    kernel = CKernel(p, oob, validate(p, lp, s.sizes), source, binary, sanitize=True)
    with pytest.raises(SanitizerError, match="out of bounds"):
        kernel(A=np.zeros((4, 3), np.float32), B=np.zeros((3, 4), np.float32))


def test_compiler_failures_are_typed_errors():
    with pytest.raises(CompileError, match="tilecert bug"):
        build.build("this is not C", build.FLAGS, shared=True)


def test_every_lowered_store_carries_its_schedule_instance():
    lp = lower(gemm_schedule().program, gemm_schedule().sizes)
    for st in walk(lp.body):
        if isinstance(st, Store):
            assert [v for v, _ in st.origin]  # tau is recorded for validation
