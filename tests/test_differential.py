"""The differential harness: interpreter against compiled C on every example, every dtype, and a
hypothesis campaign of random kernels with random structural schedules."""
import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import tilecert as tc
from examples import EXAMPLES
from tilecert import bf16, bool_, f16, f32, f64, i8, i32, i64, u8
from tilecert import strategies
from tilecert.backends.differential import chain_length, compare
from tilecert.backends.fuzz import FuzzCase, campaign, fuzz_cases, replay
from tilecert.cli import main

FULL = os.environ.get("TILECERT_FULL") == "1"


@tc.kernel
def int_ops(A: tc.Tensor[i32, "N"], B: tc.Tensor[i32, "N"], Q: tc.Tensor[i32, "N"], R: tc.Tensor[i64, "N"],
            W: tc.Tensor[i8, "N"], U: tc.Tensor[u8, "N"], G: tc.Tensor[bool_, "N"], b: int = 4):
    N = A.shape[0]
    for p in tc.parallel(tc.cdiv(N, b)):
        n0 = p.index() * b
        a = A.tile((n0,), (b,)).load()
        x = B.tile((n0,), (b,)).load()
        d = tc.where(x == 0, 7, x)
        Q.tile((n0,), (b,)).store(a // d + tc.maximum(a, x) * 3 - abs(x) + tc.minimum(-a, x))
        w = tc.cast(a, i64) * 3000000 * tc.cast(x, i64)
        R.tile((n0,), (b,)).store(w % tc.cast(d, i64) + w * w)  # wraps
        W.tile((n0,), (b,)).store(tc.cast(a * x, i8) + tc.cast(x, i8))
        U.tile((n0,), (b,)).store(tc.cast(a, u8) * tc.cast(x, u8) - tc.cast(d, u8))
        G.tile((n0,), (b,)).store((a < x) & ~(a == 3) | (x >= 5))


@tc.kernel
def float_ops(X: tc.Tensor[f32, "N"], H: tc.Tensor[f16, "N"], Bf: tc.Tensor[bf16, "N"], D: tc.Tensor[f64, "N"],
              I: tc.Tensor[i32, "N"], J: tc.Tensor[i8, "N"], b: int = 4):
    N = X.shape[0]
    for p in tc.parallel(tc.cdiv(N, b)):
        n0 = p.index() * b
        x = X.tile((n0,), (b,)).load()
        h = tc.cast(x, f16)
        H.tile((n0,), (b,)).store(h * h + h / (abs(h) + 1.0) - tc.sqrt(abs(h)) + tc.exp(h) + tc.maximum(h, 0.5))
        z = tc.cast(x, bf16)
        Bf.tile((n0,), (b,)).store(z * 3.0 + z / 7.0 + tc.tanh(z) - tc.log(abs(z) + 1.0))
        d = tc.cast(x, f64)
        D.tile((n0,), (b,)).store(d * d * 1e10 + tc.exp(d) + tc.minimum(d, -d))
        I.tile((n0,), (b,)).store(tc.cast(x * 1e9, i32) + tc.cast(x * 100.0, i32))  # float -> int wraps
        J.tile((n0,), (b,)).store(tc.cast(x * 300.0, i8))


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_example_matches_unscheduled(name):
    report = tc.differential(EXAMPLES[name].kernel, trials=2, seed=3)
    assert report.matched, str(report)
    assert {t.outcome for t in report.trials} <= {"match", "both rejected"}


@pytest.mark.parametrize("name", ["gemm", "gemm_i32", "all_regions", "layernorm"])
def test_examples_match_with_structural_schedules(name):
    k = EXAMPLES[name].kernel
    s = tc.schedule(k, **{n: v for n, v in dict(M=13, N=11, K=10).items() if n in k.size_names})
    loops = [lp.name for lp in s.loops() if lp.depth == 0]
    s.split(loops[0], 2)
    s.bind(loops[0] + ".o", "grid0")
    report = tc.differential(s, trials=2)
    assert report.matched, str(report)


@pytest.mark.parametrize("kernel", [int_ops, float_ops])
def test_every_dtype_matches(kernel):
    report = tc.differential(kernel, trials=3, sizes={"N": 23})
    assert report.matched, str(report)


def test_sanitizer_mode_runs_the_same_comparison():
    s = tc.schedule(EXAMPLES["gemm"].kernel, M=9, N=7, K=5)
    s.bind("nest.0", "grid0")
    report = tc.differential(s, trials=1, sanitize=True)
    assert report.matched and report.target == "c (sanitized)", str(report)
    assert tc.differential(int_ops, trials=1, sizes={"N": 9}, sanitize=True).matched


def test_a_zero_divisor_is_rejected_by_both_sides():
    from tests.test_c_backend import divide
    report = tc.differential(divide, trials=4, sizes={"N": 400})  # 1000-wide ints: zeros are likely in 400
    assert report.matched
    assert any(t.outcome == "both rejected" for t in report.trials), [str(t) for t in report.trials]


def test_mismatches_name_the_first_differing_index_and_both_values():
    interp = np.zeros((3, 4), np.float32)
    backend = interp.copy()
    backend[1, 2] = 1e-3
    backend[2, 0] = 5.0
    bad = compare("C", "f32", interp, backend, chain=10)
    assert bad.index == (1, 2) and bad.interp == 0.0 and bad.backend == pytest.approx(1e-3)
    assert compare("C", "f32", interp + 1, interp + 1 + 1e-7, chain=1) is None  # within 4 * eps * 9 * 2
    ints = np.arange(6, dtype=np.int32)
    assert compare("Q", "i32", ints, ints + (ints == 5), chain=1).index == (5,)
    nan = np.array([np.nan, np.inf], np.float32)
    assert compare("X", "f32", nan, nan.copy(), chain=1) is None


def test_tolerance_grows_with_the_reduction_length():
    s = tc.schedule(EXAMPLES["gemm"].kernel, bk=7)
    assert chain_length(s.program, {"M": 4, "N": 4, "K": 70}) == 70  # 10 k tiles x 7 per tile
    assert chain_length(tc.schedule(EXAMPLES["transpose"].kernel).program, {"M": 3, "N": 3}) == 1


def _campaign_cases():
    return fuzz_cases(strategies.kernels(max_size=7), strategies.schedules, max_ops=4)


def _check(s, **kw):
    return tc.differential(s, **kw)


@settings(max_examples=200 if FULL else 10, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(_campaign_cases())
def test_random_kernels_with_random_schedules_match(case):
    report = replay(case, _check, trials=1)
    assert not report.failed, case.to_json(report)


@pytest.mark.slow
def test_longer_campaign_writes_replayable_failures(tmp_path):
    results = []
    campaign(_campaign_cases(), 60 if FULL else 6, 11, lambda c: replay(c, _check),
             tmp_path, lambda n, case, report, path: results.append((report, path)))
    assert results and not [r for r, _ in results if r.failed]


def test_fuzz_case_files_replay_through_the_cli(tmp_path, capsys):
    s = tc.schedule(EXAMPLES["gemm_i32"].kernel, M=5, N=6, K=7)
    s.split("nest.0", 2)
    fc = FuzzCase(tc.dump(tc.capture(EXAMPLES["gemm_i32"].kernel)), s.to_json(), seed=4, kernel="gemm_i32")
    path = tmp_path / "case.json"
    path.write_text(fc.to_json())
    back = FuzzCase.from_json(path.read_text())
    assert (back.program, back.seed, back.kernel, back.source) == (fc.program, fc.seed, fc.kernel, None)
    assert json.loads(back.schedule) == json.loads(fc.schedule)
    assert main(["diff", str(path), "--trials", "2"]) == 0
    assert "MATCH" in capsys.readouterr().out
    path.write_text(json.dumps({"format": "something else"}))
    assert main(["diff", str(path)]) == 2


def test_cli_emit_diff_and_fuzz(tmp_path, capsys):
    gemm_file = EXAMPLES["gemm"].kernel.fn.__code__.co_filename
    assert main(["emit", gemm_file, "--size", "M=8", "--size", "N=8", "--size", "K=8"]) == 0
    assert "void tc_kernel(" in capsys.readouterr().out
    assert main(["diff", gemm_file, "--trials", "1"]) == 0
    assert main(["diff", gemm_file, "--target", "opencl"]) == 2
    assert main(["fuzz", "--cases", "2", "--out", str(tmp_path / "f")]) == 0
    assert "[2/2]" in capsys.readouterr().out


def test_sizes_that_no_tensor_carries_are_drawn_and_passed_to_both_sides():
    from test_checker_programs import accum, lit, loop, program, tensor, v

    # A[i] += 1 for i < N, repeated S times: S is a size parameter that no tensor shape carries
    p = program("repeat", ("N", "S"), [tensor("A", ("N",))],
                loop(0, "s", "S", loop(1, "i", "N", accum("A", (v(1),), lit(1)), kind="parallel")))
    report = tc.differential(p, target="c", trials=3, seed=1)
    assert report.matched, str(report)
    assert all("S" in t.sizes for t in report.trials)
