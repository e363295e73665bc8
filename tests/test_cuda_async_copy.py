"""Asynchronous copies into a shared ring (``AsyncCopy`` / ``AsyncWait``): cp.async on CUDA, a copy that lands only
at its wait on the host emulation.

The subject is a hand-realized 3-slot ring: per block (one row of ``X``), tick ``j`` waits (at most ``pending``
groups in flight, then a barrier), issues the copy of tile ``j`` into slot ``j mod 3`` (elements past ``N`` in their
zero-fill form) and consumes tile ``j - 2``: ``Y[8i + u] = s[i mod 3, u] + s[i mod 3, 7 - u]`` (another thread's
element, so the wait's barrier publishes it). The copy of tile ``i`` issues at tick ``i`` after the wait and is
needed at tick ``i + 2`` before its wait's successors: ``wait_pending`` gives 1. The interpreter lands each copy at
its issue (what the program means when the waits are right); the emulation lands it at its wait, so a missing wait
or a count that leaves the copy in flight reads the slot's old content.
"""
import functools
import itertools
import random
import re
import shutil

import numpy as np
import pytest

import tilecert as tc
from tilecert.backends import SanitizerError
from tilecert.backends.cuda import nvcc_check
from tilecert.backends.cuda.build import build_executable
from tilecert.backends.cuda.runner import CudaKernel
from examples.gemm_gpu import gemm_gpu
from tilecert.lowering.async_copy import realize_async_copies, wait_pending
from tilecert.lowering.pipeline import lower_for
from tilecert.lowering.program import Store, Sync, walk
from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.index import IBin, IConst, ISize, IVar, cdiv, ibin
from tilecert.semantics.pipeline.plan import Edge, ModuloPlan, StageGraph, StageInfo
from tilecert.semantics.pipeline.realize import run_overlapped
from tilecert.semantics.sched.base import the_loop

compile_unproved = functools.partial(tc.compile, allow_unproved=True)
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
T, V, D = 8, 3, 2  # threads (tile elements), ring slots, ticks from a tile's copy to its use
NP = {"i32": np.int32, "f64": np.float64, "i16": np.int16, "f32": np.float32}


def _v(k):
    return IVar(k, 0)


def _blk(*ops):
    return ir.Block((), tuple(ops))


def ring_kernel(dtype="i32", wait="async", pending=None):
    """The ring (see the module docstring); ``wait``: ``async`` (the AsyncWait) or ``barrier`` (a plain barrier: no
    wait); ``pending`` overrides the derived count."""
    n, g, j, t, u = ISize("N"), _v(0), _v(1), _v(2), _v(3)
    k = cdiv(n, IConst(T))
    col = ibin("add", ibin("mul", j, IConst(T)), t)
    src = L.Sel(L.Ix(IBin("lt", col, n), "bool"), L.Ld("X", (g, col), dtype), L.Lit(0, dtype), dtype)
    copy = L.Loop(2, "t", IConst(T), "parallel", _blk(L.If(IBin("lt", j, k), _blk(
        L.AsyncCopy("s", (ibin("mod", j, IConst(V)), t), src)))), "block0")
    i = ibin("sub", j, IConst(D))
    out, slot = ibin("add", ibin("mul", i, IConst(T)), u), ibin("mod", i, IConst(V))
    value = L.Bin("add", L.Ld("s", (slot, u), dtype), L.Ld("s", (slot, ibin("sub", IConst(T - 1), u)), dtype), dtype)
    use = L.Loop(3, "u", IConst(T), "parallel", _blk(L.If(IBin("and", IBin("ge", j, IConst(D)), IBin("lt", out, n)),
                                                          _blk(L.Assign("Y", (g, out), value)))), "block0")
    derived = wait_pending(waits=(0,), issue=1, wait=0, distance=D)
    sync = L.AsyncWait("block", pending=derived if pending is None else pending) if wait == "async" else \
        L.Barrier("block")
    ticks = L.Loop(1, "j", ibin("add", k, IConst(D)), "serial", _blk(sync, copy, use))
    body = L.Loop(0, "g", ISize("R"), "parallel", _blk(L.Decl(L.Buffer("s", dtype, (IConst(V), IConst(T)), "shared")),
                                                      ticks), "grid0")
    tensors = tuple(ir.TensorDecl(name, dtype, (ir.Dim(0, "R"), ir.Dim(1, "N")), (ISize("R"), n), name == "Y")
                    for name in ("X", "Y"))
    return ir.Program(f"ring_{dtype}_{wait}", ("R", "N"), tensors, _blk(body))


def ring_inputs(dtype, rows=3, n=29, seed=5):
    x = np.random.default_rng(seed).integers(-100, 100, (rows, n)).astype(NP[dtype])
    padded = np.concatenate([x, np.zeros((rows, -n % T), x.dtype)], axis=1)
    c = np.arange(n)
    want = padded[:, c] + padded[:, c - c % T + T - 1 - c % T]
    return dict(X=x, Y=np.zeros_like(x)), want


# ----------------------------------------------------------------------------- the wait count
def simulated_pending(waits, issue, wait, distance, ticks=8):
    """The largest ``n`` for which ``wait_group(n)`` at (tick ``ticks - 1``, ``wait``) has landed the copy issued
    at (tick ``ticks - 1 - distance``, ``issue``): the groups committed after the copy's, by running the events."""
    groups, open_group = [], []
    for tick, pos in itertools.product(range(ticks), range(max(waits + (issue,)) + 1)):
        if pos == issue:
            open_group.append(tick)
        if pos in waits:
            groups.append(open_group)
            open_group = []
            if (tick, pos) == (ticks - 1, wait):
                mine = next(k for k, grp in enumerate(groups) if ticks - 1 - distance in grp)
                return len(groups) - 1 - mine
    raise AssertionError("the wait never ran")


def test_the_wait_count_is_the_groups_committed_after_the_copy_in_a_run_of_the_ticks():
    rng = random.Random(3)
    checked = 0
    for _ in range(300):
        positions = rng.sample(range(6), rng.randint(2, 6))
        issue, waits = positions[0], tuple(sorted(positions[1:]))
        wait, distance = rng.choice(waits), rng.randint(0, 3)
        if distance == 0 and issue > wait:
            with pytest.raises(ValueError, match="issues after it"):
                wait_pending(waits, issue, wait, distance)
            continue
        assert wait_pending(waits, issue, wait, distance) == simulated_pending(waits, issue, wait, distance)
        checked += 1
    assert checked > 150


# ----------------------------------------------------------------------------- lowering and emission
def test_the_lowering_keeps_the_async_copy_and_its_wait_and_validates_them():
    low = lower_for("cuda", ring_kernel(), {})
    nodes = list(walk(low.lowered.body))
    assert [n.pending for n in nodes if isinstance(n, Sync)] == [1]  # the wait is the only barrier of the tick
    assert [n.buf for n in nodes if isinstance(n, Store) and n.async_copy] == ["s"]
    assert low.validation.ok and low.barriers.ok


@needs_nvcc
def test_nvcc_compiles_the_ring_for_sm_80_with_cp_async_commit_and_wait_groups_and_sm_75_without():
    source = tc.emit(ring_kernel(), target="cuda", allow_unproved=True)
    ptx = nvcc_check(source, "sm_80")
    assert re.search(r"cp\.async\.ca\.shared\.global \[%r\d+\], \[%rd\d+\], 4, %r\d+;", ptx)  # src-size: zero fill
    assert "cp.async.commit_group;" in ptx and "cp.async.wait_group 1;" in ptx
    assert "cp.async" not in nvcc_check(source, "sm_75")  # no cp.async before sm_80: the copy is synchronous


def test_elements_that_are_not_4_8_or_16_bytes_use_the_plain_copy():
    wide = tc.emit(ring_kernel("f64"), target="cuda", allow_unproved=True)
    assert "tc_cp_async<8>(&" in wide
    narrow = tc.emit(ring_kernel("i16"), target="cuda", allow_unproved=True)
    assert "tc_cp_async<" not in narrow.split("host launcher")[0].split("tc_k0_")[1]  # in the kernel: a plain store
    assert "tc_cp_async_wait<1>();" in narrow  # the wait is still the barrier's


# ----------------------------------------------------------------------------- the emulation
@pytest.mark.parametrize("dtype", ["i32", "f64", "i16"])
def test_the_ring_matches_the_interpreter_on_the_emulation(dtype):
    p = ring_kernel(dtype)
    args, want = ring_inputs(dtype)
    assert np.array_equal(tc.run(p, **args)["Y"], want)
    assert np.array_equal(compile_unproved(p, target="cuda-host")(**args)["Y"], want)
    report = tc.differential(p, target="cuda-host", trials=3, seed=2, allow_unproved=True)
    assert report.agreed and all(t.outcome == "match" for t in report.trials), str(report)


def test_the_ring_matches_for_trip_counts_0_to_9():
    kernel = compile_unproved(ring_kernel(), target="cuda-host")
    for trips in range(10):
        for n in {max(0, T * trips - 3), T * trips}:
            args, want = ring_inputs("i32", rows=2, n=n, seed=trips)
            assert np.array_equal(kernel(**args)["Y"], want), n


@pytest.mark.parametrize("variant", [dict(wait="barrier"), dict(pending=2)], ids=["no wait", "pending 2"])
def test_a_missing_wait_or_one_that_leaves_the_copy_in_flight_reads_the_old_slot_on_the_emulation(variant):
    p = ring_kernel(**variant)
    args, want = ring_inputs("i32")
    assert np.array_equal(tc.run(p, **args)["Y"], want)  # landed at its issue: the program's meaning
    got = compile_unproved(p, target="cuda-host")(**args)["Y"]
    assert not np.array_equal(got, want)


def test_thread_sanitizer_passes_the_ring_and_reports_the_wait_without_its_barrier():
    args, want = ring_inputs("i32")
    clean = compile_unproved(ring_kernel(), target="cuda-host", sanitize=True)
    assert np.array_equal(clean(**args)["Y"], want)
    wait = "tc_cp_async_commit(); tc_cp_async_wait<1>();"
    lines = clean.source.splitlines()
    at = next(k for k, line in enumerate(lines) if line.strip().startswith(wait))
    assert lines[at + 1].strip().startswith("__syncthreads();")
    source = "\n".join(lines[:at + 1] + lines[at + 2:])  # the copies land, nobody waits for the landing threads
    racy = CudaKernel(clean.program, clean.lowered, clean.validation, source,
                      build_executable(source, "cuda-host", True), "cuda-host", True)
    with pytest.raises(SanitizerError, match="reports a data race") as info:
        racy(**args)
    assert "tc_emu::cp_async_wait" in info.value.message  # the landing write is one side of the race


# ----------------------------------------------------------------------------- a plan realized for CUDA
def gemm_plan(interval, offsets, **fields):
    """The GPU GEMM (examples/gemm_gpu.py, ragged: 40 = 2 * 16 + 8) with its stage graph by hand: stage 0 copies
    the A and B tiles, stage 1 (mma) reads them and carries ``acc``; a plan on the cuda latency table."""
    s = gemm_gpu(40)
    lp = the_loop(s.program, "k", "test")
    graph = StageGraph(lp.pipeline.pipeline, "k", (StageInfo(0, "load", "copy"), StageInfo(1, "compute", "mma")),
                       (Edge(0, 1, 0, "value", "a", max_distance=0), Edge(0, 1, 0, "value", "b", max_distance=0),
                        Edge(1, 1, 1, "effect", "acc", "flow", 1)), ("a", "b"))
    return s, graph, ModuloPlan(interval, offsets, target="cuda", **fields)


def gemm_inputs(seed=4):
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal((40, 40)).astype(np.float32) for _ in range(2))
    return dict(A=a, B=b, C=np.zeros((40, 40), np.float32))


@pytest.mark.parametrize("interval, offsets, slots, pending", [(1, (0, 2), 4, 2), (2, (0, 3), 3, 1), (3, (0, 2), 2, 0)])
def test_a_realized_gemm_plan_issues_cp_async_into_rings_and_matches_the_sequential_meaning(interval, offsets, slots,
                                                                                            pending):
    s, graph, plan = gemm_plan(interval, offsets)
    p = realize_async_copies(s.program, "k", graph, plan)
    decls = {d.buf.name: d.buf.shape for d in ir.walk(p.body) if isinstance(d, L.Decl)}
    assert decls["a"][0] == decls["b"][0] == IConst(slots) and not any(".inflight" in b for b in decls)
    assert [w.pending for w in ir.walk(p.body) if isinstance(w, L.AsyncWait)] == [pending]
    assert {c.buf for c in ir.walk(p.body) if isinstance(c, L.AsyncCopy)} == {"a", "b"}
    args = gemm_inputs()
    want = tc.run(s.program, **args)["C"]
    assert np.array_equal(compile_unproved(p, target="cuda-host")(**args)["C"], want)
    assert np.array_equal(run_overlapped(s, {"k": (graph, plan)}, args, model="async")["C"], want)


def test_a_realized_plan_without_its_waits_reads_old_slots_on_the_emulation_as_in_the_async_model():
    s, graph, plan = gemm_plan(1, (0, 2), waits=())
    p = realize_async_copies(s.program, "k", graph, plan)
    assert not any(isinstance(w, L.AsyncWait) for w in ir.walk(p.body))
    args = gemm_inputs()
    want = tc.run(s.program, **args)["C"]
    assert not np.array_equal(compile_unproved(p, target="cuda-host")(**args)["C"], want)
    assert not np.array_equal(run_overlapped(s, {"k": (graph, plan)}, args, model="async")["C"], want)


@needs_nvcc
def test_nvcc_compiles_the_realized_gemm_with_cp_async_and_its_wait_group():
    s, graph, plan = gemm_plan(2, (0, 3))
    ptx = nvcc_check(tc.emit(realize_async_copies(s.program, "k", graph, plan), target="cuda", allow_unproved=True),
                     "sm_80")
    assert ptx.count("cp.async.ca.shared.global") >= 2 and "cp.async.wait_group 1;" in ptx


def test_the_realized_gemm_is_race_free_under_thread_sanitizer():
    s, graph, plan = gemm_plan(2, (0, 3))
    args = gemm_inputs()
    got = compile_unproved(realize_async_copies(s.program, "k", graph, plan), target="cuda-host", sanitize=True)(**args)
    assert np.array_equal(got["C"], tc.run(s.program, **args)["C"])


def test_a_proved_modulo_plan_of_the_gpu_gemm_compiles_to_cp_async_rings_on_cuda_host():
    s = gemm_gpu(40)
    s.modulo("k", interval=2, offsets={"load": 0, "compute": 3})
    assert s.check().ok
    kernel = tc.compile(s, target="cuda-host")
    assert "tc_cp_async<4>(&" in kernel.source and "tc_cp_async_wait<1>();" in kernel.source
    args = gemm_inputs()
    assert np.array_equal(kernel(**args)["C"], tc.run(gemm_gpu(40).program, **args)["C"])
