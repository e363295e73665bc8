"""What ``tilecert check``, ``diff`` and ``fuzz`` print: failures only by default, everything with
``--verbose``, one JSON document with ``--json``; every line names its kernel and schedule. The
counts printed are held against the checker's own report of the same schedule."""
from __future__ import annotations

import json
import re

import tilecert as tc
from tilecert.cli import main

from examples import EXAMPLES
from examples.shift import shift_swapped

GEMM_FILE = EXAMPLES["gemm"].kernel.fn.__code__.co_filename
SHIFT_FILE = shift_swapped.__code__.co_filename
GEMM_SIZES = ["--size", "M=8", "--size", "N=8", "--size", "K=8"]
RESULT = re.compile(r"^(?P<label>\S+/\S+): (?P<subject>.+): (?P<kind>[a-z_]+): (?P<status>PROVED|DISPROVED|UNKNOWN)")


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    status = main(argv)
    out = capsys.readouterr()
    return status, out.out, out.err


def test_an_all_proved_check_prints_a_summary_not_every_obligation(capsys):
    status, out, err = run(["check", GEMM_FILE, *GEMM_SIZES], capsys)
    assert status == 0 and err == ""
    assert len(out.splitlines()) < 15, out
    assert not any(RESULT.match(line) for line in out.splitlines())
    assert "gemm/(kernel)" in out and out.rstrip().endswith("1 checked, 1 proved: OK")


def test_verbose_shows_every_obligation_each_line_named(capsys):
    expected = tc.check(tc.schedule(EXAMPLES["gemm"].kernel, M=8, N=8, K=8))
    status, out, _ = run(["check", GEMM_FILE, *GEMM_SIZES, "--verbose"], capsys)
    assert status == 0
    shown = [m.groupdict() for line in out.splitlines() if (m := RESULT.match(line))]
    assert [(d["subject"], d["kind"], d["status"].lower()) for d in shown] == \
        [(r.subject, r.kind, r.status) for r in expected]
    assert {d["label"] for d in shown} == {"gemm/(kernel)"}


def test_a_disproved_schedule_shows_only_its_failure_with_the_witness(capsys):
    expected = shift_swapped().check()
    status, out, _ = run(["check", SHIFT_FILE, "--kernel", "swapped"], capsys)
    assert status == 1
    shown = [m.groupdict() for line in out.splitlines() if (m := RESULT.match(line))]
    assert [(d["kind"], d["status"].lower()) for d in shown] == \
        [(r.kind, r.status) for r in expected if not r.verdict.proved]
    assert all(d["label"] == "shift/swapped" for d in shown)
    assert "cell: B[0, 1]" in out and "replay: CONFIRMED" in out
    assert "NOT OK: 1 disproved" in out and out.rstrip().endswith("NOT OK")


def test_check_json_is_the_report(capsys):
    expected = shift_swapped().check()
    status, out, _ = run(["check", SHIFT_FILE, "--json"], capsys)
    assert status == 1
    doc = json.loads(out)
    assert doc["command"] == "check" and doc["ok"] is False
    by_name = {(item["kernel"], item["schedule"]): item for item in doc["items"]}
    assert set(by_name) == {("shift", "swapped")}  # the kernel a schedule covers is not checked again
    item = by_name[("shift", "swapped")]
    assert item["counts"] == expected.counts() and item["scope"] == expected.scope()
    assert [(r["subject"], r["kind"], r["status"]) for r in item["results"]] == \
        [(r.subject, r.kind, r.status) for r in expected]
    bad = next(r for r in item["results"] if r["status"] == "disproved")
    assert bad["witness"]["cell"] == "B[0, 1]" and len(bad["witness"]["instances"]) == 4


def test_diff_lists_failing_trials_by_default_and_every_trial_verbose(capsys):
    status, out, _ = run(["diff", SHIFT_FILE, "--kernel", "shift", "--trials", "3"], capsys)
    assert status == 0 and out.startswith("MATCH     shift/(kernel): shift on c")
    assert not re.search(r"^  shift/\(kernel\): trial", out, re.M)
    status, out, _ = run(["diff", SHIFT_FILE, "--kernel", "shift", "--trials", "3", "-v"], capsys)
    assert len(re.findall(r"^  shift/\(kernel\): trial seed=\d+ .*: match", out, re.M)) == 3
    status, out, _ = run(["diff", SHIFT_FILE, "--kernel", "swapped", "--trials", "2", "--allow-unproved"], capsys)
    assert status == 1 and out.startswith("MISMATCH  shift/swapped:")
    assert len(re.findall(r"^  shift/swapped: trial .*: mismatch", out, re.M)) == 2


def test_diff_json_names_the_verdict_and_the_trials(capsys):
    status, out, _ = run(["diff", SHIFT_FILE, "--kernel", "swapped", "--trials", "2", "--allow-unproved",
                          "--json"], capsys)
    assert status == 1
    item, = json.loads(out)["items"]
    assert (item["kernel"], item["schedule"], item["label"], item["matched"], item["proved"]) == \
        ("shift", "swapped", "MISMATCH", False, False)
    assert [t["outcome"] for t in item["trials"]] == ["mismatch", "mismatch"]
    assert item["broken_links"] == ["transform"] and item["proof"]["open"]


def test_fuzz_json_counts_every_case(tmp_path, capsys):
    status, out, _ = run(["fuzz", "--cases", "3", "--out", str(tmp_path / "f"), "--json"], capsys)
    doc = json.loads(out)
    assert doc["cases"] == 3 == sum(doc["counts"].values())
    assert status == (1 if doc["counts"].get("failed") else 0) and doc["cases_per_minute"] > 0
    assert len(doc["items"]) == doc["counts"].get("failed", 0)


def test_explain_prints_the_ops_and_every_verdict(capsys):
    expected = shift_swapped().check()
    status, out, _ = run(["explain", SHIFT_FILE, "--kernel", "swapped"], capsys)
    assert status == 1
    assert out.startswith("== shift/swapped\n") and "0. swap(outer='r', inner='c')" in out
    assert out.count(": PROVED") == expected.counts()["proved"] and "dependence: DISPROVED" in out


def test_explain_html_wants_an_html_path(tmp_path, capsys):
    status, _, err = run(["explain", SHIFT_FILE, "--html", str(tmp_path / "report.txt")], capsys)
    assert status == 2 and "does not end in .html" in err and not (tmp_path / "report.txt").exists()
