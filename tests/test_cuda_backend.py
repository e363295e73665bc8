"""The CUDA backend: emitted kernels (grid / block / warp / lane slots, launch geometry and guards,
shared memory, barriers, launches in sequence, host loops, atomics), nvcc for sm_90 on every
emitted source, every example with a split + bind schedule against the interpreter on the host
emulation, and the typed errors of what the backend cannot render."""
import dataclasses
import functools
import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import tilecert as tc
from examples import EXAMPLES
from tilecert.backends import UnknownTarget
from tilecert.backends.cuda import CudaUnsupported, NoDevice, cases, gpu_present, nvcc_check
from tilecert.backends.cuda.runner import CudaKernel
from tilecert.cli import main
from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert import bf16, f32, f64, i8, i32
from tilecert.semantics.index import IBin, IConst, ISize, IVar, ibin
from tests.test_differential import int_ops

# These tests exercise the CUDA lowering and runtime. Many of their subjects are not proved on purpose
# (the racy and divergent variants) or not for all sizes (a GPU schedule with symbolic sizes exceeds
# the grid limits at huge sizes: hardware_limits is disproved), so the gate is opened explicitly and
# the differential reports are asserted to agree with the specification (``agreed``), not ``matched``.
emit = functools.partial(tc.emit, allow_unproved=True)
compile_unproved = functools.partial(tc.compile, allow_unproved=True)
differential = functools.partial(tc.differential, allow_unproved=True)

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not installed: emitted CUDA cannot be compiled here")
I32 = "i32"


# ----------------------------------------------------------------------------- hand-built programs
def v(var):
    return IVar(var, 0)


def blk(*ops):
    return ir.Block((), tuple(ops))


def loop(var, name, extent, binding=None, *body, kind="parallel"):
    return L.Loop(var, name, extent if not isinstance(extent, int) else IConst(extent), kind, blk(*body), binding)


def tensor(name, dims, written, dtype=I32):
    return ir.TensorDecl(name, dtype, tuple(ir.Dim(k, d) for k, d in dims), tuple(ISize(d) for _, d in dims), written)


def program(name, sizes, tensors, *body):
    return ir.Program(name, sizes, tensors, blk(*body))


def rotate_steps():
    """``T`` times: ``Y[i] += Y[N - 1 - i]`` over all ``i`` at once: each step a grid-wide phase."""
    n = ISize("N")
    step = loop(1, "i", n, "grid0", L.Assign("Z", (v(1),), L.Bin(
        "add", L.Ld("Y", (v(1),), I32), L.Ld("Y", (ibin("sub", ibin("sub", n, IConst(1)), v(1)),), I32), I32)))
    copy = loop(2, "j", n, "grid0", L.Assign("Y", (v(2),), L.Ld("Z", (v(2),), I32)))
    return program("rotate_steps", ("N", "T"), (tensor("Y", ((0, "N"),), True), tensor("Z", ((0, "N"),), True),
                                                 tensor("S", ((1, "T"),), False)),
                   loop(0, "t", ISize("T"), None, step, copy, kind="serial"))


def atomic_sum(dtype=I32):
    """``Y[0] = sum(X)`` with the reduce loop bound to the grid: atomic updates."""
    return program("atomic_sum", ("N", "P"), (tensor("X", ((0, "N"),), False, dtype), tensor("Y", ((1, "P"),), True, dtype)),
                   L.If(IBin("gt", ISize("P"), IConst(0)), blk(
                       loop(0, "r", ISize("N"), "grid0", L.Accum("Y", (IConst(0),), "add", L.Ld("X", (v(0),), dtype)),
                            kind="reduce"))))


def guarded(buf, index, n):
    return L.Sel(L.Ix(IBin("lt", index, n), "bool"), L.Ld(buf, (index,), I32), L.Lit(0, I32), I32)


def shadow_barrier():
    """A thread loop with a barrier, shorter than the launch (the next phase has 16 threads)."""
    n, g, t, u = ISize("N"), v(0), v(1), v(2)
    mine = ibin("add", ibin("mul", g, IConst(8)), t)
    first = loop(1, "t", 8, "block0", L.Assign("s", (t,), guarded("X", mine, n)), L.Barrier("block"),
                 L.If(IBin("lt", mine, n), blk(L.Assign("Y", (mine,), L.Ld("s", (ibin("sub", IConst(7), t),), I32)))))
    at = ibin("add", ibin("mul", g, IConst(16)), u)
    second = loop(2, "u", 16, "block0", L.If(IBin("lt", at, ISize("M")), blk(
        L.Assign("W", (at,), L.Ld("s", (IBin("mod", u, IConst(8)),), I32)))))
    return program("shadow_barrier", ("N", "M"), (tensor("X", ((0, "N"),), False), tensor("Y", ((0, "N"),), True),
                                                  tensor("W", ((1, "M"),), True)),
                   loop(0, "g", ibin("floordiv", ibin("add", n, IConst(7)), IConst(8)), "grid0",
                        L.Decl(L.Buffer("s", I32, (IConst(8),), "shared")), first, second))


def row_reverse():
    """Rows 0..2 of each 4 x 4 tile reversed through one shared row per y (two phases inside the
    y loop, which is shorter than the launch), then a second phase over all 4 rows."""
    n, g, y, x, x2, y2, x3 = ISize("N"), v(0), v(1), v(2), v(3), v(4), v(5)
    at = lambda row, col: ibin("add", ibin("add", ibin("mul", g, IConst(16)), ibin("mul", row, IConst(4))), col)  # noqa
    rows = loop(1, "y", 3, "block1", L.Decl(L.Buffer("s", I32, (IConst(4),), "shared")),
                loop(2, "x", 4, "block0", L.Assign("s", (x,), guarded("X", at(y, x), n))),
                loop(3, "x2", 4, "block0", L.If(IBin("lt", at(y, x2), n), blk(
                    L.Assign("Y", (at(y, x2),), L.Ld("s", (ibin("sub", IConst(3), x2),), I32))))))
    double = loop(4, "y2", 4, "block1", loop(5, "x3", 4, "block0", L.If(IBin("lt", at(y2, x3), n), blk(
        L.Assign("Z", (at(y2, x3),), L.Bin("mul", L.Lit(2, I32), L.Ld("X", (at(y2, x3),), I32), I32))))))
    return program("row_reverse", ("N",), tuple(tensor(t, ((0, "N"),), t != "X") for t in ("X", "Y", "Z")),
                   loop(0, "g", ibin("floordiv", ibin("add", n, IConst(15)), IConst(16)), "grid0", rows, double))


@tc.kernel
def float_ops(X: tc.Tensor[f32, "N"], Bf: tc.Tensor[bf16, "N"], D: tc.Tensor[f64, "N"], I: tc.Tensor[i32, "N"],
              J: tc.Tensor[i8, "N"], b: int = 4):
    """Every float dtype the CUDA backend has (f16 has none): math, casts that wrap."""
    N = X.shape[0]
    for p in tc.parallel(tc.cdiv(N, b)):
        n0 = p.index() * b
        x = X.tile((n0,), (b,)).load()
        z = tc.cast(x, bf16)
        Bf.tile((n0,), (b,)).store(z * 3.0 + z / 7.0 + tc.tanh(z) - tc.log(abs(z) + 1.0) + tc.maximum(z, 0.5))
        d = tc.cast(x, f64)
        D.tile((n0,), (b,)).store(d * d * 1e10 + tc.exp(d) + tc.minimum(d, -d) + tc.sqrt(abs(d)))
        I.tile((n0,), (b,)).store(tc.cast(x * 1e9, i32) + tc.cast(x * 100.0, i32))
        J.tile((n0,), (b,)).store(tc.cast(x * 300.0, i8))


DTYPE_KERNELS = {"int_ops": int_ops, "float_ops": float_ops}


def transpose_schedule(m=10, n=7):
    s = tc.schedule(EXAMPLES["transpose"].kernel, M=m, N=n)
    for name, slot in (("nest.0", "grid1"), ("nest.1", "grid0"), ("a.load.M", "block1"), ("a.load.N", "block0"),
                       ("B.store.N", "block1"), ("B.store.M", "block0")):
        s.bind(name, slot)
    return s


SCHEDULES = {}


def example_schedule(name):
    if name not in SCHEDULES:
        SCHEDULES[name] = cases.gpu_schedule(EXAMPLES[name].kernel)
    return SCHEDULES[name]


# ----------------------------------------------------------------------------- every emitted source, compiled once
def sources():
    """Every source these tests emit, by name (the examples with their GPU schedules included)."""
    out = {f"{name}_{variant}": emit(make(variant), target="cuda")
           for name, make in cases.PROGRAMS.items() for variant in cases.VARIANTS}
    out.update({f"example_{name}": emit(example_schedule(name), target="cuda") for name in EXAMPLES})
    out.update({name: emit(cases.gpu_schedule(k), target="cuda") for name, k in DTYPE_KERNELS.items()})
    out.update(transpose=emit(transpose_schedule(), target="cuda"), rotate_steps=emit(rotate_steps(), target="cuda"),
               atomic_sum=emit(atomic_sum(), target="cuda"), shadow_barrier=emit(shadow_barrier(), target="cuda"),
               row_reverse=emit(row_reverse(), target="cuda"))
    return out


@pytest.fixture(scope="module")
def emitted():
    srcs = sources()
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:  # warm the build caches in parallel
        builds = [pool.submit(compile_unproved, example_schedule(name), target="cuda-host") for name in EXAMPLES]
        builds += [pool.submit(compile_unproved, p, target="cuda-host")
                   for p in (rotate_steps(), atomic_sum(), shadow_barrier(), row_reverse())]
        if NVCC is not None:
            builds += [pool.submit(nvcc_check, src) for src in srcs.values()]
        for b in builds:
            b.result()
    return srcs


@needs_nvcc
def test_nvcc_compiles_every_emitted_source_for_sm_90_to_ptx_and_object(emitted):
    for name, src in emitted.items():
        ptx = nvcc_check(src)  # CompileError (with nvcc's messages) if nvcc rejects it
        kernels = re.findall(r'extern "C" __global__ void (\w+)\(', src)
        assert kernels, name
        for kernel in kernels:
            assert re.search(rf"\.entry {kernel}\(", ptx), (name, kernel)
        assert ".target sm_90" in ptx


# ----------------------------------------------------------------------------- emitted source
def test_grid_and_block_loops_map_to_blockidx_and_threadidx_by_slot(emitted):
    src = emitted["transpose"]
    kernel = src[src.index("extern \"C\""):src.index("/* host launcher")]
    assert "const int64_t i0 = (int64_t)blockIdx.y;  /* nest.0: parallel bound to grid1 */" in kernel
    assert "const int64_t i1 = (int64_t)blockIdx.x;  /* nest.1: parallel bound to grid0 */" in kernel
    assert re.search(r"const int64_t r\d+ = \(int64_t\)threadIdx\.y;", kernel)
    assert re.search(r"const int64_t r\d+ = \(int64_t\)threadIdx\.x;", kernel)
    assert "__shared__ float b1_a[12];" in kernel  # the 4 x 3 tile, one per block
    # launch geometry: grid (cdiv(7, 3), cdiv(10, 4)); block x = max(3, 4), y = max(4, 3)
    assert "const int64_t g[3] = {3, 3, 1}, b[3] = {4, 4, 1};" in src
    # launch-extent guards (a.load.N and B.store.N have 3 of the 4 x / y threads) and the tail guards of the tiles
    assert re.search(r"if \(\(i\d+ < 3\)\) \{\n\s+/\* S\d+ at line", kernel)
    assert re.search(r"if \(\(\(\(\(i1 \* 3\) \+ i\d+\) < 7\) && \(\(\(i0 \* 4\) \+ i\d+\) < 10\)\)\) \{", kernel)
    # the tile's load and its transposed read are phases: the barrier pass orders them (no zero fill before the
    # load, nor its barrier: every cell the read may see is written first)
    assert kernel.count("__syncthreads();  /* block barrier */") == 1 and "placed" not in kernel
    assert "/* checker: lowering of transpose: 2 proved, 0 disproved, 0 unknown for M = 10, N = 7 */" in src
    assert "NOT PROVED" not in src and " 0 disproved, 0 unknown for M = 10, N = 7 */" in src
    assert emit(transpose_schedule(), target="cuda-host") == src


def test_stated_barriers_stay_in_place_and_thread_loops_with_barriers_run_on_every_thread(emitted):
    src = emitted["tree_reduction_ok"]
    kernel = src[src.index("extern \"C\""):src.index("/* host launcher")]
    # the program states 4; s is written before it is read: no zero fill, so no barrier of the pass's
    assert kernel.count("__syncthreads();  /* block barrier */") == 4 and ".zero" not in kernel
    assert "__shared__ int32_t b1_s[8];" in kernel
    assert 'extern "C" __global__ void tc_k0_tree_reduction_ok(const int32_t *__restrict__ T0_X, ' \
           "int32_t *__restrict__ T1_Y, int64_t S0_N, int64_t S1_G, int *err)" in kernel
    assert re.search(r"if \(\(i\d+ < 4\)\) \{\n\s+/\* S\d+ at line 0 \*/\n.*\n\s+\}\n\s+__syncthreads", kernel)


def test_warp_and_lane_loops_share_the_x_dimension_and_use_warp_barriers(emitted):
    src = emitted["warp_reduction_ok"]
    assert re.search(r"const int64_t r\d+ = \(\(int64_t\)threadIdx\.x / 32\);", src)  # warp
    assert re.search(r"const int64_t r\d+ = \(\(int64_t\)threadIdx\.x % 32\);", src)  # lane
    assert "__shared__ int32_t b1_s_s[64];" in src  # one copy of s per warp
    assert "int32_t *const b1_s = b1_s_s + ((int64_t)threadIdx.x / 32) * 32;" in src
    # the 6 stated (each warp's copy is written before it is read: no zero fill, no barrier after one)
    assert src.count("__syncwarp();  /* warp barrier */") == 6 and "__syncthreads" not in src.split("host launcher")[0]
    assert "b[3] = {64, 1, 1}" in src  # 2 warps of 32 lanes


def test_block_level_statements_run_on_one_thread_and_thread_private_buffers_are_local(emitted):
    src = emitted["example_softmax"]
    assert re.search(r"if \(\(\(i(\d+) == 0\) && \(i(\d+) == 0\)\)\) \{\n"
                     r"\s+/\* S\d+ at line \d+ \*/\n\s+b\d+_full\[0\] = ", src)
    src = emitted["example_reduction_policy"]
    assert "int32_t b2_load[1] = {};  /* local load (thread-private) */" in src


def test_threads_past_a_short_loop_follow_it_to_its_barriers(emitted):
    src = emitted["shadow_barrier"]
    assert "b[3] = {16, 1, 1}" in src
    # only real iterations write; every thread reaches the barrier after them
    assert re.search(r"if \(\(i\d+ < 8\)\) \{\n\s+/\* S\d+ at line 0 \*/\n.*\n\s+\}\n\s+__syncthreads", src)
    x = np.arange(1, 21, dtype=np.int32)
    out = compile_unproved(shadow_barrier(), target="cuda-host")(X=x, Y=np.zeros(20, np.int32),
                                                                 W=np.zeros(40, np.int32))
    padded = np.concatenate([x, np.zeros(4, np.int32)])
    assert np.array_equal(out["Y"], padded.reshape(3, 8)[:, ::-1].ravel()[:20])
    assert np.array_equal(out["W"], [padded[k // 16 * 8 + k % 8] for k in range(40)])
    report = differential(shadow_barrier(), target="cuda-host", trials=3)
    assert report.agreed, str(report)


def test_phases_inside_a_thread_loop_use_per_coordinate_shared_copies(emitted):
    src = emitted["row_reverse"]
    assert "__shared__ int32_t b1_s_s[16];  /* shared s (4 copies) */" in src  # one row per y of the launch
    assert "int32_t *const b1_s = b1_s_s + (int64_t)threadIdx.y * 4;" in src
    # each row's copy is written before it is read (no zero fill); the barrier pass orders the phases
    assert "s.zero" not in src
    assert src.count("__syncthreads();") == 1  # row load | reversed store (Z is apart)
    report = differential(row_reverse(), target="cuda-host", trials=4, seed=5)
    assert report.agreed and all(t.outcome == "match" for t in report.trials), str(report)


def test_phases_that_need_a_grid_wide_order_are_launches_in_sequence_inside_host_loops(emitted):
    src = emitted["rotate_steps"]
    launcher = src[src.index("/* host launcher"):]
    assert "for (int64_t i0 = 0; i0 < S1_T; ++i0) {  /* t: serial, host loop */" in launcher
    assert launcher.index("TC_LAUNCH(tc_k0_rotate_steps") < launcher.index("TC_LAUNCH(tc_k1_rotate_steps")
    assert "int64_t S0_N, int64_t S1_T, int64_t i0, int *err)" in src  # the host variable is a kernel parameter
    report = differential(rotate_steps(), target="cuda-host", trials=4, seed=1)
    assert report.agreed, str(report)
    y = np.arange(5, dtype=np.int32)
    out = compile_unproved(rotate_steps(), target="cuda-host")(Y=y, Z=np.zeros(5, np.int32), S=np.zeros(3, np.int32))
    want = y.copy()
    for _ in range(3):
        want = want + want[::-1]
    assert np.array_equal(out["Y"], want)


def test_grid_bound_reductions_update_with_compare_and_swap(emitted):
    assert "tc_atomic_update(&T1_Y[0], [&](int32_t tc_c) { return (int32_t)tc_add_i32(tc_c, tc_v); });" \
        in emitted["atomic_sum"]
    x = np.arange(-20, 57, dtype=np.int32)
    out = compile_unproved(atomic_sum(), target="cuda-host")(X=x, Y=np.zeros(1, np.int32))
    assert out["Y"][0] == x.sum()
    with pytest.raises(CudaUnsupported, match="compare-and-swap needs 4 or 8 bytes") as info:
        emit(atomic_sum("i8"), target="cuda")
    assert info.value.hint


def test_dsl_names_cannot_inject_code():
    s = transpose_schedule(4, 3)
    p = s.program
    evil = 'A*/ int x; /*"\nsystem("rm")'
    p = dataclasses.replace(p, name='k"; abort(); //', tensors=(dataclasses.replace(p.tensors[0], name=evil),)
                            + p.tensors[1:], body=_rename(p.body, "A", evil))
    src = emit(p, target="cuda")
    assert all(c.count("/*") == 1 and c.endswith("*/") for c in re.findall(r"/\*.*?\*/", src))
    code = re.sub(r"/\*.*?\*/", "", src)  # what is not a comment: the names are reduced to identifiers
    assert "system(" not in code and "abort()" not in code and 'x; /*"' not in code
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    out = compile_unproved(p, target="cuda-host")(**{evil: a, "B": np.zeros((3, 4), np.float32)})
    assert np.array_equal(out["B"], a.T)


def _rename(node, old, new):
    if isinstance(node, ir.Block):
        return ir.Block(node.args, tuple(_rename(x, old, new) for x in node.ops), node.yields)
    if isinstance(node, (L.Loop, L.If)):
        return dataclasses.replace(node, body=_rename(node.body, old, new))
    if isinstance(node, (L.Assign, L.Accum)):
        return dataclasses.replace(node, value=_rename(node.value, old, new))
    if isinstance(node, L.Sel):
        return dataclasses.replace(node, cond=_rename(node.cond, old, new), a=_rename(node.a, old, new),
                                   b=_rename(node.b, old, new))
    return dataclasses.replace(node, buf=new) if isinstance(node, L.Ld) and node.buf == old else node


# ----------------------------------------------------------------------------- the examples
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_example_with_grid_and_block_bindings_matches_the_interpreter(emitted, name):
    s = example_schedule(name)
    bindings = {lp.binding for lp in L.loops(s.program.body)}
    assert bindings & {"grid0", "grid1"}
    assert any(op == "split" for op, _ in s.history) and any(op == "bind" for op, _ in s.history)
    report = differential(s, target="cuda-host", trials=2)
    assert report.agreed, str(report)
    assert all(t.outcome == "match" for t in report.trials)


FULL = os.environ.get("TILECERT_FULL") == "1"
LONG = [pytest.mark.slow, pytest.mark.skipif(not FULL, reason="a long campaign: TILECERT_FULL=1 runs it")]


@pytest.mark.parametrize("name", [n if n == "all_regions" else pytest.param(n, marks=LONG) for n in sorted(EXAMPLES)])
def test_placed_barriers_leave_no_race_for_thread_sanitizer(name):
    report = differential(example_schedule(name), target="cuda-host", trials=1, sanitize=True)
    assert report.agreed, str(report)


@pytest.mark.parametrize("name", sorted(DTYPE_KERNELS))
def test_every_dtype_but_f16_computes_like_the_interpreter(name):
    report = differential(cases.gpu_schedule(DTYPE_KERNELS[name]), target="cuda-host", trials=3, sizes={"N": 23})
    assert report.agreed and all(t.outcome == "match" for t in report.trials), str(report)


def test_compiled_kernels_check_inputs_like_the_c_backend():
    k = compile_unproved(example_schedule("gemm_i32"), target="cuda-host")
    assert isinstance(k, CudaKernel) and repr(k) == "<tilecert cuda-host kernel gemm_i32>"
    with pytest.raises(tc.InputError, match="dtype float64") as info:
        k(A=np.zeros((4, 6)), B=np.zeros((6, 5), np.int32), C=np.zeros((4, 5), np.int32))
    assert info.value.hint
    a = np.arange(24, dtype=np.int32).reshape(4, 6) - 9
    b = np.arange(30, dtype=np.int32).reshape(6, 5) % 7
    assert np.array_equal(k(A=a, B=b, C=np.zeros((4, 5), np.int32))["C"], a @ b)


# ----------------------------------------------------------------------------- what the backend refuses
def _raises(p, match, reason="unsupported"):
    with pytest.raises(CudaUnsupported, match=match) as info:
        emit(p, target="cuda")
    assert info.value.hint and info.value.reason == reason
    return info.value


def test_a_grid_loop_inside_a_kernels_serial_loop_needs_a_grid_wide_order():
    inner = loop(2, "j", ISize("N"), "grid0", L.Assign("Y", (v(2),), L.Ld("Y", (v(2),), I32)))
    p = program("nested", ("N",), (tensor("Y", ((0, "N"),), True),),
                loop(0, "i", 2, "grid1", loop(1, "k", 3, None, inner, kind="serial")))
    assert "grid-wide order" in _raises(p, "nested in a kernel's statements", "containment").hint


def test_unsupported_geometry_and_types_are_typed_errors():
    body = L.Assign("Y", (v(1),), L.Lit(1, I32))
    lanes = loop(2, "l", 32, "lane", body)
    _raises(program("mix", ("N",), (tensor("Y", ((0, "N"),), True),), loop(1, "x", 4, "block0", lanes)),
            "binds block0 together with warp / lane", "containment")
    _raises(program("twice", ("N",), (tensor("Y", ((0, "N"),), True),),
                    loop(0, "x", 4, "block0", loop(1, "y", 4, "block0", body))), "binds block0 inside a loop bound to it",
            "containment")
    _raises(program("wide", ("N",), (tensor("Y", ((0, "N"),), True),), loop(1, "l", 64, "lane", body)),
            "not bounded by a constant <= 32", "hardware_limits")
    half = program("half", ("N",), (tensor("X", ((0, "N"),), False, "f16"), tensor("Y", ((0, "N"),), True, "f16")),
                   loop(0, "i", ISize("N"), "grid0", L.Assign("Y", (v(0),), L.Ld("X", (v(0),), "f16"))))
    assert "bf16" in _raises(half, "uses f16").hint
    sized = program("sized", ("N",), (tensor("Y", ((0, "N"),), True),), loop(0, "g", 2, "grid0",
                    L.Decl(L.Buffer("s", I32, (ISize("N"),), "shared")),
                    loop(1, "x", 4, "block0", L.Assign("s", (v(1),), L.Lit(1, I32)))))
    _raises(sized, "not constant", "hardware_limits")


def test_a_barrier_the_phases_need_under_a_thread_dependent_guard_is_refused_as_barrier_uniform_disproves_it():
    x, y = v(2), v(1)
    phases = [loop(2, "x", 4, "block0", L.Assign("s", (x,), L.Ld("Y", (x,), I32))),
              loop(3, "x2", 4, "block0", L.Assign("Y", (v(3),), L.Ld("s", (ibin("sub", IConst(3), v(3)),), I32)))]
    p = program("guarded", ("N",), (tensor("Y", ((0, "N"),), True),), loop(0, "g", 1, "grid0",
                L.Decl(L.Buffer("s", I32, (IConst(4),), "shared")),
                loop(1, "y", 2, "block1", L.If(IBin("eq", y, IConst(0)), blk(*phases)))))
    error = _raises(p, "the barriers placed in guarded disprove barrier_uniform: the barrier is reached by")
    assert "differs between the threads of a block" in error.hint


def test_the_gpu_target_needs_a_gpu_and_other_targets_are_unknown(capsys):
    gemm_file = EXAMPLES["gemm"].kernel.fn.__code__.co_filename
    assert main(["emit", gemm_file, "--target", "cuda", "--size", "M=8", "--size", "N=8", "--size", "K=8"]) == 0
    assert 'extern "C" __global__ void tc_k0_gemm(' in capsys.readouterr().out
    s = transpose_schedule(4, 3)
    if not gpu_present():
        with pytest.raises(NoDevice, match="needs a CUDA GPU") as info:
            compile_unproved(s, target="cuda")
        assert "cuda-host" in info.value.hint
    with pytest.raises(UnknownTarget, match="unknown target 'cuda-emu'"):
        emit(s, target="cuda-emu")
