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
from tilecert.backends.oracle import draw_inputs, oracle_for
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
    s = tc.schedule(EXAMPLES["gemm"].kernel, M=3, N=4, K=5)
    arrays = draw_inputs(np.random.default_rng(0), s.program, {"M": 3, "N": 4, "K": 5}, edge=False)
    oracle = oracle_for(s.program, {"M": 3, "N": 4, "K": 5}, arrays)
    interp = s.run(**arrays)["C"]
    backend = interp.copy()
    backend[1, 2] += 1.0
    backend[2, 0] = 5.0
    bad = oracle.compare("C", interp, backend)
    assert bad.index == (1, 2) and bad.interp == interp[1, 2] and bad.backend == backend[1, 2]
    ints = np.arange(6, dtype=np.int32)
    p = tc.schedule(int_ops, N=6).program
    q = oracle_for(p, {"N": 6}, draw_inputs(np.random.default_rng(0), p, {"N": 6}, edge=False))
    assert q.compare("Q", ints, ints + (ints == 5)).index == (5,)
    assert q.compare("Q", ints, ints.copy()) is None


def test_tolerance_grows_with_the_reduction_length():
    s = tc.schedule(EXAMPLES["gemm"].kernel, bk=7)
    rng = np.random.default_rng(1)
    short, long = ({"M": 4, "N": 4, "K": k} for k in (7, 70))
    ones = {name: np.ones_like(a) for name, a in draw_inputs(rng, s.program, short, edge=False).items()}
    many = {name: np.ones_like(a) for name, a in draw_inputs(rng, s.program, long, edge=False).items()}
    t7, t70 = (oracle_for(s.program, z, a).bounds["C"] for z, a in ((short, ones), (long, many)))
    # all-ones inputs: S = K and L = K + 1 additions and products, so T grows like K^2
    assert np.allclose(t7, 2.0**-24 * 8 * 7 + 8 * 2.0**-149) and np.allclose(t70, 2.0**-24 * 71 * 70 + 71 * 2.0**-149)
    p = tc.schedule(EXAMPLES["transpose"].kernel).program
    bitwise = oracle_for(p, {"M": 3, "N": 3}, draw_inputs(rng, p, {"M": 3, "N": 3}, edge=False))
    assert not bitwise.bounds[p.outputs[0]].any()  # no arithmetic: compared bitwise


def _campaign_cases():
    return fuzz_cases(strategies.kernels(max_size=7), strategies.schedules, max_ops=4)


def _check(s, **kw):
    """A campaign case's differential, the gate opened explicitly: random schedules need not be proved."""
    return tc.differential(s, allow_unproved=True, **kw)


def _wrong(report):
    """A proved case that does not agree with the specification. An unproved one is run but not judged: a
    racy schedule's compiled result depends on timing, and its scheduled program runs bound loops in turn."""
    return report.proved and report.failed


@settings(max_examples=200 if FULL else 10, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(_campaign_cases())
def test_random_kernels_with_random_schedules_match(case):
    report = replay(case, _check, trials=1)
    assert not _wrong(report), case.to_json(report)


@pytest.mark.slow
def test_longer_campaign_writes_replayable_failures(tmp_path):
    results = []
    campaign(_campaign_cases(), 60 if FULL else 6, 11, lambda c: replay(c, _check),
             tmp_path, lambda n, case, report, path: results.append((report, path)))
    assert results and not [r for r, _ in results if _wrong(r)]


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


# ----------------------------------------------------------------------------- three-way comparison, mutant backends
def _proved_gemm():
    s = tc.schedule(EXAMPLES["gemm_i32"].kernel, M=6, N=5, K=9)
    s.split("nest.0", 2)
    s.bind("nest.0.o", "grid0")
    return s


def _mutants(k):
    def one_cell_off(**a):
        out = k(**a)
        out["C"][-1, -1] += 1
        return out

    def negated(**a):
        return {"C": -k(**a)["C"]}

    def untouched(**a):  # never runs the kernel: the output is the input
        return {"C": a["C"].copy()}

    def last_row_dropped(**a):
        out = k(**a)
        out["C"][-1] = a["C"][-1]
        return out

    def rejects(**a):
        raise tc.ExecutionError("refused by this backend", hint="none")

    return [one_cell_off, negated, untouched, last_row_dropped, rejects]


def test_mutant_backends_are_caught_and_blamed_on_the_lowering():
    s = _proved_gemm()
    k = tc.compile(s)
    assert tc.differential(s, backend=k, trials=3).matched  # the compiled kernel itself, as a callable
    numpy_backend = lambda A, B, C: {"C": (A.astype(np.int64) @ B).astype(np.int32)}  # noqa: E731
    report = tc.differential(s, backend=numpy_backend, trials=3)
    assert report.matched and report.target == "backend <lambda>", str(report)
    for mutant in _mutants(k):
        report = tc.differential(s, backend=mutant, trials=3)
        assert report.failed and not report.matched and not report.agreed, mutant.__name__
        assert report.broken_links == ("lowering",), (mutant.__name__, str(report))
        first = report.trials[0]
        if mutant.__name__ == "rejects":
            assert first.outcome == "backend error" and "only the backend raises" in first.broken[0].detail
        else:
            assert first.outcome == "mismatch" and first.mismatch.labels == ("spec", "backend")
            assert first.broken[0].mismatch.labels == ("scheduled", "backend")
    with pytest.raises(tc.InputError, match="backend must be callable"):
        tc.differential(s, backend="c")


def test_trials_vary_the_order_of_both_interpreters():
    report = tc.differential(_proved_gemm(), trials=5)
    assert [t.order for t in report.trials] == ["canonical", "reverse", "shuffle", "canonical", "reverse"]
    assert report.matched, str(report)


def test_the_shift_swap_breaks_the_transform_link_whatever_the_backend():
    from examples.shift import shift, shift_swapped
    s = shift_swapped()
    spec = lambda **a: tc.run(shift, **a)  # noqa: E731  a backend that computes the specification
    report = tc.differential(s, backend=spec, trials=3, allow_unproved=True)
    assert report.agreed and not report.matched and report.label == "UNPROVED"  # agrees, yet no certificate
    assert report.broken_links == ("transform", "lowering")
    report = tc.differential(s, trials=3, allow_unproved=True)  # the C backend implements the swapped order
    assert report.failed and report.broken_links == ("transform",)
    cell = report.trials[0].broken[0].mismatch
    assert cell.tensor == "B" and cell.labels == ("spec", "scheduled") and cell.interp != cell.backend
