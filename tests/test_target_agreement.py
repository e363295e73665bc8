"""The checker and the CUDA backend read one model of the hardware (``semantics/bindings.py``,
``semantics/launch.py``): over random GPU-bound schedules (``tilecert.strategies.gpu_schedules``),
a schedule the checker proves is never refused by the backend for a limit or containment
reason, and every such refusal is a disproved / unknown ``containment`` or ``hardware_limits``
obligation. Emission is called directly (it is not gated on the checker here)."""
import os

from hypothesis import HealthCheck, event, given, settings

import pytest

import tilecert as tc
from tilecert import f32
from tilecert.backends import cuda
from tilecert.backends.cuda.errors import CudaUnsupported
from tilecert.checker import Proof
from tilecert.semantics import loopir as L
from tilecert.semantics.bindings import Target
from tilecert.semantics.expand import expand
from tilecert.backends.c.emit import emit_c
from tilecert.lowering import lower
from tilecert import Schedule
from tilecert.lowering.pipeline import lower_for
from tilecert.strategies import gpu_schedules

FULL = os.environ.get("TILECERT_FULL") == "1"
SETTINGS = dict(deadline=None, derandomize=not FULL, suppress_health_check=[HealthCheck.too_slow,
                                                                            HealthCheck.data_too_large,
                                                                            HealthCheck.filter_too_much])
LIMIT_REASONS = ("containment", "hardware_limits")


def _refusal(s: Schedule, report):
    """The backend's refusal of ``s`` (None when it emits CUDA), whatever the checker's verdict."""
    try:
        cuda.emit(s.program, s.sizes, Proof.of(report, "schedule"))
    except CudaUnsupported as e:
        return e
    return None


def _gpu_bound(s: Schedule) -> bool:
    return any(L.binding_kind(lp.binding) in ("grid", "block", "warp", "lane") for lp in L.loops(s.program.body))


@settings(max_examples=600 if FULL else 15, **SETTINGS)
@given(gpu_schedules())
def test_proved_gpu_schedules_are_never_refused_for_limits_and_refusals_are_reported(s):
    report = s.check(replay=False)
    refusal = _refusal(s, report)
    open_ = [r for r in report if r.kind in LIMIT_REASONS and r.status != "proved"]
    event(f"proved: {report.ok}, gpu-bound: {_gpu_bound(s)}")
    event(f"backend: {'emits' if refusal is None else refusal.reason}")
    if report.ok:
        assert refusal is None or refusal.reason not in LIMIT_REASONS, (s.loop_tree(), str(refusal))
    if refusal is not None and refusal.reason in LIMIT_REASONS:
        assert open_, (s.loop_tree(), str(refusal), report.explain())


def _small(s: Schedule) -> bool:
    return all(v <= 40 for v in s.sizes.values())


@settings(max_examples=60 if FULL else 6, **SETTINGS)
@given(gpu_schedules().filter(_small))
def test_proved_gpu_schedules_run_on_the_host_emulation(s):
    """A sample compiled for ``cuda-host`` and run: no launch-geometry error, results equal the interpreter's."""
    if not (s.check(replay=False).ok and _gpu_bound(s)):
        event("not a proved gpu-bound schedule")
        return
    event("compiled for cuda-host")
    report = tc.differential(s, target="cuda-host", trials=1)
    assert report.matched, report


@tc.kernel
def nest_block_warp_thread_vector(Y: tc.Tensor[f32, "N"]):
    for blk in tc.parallel(2, bind="block"):
        for w in blk.parallel(2, bind="warp"):
            for t in w.parallel(32, bind="thread"):
                for v in t.parallel(2, bind="vector"):
                    i = ((blk.index() * 2 + w.index()) * 32 + t.index()) * 2 + v.index()
                    Y.at(i).store(tc.full(f32, (), 1.0))


@tc.kernel
def threads_2d(Y: tc.Tensor[f32, "M", "N"]):
    for blk in tc.parallel(tc.cdiv(Y.shape[0], 4), bind="block"):
        for t in blk.parallel(4, Y.shape[1], bind="thread"):
            Y.at(blk.index() * 4 + t.index(0), t.index(1)).store(tc.full(f32, (), 2.0))


@tc.kernel
def block_4d(Y: tc.Tensor[f32, "N"]):
    for blk in tc.parallel(1, 1, 1, 1, bind="block"):
        Y.at(0).store(tc.full(f32, (), 1.0))


def _bindings(kernel) -> list:
    return [(lp.name, lp.binding) for lp in L.loops(expand(kernel.capture()).body) if lp.binding]


def test_the_readme_nesting_is_accepted_at_capture_and_its_containment_proved():
    """block > warp > thread > vector: a thread inside a warp is a lane, and the checker agrees with capture."""
    assert _bindings(nest_block_warp_thread_vector) == [("blk", "grid0"), ("w", "warp"), ("t", "lane"),
                                                          ("v", "vector")]
    report = tc.check(nest_block_warp_thread_vector, {"N": 256})
    assert report.status("containment") == "proved" and report.status("hardware_limits") == "proved"
    s = tc.schedule(nest_block_warp_thread_vector, N=256)
    assert s.check().ok
    out = tc.differential(s, target="cuda-host", trials=1)
    assert out.matched, out


def test_a_thread_region_outside_warps_takes_block_slots_innermost_first():
    assert _bindings(threads_2d) == [("blk", "grid0"), ("t.0", "block1"), ("t.1", "block0")]
    assert tc.schedule(threads_2d, M=8, N=5).check().ok
    with pytest.raises(tc.CaptureError, match="more axes than"):
        block_4d.capture()


def test_emitters_render_the_target():
    s = tc.schedule(threads_2d, M=8, N=5)
    lp = lower_for("cuda", s.program, s.sizes).lowered
    small = Target(max_threads_per_block=256, max_block=(256, 256, 64), max_grid=(1000, 100, 100), warp_size=32)
    src = cuda.emit_cuda(lp, "/* header */\n", small)
    assert "bx * by * bz > 256LL" in src and "gx > 1000LL" in src and "by > 256LL" in src
    assert "bx * by * bz > 1024LL" in cuda.emit_cuda(lp, "/* header */\n")



@tc.kernel
def core_vector(Y: tc.Tensor[f32, "N", "M"]):
    for c in tc.parallel(Y.shape[0], bind="core"):
        for v in c.parallel(Y.shape[1], bind="vector"):
            Y.at(c.index(), v.index()).store(tc.full(f32, (), 3.0))


def test_the_c_emitter_renders_the_hosts_cores_and_vector_width():
    s = tc.schedule(core_vector, N=4, M=8)
    assert s.check().ok
    lp = lower(s.program, s.sizes)
    default = emit_c(lp)
    assert "#pragma omp parallel for" in default and "num_threads" not in default and "simdlen" not in default
    host = emit_c(lp, Target(cores=4, vector_lanes=8))
    assert "num_threads(4)" in host and "#pragma omp simd simdlen(8)" in host
