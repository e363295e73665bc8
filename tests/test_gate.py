"""The gate: emit, compile, differential and the CLI check first, refuse what is not proved unless
told otherwise, and never state more than was proved; reports say for which sizes they hold."""
import numpy as np
import pytest

import tilecert as tc
from examples import EXAMPLES
from examples.prefix_sum import prefix_sum, prefix_sum_on_cores
from examples.shift import shift, shift_swapped
from tilecert.checker import gate
from tilecert.cli import main

SHIFT_FILE = shift.fn.__code__.co_filename
PREFIX_FILE = prefix_sum.fn.__code__.co_filename
UNPROVED = {"shift swapped": shift_swapped, "prefix sum on cores": prefix_sum_on_cores}


def proved_schedule():
    s = tc.schedule(EXAMPLES["gemm_i32"].kernel, M=6, N=5, K=4)
    s.split("nest.0", 2)
    s.bind("nest.0.o", "grid0")
    return s


@pytest.mark.parametrize("name", sorted(UNPROVED))
@pytest.mark.parametrize("action", ["emit", "compile", "differential"])
def test_unproved_schedules_are_refused_naming_each_open_obligation_and_its_op(name, action):
    s = UNPROVED[name]()
    report = s.check()
    open_ones = [r for r in report if not r.verdict.proved]
    assert open_ones and not report.ok
    with pytest.raises(tc.UnprovedScheduleError) as info:
        getattr(tc, action)(s)
    err = info.value
    assert isinstance(err, tc.TilecertError) and err.hint and "s.check().explain()" in err.hint
    assert err.message.startswith(f"{action}: schedule of ")
    for r in open_ones:  # each one: kind, verdict, op index, op name and arguments
        assert f"{r.kind} {r.status} at {r.subject}" in err.message
        assert r.subject.startswith("op 0: ")
    assert "\n" not in err.message
    assert err.loc.file.endswith(".py") and err.loc.line > 0


def test_the_error_names_op_arguments_from_the_history():
    with pytest.raises(tc.UnprovedScheduleError, match=r"dependence disproved at op 0: swap\(outer='r', inner='c'\)"):
        tc.emit(shift_swapped())
    with pytest.raises(tc.UnprovedScheduleError,
                       match=r"noninterference disproved at op 0: bind\(loop='i', kind='core'\)"):
        tc.compile(prefix_sum_on_cores())


@pytest.mark.parametrize("target", ["c", "cuda"])
def test_allowed_unproved_sources_start_with_not_proved_lines(target):
    src = tc.emit(prefix_sum_on_cores(), target=target, allow_unproved=True)
    head = src.splitlines()[:5]
    assert head[0] == f"/* tilecert {'C' if target == 'c' else 'CUDA'} backend: kernel prefix_sum */"
    assert "11 proved, 2 disproved, 0 unknown" in head[1] and head[1].endswith("NOT PROVED */")
    assert head[2].startswith("/* NOT PROVED: dependence disproved at op 0: bind(")
    assert head[3].startswith("/* NOT PROVED: noninterference disproved at op 0: bind(")
    assert head[4].startswith("/* checker: lowering of prefix_sum: 2 proved, 0 disproved, 0 unknown")
    assert "all obligations proved" not in "\n".join(head[:4])


def test_a_compiled_unproved_kernel_carries_the_marks_and_differs_from_the_spec_only_through_the_transform():
    k = tc.compile(shift_swapped(), allow_unproved=True)
    assert "/* NOT PROVED: dependence disproved at op 0: swap(" in k.source
    report = tc.differential(shift_swapped(), trials=3, allow_unproved=True)
    assert not report.matched and not report.ok and not report.proved and not bool(report)
    assert report.broken_links == ("transform",)
    assert "NOT A CERTIFICATE" in str(report) and "dependence disproved at op 0" in str(report)
    bad = report.trials[0]
    assert bad.outcome == "mismatch" and bad.broken[0].name == "transform"
    assert bad.broken[0].mismatch.labels == ("spec", "scheduled")


def test_a_proved_schedule_emits_compiles_and_matches_as_a_certificate():
    s = proved_schedule()
    src = tc.emit(s)
    assert "NOT PROVED" not in src and "0 disproved, 0 unknown for K = 4, M = 6, N = 5 */" in src.splitlines()[1]
    k = tc.compile(s)
    a = np.arange(24, dtype=np.int32).reshape(6, 4)
    b = np.arange(20, dtype=np.int32).reshape(4, 5)
    assert np.array_equal(k(A=a, B=b, C=np.zeros((6, 5), np.int32))["C"], a @ b)
    report = tc.differential(s, trials=3)
    assert report.matched and report.ok and report.proved and bool(report)
    assert report.label == "MATCH" and "NOT A CERTIFICATE" not in str(report)


def test_a_kernel_and_a_program_are_checked_as_programs():
    from tests.test_c_backend import shift as oob_shift  # an assumed-in-bounds read past the end: bounds disproved
    for obj in (oob_shift, tc.capture(oob_shift)):
        with pytest.raises(tc.UnprovedScheduleError, match="bounds disproved at (initial )?program shift"):
            tc.emit(obj)
        with pytest.raises(tc.UnprovedScheduleError, match="bounds disproved"):
            tc.differential(obj)
    assert "NOT PROVED" not in tc.emit(EXAMPLES["transpose"].kernel)


def test_reports_are_cached_by_digest_and_recomputed_at_sizes_they_do_not_cover(monkeypatch):
    calls = []
    real = gate.check

    def counting(subject, sizes=None, **kw):
        calls.append(dict(sizes or {}))
        return real(subject, sizes, **kw)

    monkeypatch.setattr(gate, "check", counting)
    gate._CACHE.clear()
    s = proved_schedule()
    tc.emit(s)
    tc.emit(s.replay())  # another object, the same digests and history: the cached report
    assert calls == [{}]
    k = EXAMPLES["transpose"].kernel
    r8 = gate.checked(tc.schedule(k), {"M": 8})
    assert r8.ok and r8.sizes == {"M": 8} and r8.symbolic == ("N",)
    assert not r8.covers({"M": 9}) and r8.covers({"M": 8, "N": 3}) and not r8.covers({})
    gate.checked(tc.schedule(k), {"M": 9})  # not covered by the report at M = 8: checked again
    gate.checked(tc.schedule(k), {"M": 8})
    assert calls == [{}, {"M": 8}, {"M": 9}]
    whole = gate.checked(tc.schedule(k))  # symbolic: checked once, then it covers every size
    assert whole.ok and whole.covers({"M": 123})
    gate.checked(tc.schedule(k), {"M": 10})
    assert calls == [{}, {"M": 8}, {"M": 9}, {}]


def test_check_sizes_cannot_contradict_bound_sizes_and_reports_state_their_scope():
    s = tc.schedule(EXAMPLES["transpose"].kernel, M=4)
    with pytest.raises(tc.TilecertError, match="contradict the sizes the schedule binds"):
        s.check(sizes={"M": 5})
    assert s.check(sizes={"M": 4}).ok  # the bound value itself is no contradiction
    r = s.check()
    assert r.sizes == {"M": 4} and r.symbolic == ("N",) and r.scope() == "for all N >= 0, M = 4"
    assert r.explain().splitlines()[-1].endswith("for all N >= 0, M = 4: OK")
    assert s.check(sizes={"N": 3}).scope() == "for M = 4, N = 3"


def test_bool_of_a_report_is_its_ok():
    bad = shift_swapped().check()
    assert len(bad) > 0 and not bad.ok and bool(bad) is False
    with pytest.raises(AssertionError):
        assert shift_swapped().check()
    good = proved_schedule().check()
    assert good.ok and bool(good) is True
    assert bool(tc.checker.Report()) is False  # nothing checked is not success


def test_cli_refuses_unproved_schedules_with_an_error_and_a_hint(capsys):
    for cmd in (["emit", SHIFT_FILE, "--kernel", "swapped"], ["diff", SHIFT_FILE, "--kernel", "swapped"],
                ["emit", PREFIX_FILE, "--kernel", "on_cores"], ["diff", PREFIX_FILE, "--kernel", "on_cores"]):
        assert main(cmd) == 1, cmd
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 2 and err[0].startswith("error: ") and "is not proved" in err[0], err
        assert err[1].strip().startswith("hint: ") and "--allow-unproved" in err[1]


def test_cli_with_allow_unproved_marks_the_output_and_diff_names_the_transform(capsys):
    assert main(["emit", SHIFT_FILE, "--kernel", "swapped", "--allow-unproved"]) == 1
    out = capsys.readouterr().out
    assert "/* NOT PROVED: dependence disproved at op 0: swap(" in out
    assert main(["diff", SHIFT_FILE, "--kernel", "swapped", "--allow-unproved", "--trials", "3"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("MISMATCH") and "links broken in some trial: transform" in out
    assert "NOT A CERTIFICATE" in out
    assert main(["diff", SHIFT_FILE, "--kernel", "shift", "--trials", "2"]) == 0  # the kernel itself is proved
    assert capsys.readouterr().out.startswith("MATCH")


def test_the_readme_error_example_exists_and_fails_where_it_says():
    from examples.bad import running_sum
    with pytest.raises(tc.CaptureError, match="parallel nests cannot mutate an outer value") as info:
        tc.capture(running_sum)
    assert info.value.loc.file.endswith("examples/bad.py") and info.value.loc.line == 12


def test_running_a_schedule_at_sizes_no_check_covered_warns():
    import warnings
    s = tc.schedule(EXAMPLES["transpose"].kernel)
    s.split(s.loops()[0].name, 2)
    a = np.arange(20, dtype=np.float32).reshape(4, 5)
    arrays = dict(A=a, B=np.zeros((5, 4), np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s.run(**arrays)  # never checked: nothing to contradict
    assert s.check(sizes={"M": 4, "N": 5}).ok
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s.run(**arrays)  # the checked sizes
    with pytest.warns(tc.UncheckedSizesWarning, match="no check of it covered"):
        s.run(A=a[:3], B=np.zeros((5, 3), np.float32))
    assert s.check().ok  # symbolic sizes cover every run
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s.run(A=a[:3], B=np.zeros((5, 3), np.float32))
