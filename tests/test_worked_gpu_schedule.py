"""The README's worked schedule (examples/gemm_gpu.py): GEMM tiled and bound for a GPU shape."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

import tilecert as tc
from examples.gemm_gpu import gemm_gpu
from tilecert.backends.cuda import nvcc_check


def test_the_worked_schedule_binds_tiles_to_blocks_and_elements_to_threads():
    s = gemm_gpu(32)
    bound = {lp.name: lp.binding for lp in s.loops() if lp.binding}
    assert bound["nest.0"] == "grid1" and bound["nest.1"] == "grid0"
    assert bound["acc.mma.p1"] == "block1" and bound["acc.mma.p0"] == "block0"
    assert "acc.mma.K" not in bound and "k" not in bound  # the contraction and the K pipeline stay serial
    rng = np.random.default_rng(0)
    a, b = (rng.integers(-3, 4, (32, 32)).astype(np.float32) for _ in range(2))
    assert np.array_equal(s.run(A=a, B=b, C=np.zeros((32, 32), np.float32))["C"], a @ b)


def test_the_worked_schedule_is_proved_and_its_cuda_matches_on_the_host_emulation():
    s = gemm_gpu(32)
    report = s.check()
    assert report.ok, report.explain()
    assert tc.differential(s, target="cuda-host", trials=2).matched


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_the_worked_schedule_compiles_with_nvcc_for_sm_90():
    ptx = nvcc_check(tc.emit(gemm_gpu(32), target="cuda"))
    assert ".entry" in ptx
