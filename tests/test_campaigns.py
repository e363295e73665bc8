"""Fuzz campaigns: cases are pure functions of (campaign seed, index), so a campaign on a dask LocalCluster of two
worker processes merges to exactly the serial run's results, failing-case files included."""
import dataclasses
import hashlib

import cloudpickle
import pytest

from tilecert import strategies
from tilecert.backends.campaigns import DifferentialRun, dask_executor
from tilecert.backends.differential import Trial
from tilecert.backends.fuzz import FuzzCase, campaign, case_seed, draw_case, fuzz_cases, in_process
from tilecert.cli import main

cloudpickle.register_pickle_by_value(__import__(__name__))  # the workers cannot import this test module

CASES = fuzz_cases(strategies.kernels(max_size=5), strategies.schedules, max_ops=3)


def _judge(case: FuzzCase):
    """The real differential of the case (gate open), plus a planted failing trial on every case whose digest
    is even, so some cases fail and are written out (trial seeds lean to boundary values, mostly odd)."""
    report = DifferentialRun(trials=1, allow_unproved=True)(case)
    if hashlib.sha256((case.program + case.schedule).encode()).digest()[0] % 2 == 0:
        report = dataclasses.replace(report, trials=report.trials + (Trial(case.seed, {}, "mismatch"),))
    return report


def _merged(results):
    return [(r.index, r.case, r.outcome, str(r.report)) for r in results]


def test_case_seeds_are_distinct_and_cases_deterministic():
    assert len({case_seed(3, i) for i in range(1000)} | {case_seed(4, i) for i in range(1000)}) == 2000
    first, again, other = (draw_case(CASES, s) for s in (case_seed(0, 0), case_seed(0, 0), case_seed(0, 1)))
    assert first == again and first != other


def test_two_dask_workers_give_the_serial_results(tmp_path):
    n = 6
    serial_seen, dask_seen = [], []
    serial = campaign(CASES, n, 5, _judge, tmp_path / "serial", lambda *a: serial_seen.append(a[0]), in_process)
    with dask_executor(workers=2) as executor:
        spread = campaign(CASES, n, 5, _judge, tmp_path / "dask", lambda *a: dask_seen.append(a[0]), executor)
    assert _merged(spread) == _merged(serial)
    assert serial_seen == dask_seen == list(range(1, n + 1))
    assert len({r.case.program for r in serial}) > 1  # the cases differ
    written = sorted(p.name for p in (tmp_path / "serial").glob("*.json"))
    assert written == sorted(p.name for p in (tmp_path / "dask").glob("*.json"))
    assert written == [f"case-5-{r.index:05d}.json" for r in serial if r.report.failed] and written
    by_name = {f"case-5-{r.index:05d}.json": r.case for r in serial}
    for name in written:  # each failing file replays the case it names
        text = (tmp_path / "dask" / name).read_text()
        assert text == (tmp_path / "serial" / name).read_text()
        back, case = FuzzCase.from_json(text), by_name[name]
        assert back.seed == case.seed and back.schedule_for().program == case.schedule_for().program

def test_the_fuzz_command_runs_on_dask_and_reports_throughput(tmp_path, capsys):
    assert main(["fuzz", "--cases", "2", "--workers", "2", "--out", str(tmp_path / "f")]) == 0
    out = capsys.readouterr().out
    assert "[2/2]" in out and "2 local dask worker processes" in out and "cases/min" in out


def test_an_unreachable_scheduler_is_a_usage_error(capsys):
    assert main(["fuzz", "--cases", "1", "--scheduler", "tcp://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert "cannot reach the dask scheduler" in err and "hint:" in err and "Traceback" not in err


@pytest.mark.parametrize("argv", [["--workers", "-1"], ["--workers", "x"]])
def test_the_worker_count_is_checked(argv, capsys):
    assert main(["fuzz", "--cases", "1", *argv]) == 2
    assert "--workers" in capsys.readouterr().err
