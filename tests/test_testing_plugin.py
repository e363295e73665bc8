"""``tilecert.testing``: the assertion helpers fail with the open obligation, its witness and a replayable case
file; the hypothesis decorators hand tests kernel cases and schedules; the pytest plugin is registered through
the ``pytest11`` entry point and its ``--tilecert-failures`` option says where case files go."""
import subprocess
import sys
from importlib.metadata import entry_points

import numpy as np
import pytest

import tilecert as tc
from examples import EXAMPLES
from examples.shift import shift_swapped
from tilecert import testing
from tilecert.checker.verdict import Report, Result, unknown
from tilecert.strategies import KernelCase


@pytest.fixture(autouse=True)
def failures(tmp_path, monkeypatch):
    monkeypatch.setattr(testing, "_failures_dir", tmp_path / "failures")
    return tmp_path / "failures"


def _proved_gemm():
    s = tc.schedule(EXAMPLES["gemm_i32"].kernel, M=6, N=5, K=7)
    s.split("nest.0", 2)
    return s


def _case_file(message):
    line = next(line for line in message.splitlines() if line.startswith("case file: "))
    return line.split(": ", 1)[1]


def test_assert_proved_returns_the_report_of_a_proved_schedule(failures):
    report = testing.assert_proved(_proved_gemm())
    assert report.ok and len(report) > 0 and not failures.exists()


def test_assert_proved_names_the_obligation_the_witness_and_a_replay(failures, capsys):
    with pytest.raises(AssertionError) as info:
        testing.assert_proved(shift_swapped())
    message = str(info.value)
    assert "1 disproved" in message and "op 0: swap(outer='r', inner='c'): dependence DISPROVED" in message
    assert "cell: B[0, 1]" in message and "replay: CONFIRMED" in message
    path = _case_file(message)
    assert path.startswith(str(failures)) and f"python -m tilecert.testing {path}" in message
    assert testing.main([path]) == 1  # the case file checks again to the same verdict
    assert "dependence: DISPROVED" in capsys.readouterr().out


def test_an_unknown_obligation_fails_assert_proved(monkeypatch):
    report = Report([Result("coverage", "op 0: fuse(...)", "tau is a bijection", unknown("z3 timeout"))])
    monkeypatch.setattr(tc, "check", lambda *a, **k: report)
    with pytest.raises(AssertionError, match="coverage UNKNOWN(.|\n)*reason: z3 timeout"):
        testing.assert_proved(_proved_gemm())


def test_assert_matches_passes_compiled_c_and_catches_a_wrong_backend():
    s = _proved_gemm()
    assert testing.assert_matches(s, trials=2).matched
    compiled = tc.compile(s)

    def off_by_one(**arrays):
        out = compiled(**arrays)
        return {name: a + np.int32(1) for name, a in out.items()}

    with pytest.raises(AssertionError) as info:
        testing.assert_matches(s, backend=off_by_one, trials=2, seed=3)
    message = str(info.value)
    assert "does not match" in message and "mismatch at C[" in message and "broken link: lowering" in message
    assert "with your backend: tc.differential(s, backend=off_by_one, trials=2, seed=3" in message


def test_assert_matches_fails_an_unproved_schedule_even_when_trials_agree():
    s = tc.schedule(EXAMPLES["gemm_i32"].kernel, M=6, N=5, K=7)
    s.bind("nest.0", "core")  # proved; now a schedule the checker cannot prove: a race on C across cores
    s.bind("acc.mma.K", "core")
    with pytest.raises(AssertionError, match="NOT PROVED"):
        testing.assert_matches(s, trials=1)


def test_given_kernels_hands_the_test_kernel_cases():
    seen = []

    @testing.given_kernels(max_size=4, max_examples=3)
    def check_case(case):
        assert isinstance(case, KernelCase) and all(1 <= n <= 4 for n in case.sizes.values())
        out = tc.run(case.kernel, **case.inputs())
        assert set(case.outputs) <= set(out)
        seen.append(case.source)

    check_case()
    assert len(seen) == 3


def test_given_schedules_of_a_kernel_and_of_random_kernels():
    kernel = EXAMPLES["gemm_i32"].kernel
    seen = []

    @testing.given_schedules(kernel, sizes={"M": 4, "N": 3, "K": 5}, max_ops=2, max_examples=3)
    def of_gemm(s):
        assert s.kernel is kernel and s.sizes == {"M": 4, "N": 3, "K": 5} and len(s.history) <= 2
        seen.append(s)

    @testing.given_schedules(max_ops=1, max_examples=2)
    def of_random(s):
        assert isinstance(s, tc.Schedule) and set(s.sizes) == set(s.kernel.size_names)
        seen.append(s)

    of_gemm()
    of_random()
    assert len(seen) == 5


def test_the_plugin_is_registered_and_its_option_places_case_files(tmp_path):
    assert "tilecert.testing" in [e.value for e in entry_points(group="pytest11") if e.name == "tilecert"]
    (tmp_path / "test_user.py").write_text(
        "import tilecert as tc\nfrom examples.shift import shift_swapped\n\n\n"
        "def test_swap():\n    tc.testing.assert_proved(shift_swapped())\n")
    out = tmp_path / "cases"
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(tmp_path),
                           f"--tilecert-failures={out}", "--rootdir", str(tmp_path)],
                          capture_output=True, text=True, timeout=600,
                          env={"PYTHONPATH": str(testing.Path(__file__).resolve().parents[1]),
                               "PATH": "/usr/bin:/bin"})
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"tilecert: failing assertions write case files to {out}" in done.stdout
    assert "dependence DISPROVED" in done.stdout and len(list(out.glob("shift-*.json"))) == 1


def test_an_unwritable_failures_folder_still_fails_with_the_verdict(tmp_path, monkeypatch):
    (tmp_path / "afile").write_text("")
    monkeypatch.setattr(testing, "_failures_dir", tmp_path / "afile" / "sub")
    with pytest.raises(AssertionError, match="dependence DISPROVED(.|\n)*case file: not written"):
        testing.assert_proved(shift_swapped())
