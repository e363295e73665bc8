"""The barrier pass (lowering/barriers.py) and the lowering pipeline (lowering/pipeline.py).

The pass rewrites each kernel as the threads of a block run it and places its barriers; its
output is decided by the checker (noninterference per barrier phase, barrier_uniform) and
compared with the input on the interpreter; the CUDA emitter renders exactly its barriers.
Illegal twins: the output with one placed barrier removed is disproved by noninterference
(the witness replays), and a placement under thread-divergent control by barrier_uniform.
"""
from __future__ import annotations

import dataclasses
import functools
import re

import os

import pytest
from hypothesis import HealthCheck, event, given, settings

import tilecert as tc
from examples.gemm_gpu import gemm_gpu
from tilecert.backends.cuda import CudaUnsupported, cases
from tilecert.backends.cuda.emit import emit_cuda
from tilecert.checker import gate
from tilecert.checker.replay import replay_transform
from tilecert.lowering import lower
from tilecert.lowering.barriers import place_barriers
from tilecert.lowering.lower import bind_sizes
from tilecert.lowering.program import Store
from tilecert.lowering import ValidationError, pipeline
from tilecert.lowering.pipeline import lower_for
from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.bindings import Target
from tilecert.semantics.index import IBin, IConst, ISize, IVar, ibin
from tilecert.strategies import gpu_schedules
from tests.test_lowering import replace_nodes

emit = functools.partial(tc.emit, allow_unproved=True)
FULL = os.environ.get("TILECERT_FULL") == "1"
GEMM_SIZES = {"M": 32, "N": 32, "K": 32}


def v(var):
    return IVar(var, 0)


def blk(*ops):
    return ir.Block((), tuple(ops))


def loop(var, name, extent, binding, *body):
    return L.Loop(var, name, IConst(extent), "parallel", blk(*body), binding)


def tensor(name, written):
    return ir.TensorDecl(name, "i32", (ir.Dim(0, "N"),), (ISize("N"),), written)


def two_phases(cond=None) -> ir.Program:
    """A block of 2 x 4 threads: each row loads a shared row, then reads it reversed; with ``cond`` both
    phases sit under that guard (inside the row loop)."""
    x, y = v(2), v(1)
    row = ibin("add", ibin("mul", y, IConst(4)), x)
    phases = [loop(2, "x", 4, "block0", L.Assign("s", (y, x), L.Ld("Y", (row,), "i32"))),
              loop(3, "x2", 4, "block0", L.Assign("Y", (ibin("add", ibin("mul", y, IConst(4)), v(3)),),
                                                  L.Ld("s", (y, ibin("sub", IConst(3), v(3))), "i32")))]
    body = blk(*phases) if cond is None else blk(L.If(cond, blk(*phases)))
    return ir.Program("phases", ("N",), (tensor("Y", True),), blk(loop(0, "g", 1, "grid0",
                      L.Decl(L.Buffer("s", "i32", (IConst(2), IConst(4)), "shared")),
                      L.Loop(1, "y", IConst(2), "parallel", body, "block1"))))


def barriers(block: ir.Block) -> list[L.Barrier]:
    return [op for op in ir.walk(block) if isinstance(op, L.Barrier)]


def without_barrier(p: ir.Program, k: int) -> ir.Program:
    """``p`` with its ``k``-th barrier (in program order) removed."""
    seen = [-1]

    def strip(block: ir.Block) -> ir.Block:
        ops = []
        for op in block.ops:
            if isinstance(op, L.Barrier):
                seen[0] += 1
                if seen[0] == k:
                    continue
            ops.append(dataclasses.replace(op, body=strip(op.body)) if isinstance(op, (L.Loop, L.If)) else op)
        return ir.Block(block.args, tuple(ops), block.yields)

    return dataclasses.replace(p, body=strip(p.body))


def placed(p: ir.Program, sizes) -> ir.Program:
    return place_barriers(bind_sizes(p, sizes))


def result(report, kind):
    return next(r for r in report if r.kind == kind)


# ----------------------------------------------------------------------------- the legal output
def test_the_gpu_gemm_with_its_placed_barriers_is_proved_and_computes_like_the_schedule():
    s = gemm_gpu(32)
    out = placed(s.program, s.sizes)
    assert len(barriers(out.body)) == 2 and not barriers(s.program.body)  # after the loads, at the end of each k
    report = tc.check(out, s.sizes)
    assert report.ok, report.explain()
    agree = replay_transform(s.program, out, s.sizes)
    assert agree.startswith("not confirmed"), agree


@pytest.mark.parametrize("name", sorted(cases.PROGRAMS))
def test_the_hand_built_kernels_keep_their_meaning_and_their_stated_barriers(name):
    p = cases.PROGRAMS[name]("ok")
    sizes = {n: 40 for n in p.sizes}
    out = placed(p, {})
    assert len(barriers(out.body)) >= len(barriers(p.body))
    report = tc.check(out, sizes)
    for kind in ("noninterference", "barrier_uniform"):
        assert result(report, kind).verdict.proved, report.explain()
    agree = replay_transform(p, out, sizes)
    assert agree.startswith("not confirmed"), agree


def _small(s) -> bool:
    return all(v <= 40 for v in s.sizes.values())


@settings(max_examples=200 if FULL else 8, deadline=None, derandomize=not FULL,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
@given(gpu_schedules().filter(_small))
def test_random_gpu_schedules_keep_their_placement_obligations_and_their_meaning(s):
    """Where the schedule's program proves noninterference and barrier_uniform, so does the pass's output,
    and the interpreter computes the same tensors from both (random integer inputs, three orders)."""
    try:
        out = placed(s.program, s.sizes)
    except tc.TilecertError as e:  # a kernel the pass refuses: a typed error with a hint
        assert e.hint
        event("refused")
        return
    before = tc.check(s.program, s.sizes, replay=False)
    after = tc.check(out, s.sizes, replay=False)
    for kind in ("noninterference", "barrier_uniform"):
        if result(before, kind).verdict.proved:
            assert result(after, kind).verdict.proved, (kind, s.loop_tree(), after.explain())
    if before.ok:
        event("proved schedule")
        agree = replay_transform(s.program, out, s.sizes)
        assert agree.startswith("not confirmed"), agree


def test_a_program_without_gpu_bindings_is_left_as_it_is():
    p = gemm_gpu(32).programs[0]  # the schedule's program before any op: no binding
    assert not any(lp.binding for lp in L.loops(p.body))
    assert place_barriers(p) is p


# ----------------------------------------------------------------------------- illegal twins
@pytest.mark.parametrize("k", [0, 1])  # before the product, at the end of each k (no fill: each cell written first)
def test_a_placed_barrier_removed_is_disproved_by_noninterference_with_a_witness_that_replays(k):
    s = gemm_gpu(32)
    out = placed(s.program, s.sizes)
    twin = without_barrier(out, k)
    report = tc.check(twin, s.sizes)
    ni = result(report, "noninterference")
    assert ni.status == "disproved", report.explain()
    assert ni.verdict.witness.replay.startswith("CONFIRMED"), ni.verdict.witness.replay
    assert "NoninterferenceError" in ni.verdict.witness.replay
    assert result(report, "barrier_uniform").verdict.proved


def test_a_barrier_the_phases_need_under_a_thread_dependent_guard_is_disproved_by_barrier_uniform():
    legal = placed(two_phases(), {})
    assert tc.check(legal, {"N": 8}).ok
    divergent = placed(two_phases(IBin("eq", v(1), IConst(0))), {})
    report = tc.check(divergent, {"N": 8})
    bu = result(report, "barrier_uniform")
    assert bu.status == "disproved", report.explain()
    assert bu.verdict.witness.replay.startswith("CONFIRMED") and "barrier" in bu.verdict.witness.replay
    assert tc.check(two_phases(IBin("eq", v(1), IConst(0))), {"N": 8}).ok  # the program itself is legal
    with pytest.raises(CudaUnsupported, match="disprove barrier_uniform") as info:
        emit(two_phases(IBin("eq", v(1), IConst(0))), target="cuda")
    assert info.value.hint


# ----------------------------------------------------------------------------- the pipeline and the emitter
def test_the_pipeline_places_barriers_only_for_cuda_and_validates_what_it_lowers():
    s = gemm_gpu(32)
    c = lower_for("c", s.program, s.sizes)
    assert c.barriers is None and not barriers(c.program.body) and c.validation.ok
    cuda = lower_for("cuda", s.program, s.sizes)
    assert cuda.barriers.ok and cuda.validation.ok
    assert len(barriers(cuda.program.body)) == sum(1 for _ in re.finditer(r"Sync\(", repr(cuda.lowered.body)))


def test_the_pipeline_checks_a_placed_program_once_per_text_sizes_and_target_and_a_changed_one_again(monkeypatch):
    calls, validated = [], []
    real_check, real_validate = pipeline.check_program, pipeline.validate

    def counting(program, sizes=None, **kw):
        calls.append((program.name, dict(sizes or {})))
        return real_check(program, sizes, **kw)

    def validating(p, lp, sizes=None):
        validated.append(p.name)
        return real_validate(p, lp, sizes)

    monkeypatch.setattr(pipeline, "check_program", counting)
    monkeypatch.setattr(pipeline, "validate", validating)
    gate._CACHE.clear()
    first = lower_for("cuda", two_phases(), {"N": 8})
    again = lower_for("cuda-host", two_phases(), {"N": 8})  # another object, the same placed text: cached
    assert first.barriers.ok and again.barriers is first.barriers and calls == [("phases", {"N": 8})]
    assert again.validation is first.validation and first.validation.ok and validated == ["phases"]
    c = lower_for("c", two_phases(), {"N": 8})  # no threads: its own lowering, validated on its own
    assert c.barriers is None and c.validation.ok and len(validated) == 2 and len(calls) == 1
    assert lower_for("cuda", two_phases(), {"N": 9}).barriers.ok and calls[-1] == ("phases", {"N": 9})
    divergent = lower_for("cuda", two_phases(IBin("eq", v(1), IConst(0))), {"N": 8})  # a changed program
    assert len(calls) == 3 and result(divergent.barriers, "barrier_uniform").status == "disproved"
    renamed = lower_for("cuda", dataclasses.replace(two_phases(), name="other"), {"N": 8})  # the same digest
    assert len(calls) == 4 and {r.subject for r in renamed.barriers} == {"kernel other as its threads run it"}
    assert {r.subject for r in renamed.validation} == {"lowering of other"} and len(validated) == 5
    small = lower_for("cuda", two_phases(), {"N": 8}, Target(max_shared_bytes=16))  # the 32-byte row is too big
    assert len(calls) == 5 and result(small.barriers, "hardware_limits").status == "disproved"
    assert lower_for("cuda", two_phases(), {"N": 8}).barriers is first.barriers and len(calls) == 5
    real_lower = pipeline.lower  # a lowering that writes every cell twice: its own validation refuses it
    monkeypatch.setattr(pipeline, "lower", lambda p, sizes, threaded: dataclasses.replace(
        real_lower(p, sizes, threaded), body=replace_nodes(real_lower(p, sizes, threaded).body,
                                                           lambda n: [n, n] if isinstance(n, Store) else [n])))
    with pytest.raises(ValidationError, match="coverage disproved"):
        lower_for("cuda", two_phases(), {"N": 8})


def test_the_cuda_emitter_renders_exactly_the_programs_barriers():
    for p, sizes in ((gemm_gpu(32).program, GEMM_SIZES), (cases.tree_reduction("ok"), {}),
                     (cases.warp_reduction("ok"), {})):
        low = lower_for("cuda", p, sizes)
        src = emit_cuda(low.lowered, "")
        kernels = src[:src.index("/* host launcher")]
        want = [b.scope for b in barriers(low.program.body)]
        assert kernels.count("__syncthreads();") == want.count("block")
        assert kernels.count("__syncwarp();") == want.count("warp")


def test_the_emitter_refuses_block_level_statements_the_barrier_pass_did_not_place():
    s = gemm_gpu(32)
    with pytest.raises(CudaUnsupported, match="outside its thread loops") as info:
        emit_cuda(lower(s.program, s.sizes, threads=True), "")
    assert "lower_for" in info.value.hint
