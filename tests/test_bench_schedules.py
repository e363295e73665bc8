"""The benchmark's stage-packed GEMM schedule (``benchmarks/gemm_c.staged_schedule``) at a small size: proved, B
packed once before the routine, and bitwise equal on C to the unstaged ``best_schedule`` and to an independent
float32 reference in the schedules' order (K ascending, each product rounded, then added). No timing."""
from __future__ import annotations

import numpy as np
import pytest

import tilecert as tc
from benchmarks.gemm_c import best_schedule, staged_schedule
from tilecert.semantics import loopir as L

N = 96  # one ragged 128 x 256 tile and one ragged 256-deep panel: every edge guard is live


@pytest.fixture(scope="module")
def kernels() -> tuple[tc.Schedule, object, object]:
    s = staged_schedule(N)
    return s, tc.compile(s), tc.compile(best_schedule(N))


def test_staged_schedule_is_proved_and_packs_b_once(kernels):
    s, _, _ = kernels
    report = s.check()
    assert report.ok, report
    first = s.program.body.ops[0]
    assert isinstance(first, L.Decl) and first.buf.name == "B.packed" and first.buf.scope == "constant"


def test_staged_schedule_is_bitwise_the_unstaged_one_on_c(kernels):
    _, staged, plain = kernels
    rng = np.random.default_rng(7)
    for _ in range(2):  # the second B is packed anew (a new input identity), not served from the first pack
        a, b = rng.standard_normal((N, N)).astype(np.float32), rng.standard_normal((N, N)).astype(np.float32)
        want = np.zeros((N, N), np.float32)
        for j in range(N):
            want = want + a[:, j:j + 1] * b[j:j + 1, :]
        got = staged(A=a, B=b, C=np.zeros((N, N), np.float32))["C"]
        assert np.array_equal(got, plain(A=a, B=b, C=np.zeros((N, N), np.float32))["C"])
        assert np.array_equal(got, want)


def test_at_dividing_sizes_the_kernel_reads_b_from_the_pack_and_copies_only_a():
    n = 256  # two 128-row tiles of all 256 columns, one 256-deep panel: no edge guard, so the B tile copy is elided
    staged = tc.compile(staged_schedule(n))
    body = staged.source[staged.source.index("void tc_kernel("):]
    assert "local b: read from pack B.packed" in body and "b.load.K" not in body and "a.load.K" in body
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)
    got = staged(A=a, B=b, C=np.zeros((n, n), np.float32))["C"]
    assert np.array_equal(got, tc.compile(best_schedule(n))(A=a, B=b, C=np.zeros((n, n), np.float32))["C"])
