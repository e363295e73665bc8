"""Testing helpers for users of tilecert, and its pytest plugin (entry point ``pytest11``: ``tilecert``).

- ``assert_proved(subject)`` checks a schedule, kernel or program (``tc.check``, witnesses
  replayed) and passes only when every obligation is proved: a disproved or an unknown one
  fails the assertion (unknown is never success).
- ``assert_matches(subject, target="c", backend=None)`` runs the differential harness
  (``tc.differential``) and passes only on ``report.matched``: every trial agreed with the
  specification and every obligation was proved.

A failure raises ``TilecertAssertion`` (an ``AssertionError``) whose message names each open
obligation (its op: index, name and arguments; kind; verdict; formula; witness), or the first
differing trial and the broken link, and ends with the replay commands of a case file written
to the failures folder (``--tilecert-failures DIR`` under pytest, else ``$TILECERT_FAILURES``,
else ``tilecert-failures``): ``python -m tilecert.testing FILE`` checks it again and
``tilecert diff FILE --allow-unproved`` compares it on the C backend. The file is a fuzz case
(``backends/fuzz.py``): the kernel as IR and the schedule, data only.

``given_kernels(...)`` and ``given_schedules(...)`` are ``hypothesis.given`` over
``tilecert.strategies``: the test receives a ``KernelCase`` or a ``Schedule`` as its last argument.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Union

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilecert as tc
from tilecert import strategies
from tilecert.backends.differential import DiffReport
from tilecert.backends.fuzz import FuzzCase
from tilecert.checker.verdict import Report

Subject = Union[tc.Schedule, tc.Kernel, tc.Program]
Test = Callable[..., Any]
FAILURES_ENV = "TILECERT_FAILURES"
_failures_dir: Optional[Path] = None  # set by the pytest option --tilecert-failures

__all__ = ["TilecertAssertion", "assert_proved", "assert_matches", "given_kernels", "given_schedules",
           "failures_dir"]


class TilecertAssertion(AssertionError):
    """A tilecert assertion that did not hold; the message says what was not proved or did not match."""


def failures_dir() -> Path:
    """Where failing assertions write their case files: the pytest option, ``$TILECERT_FAILURES``, or
    ``tilecert-failures`` in the working folder."""
    return _failures_dir or Path(os.environ.get(FAILURES_ENV, "tilecert-failures"))


def _as_schedule(subject: Subject) -> tc.Schedule:
    return subject if isinstance(subject, tc.Schedule) else tc.schedule(subject)


def _replay_lines(subject: Subject, seed: int = 0) -> list[str]:
    """Write ``subject`` as a fuzz case file; the lines that say how to replay it (or why it was not written)."""
    s = _as_schedule(subject)
    case = FuzzCase(tc.dump(s.specification), s.to_json(), seed, s.specification.name)
    path = failures_dir() / f"{s.specification.name}-{tc.digest(s.program)[:12]}-{seed}.json"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(case.to_json())
    except OSError as exc:
        return [f"case file: not written ({exc}); set {FAILURES_ENV} or --tilecert-failures to a writable folder"]
    return [f"case file: {path}",
            f"  check again: python -m tilecert.testing {path}",
            f"  compare on C: tilecert diff {path} --allow-unproved"]


def _open_obligations(report: Report) -> list[str]:
    """Every obligation not proved: subject, kind, verdict, formula, reason and witness lines."""
    lines: list[str] = []
    for r in report:
        if r.verdict.proved:
            continue
        lines.append(f"{r.subject}: {r.kind} {r.status.upper()}")
        lines.append(f"  formula: {r.formula}")
        if r.verdict.reason:
            lines.append(f"  reason: {r.verdict.reason}")
        if r.verdict.witness is not None:
            lines += [f"  {line}" for line in r.verdict.witness.lines()]
    return lines or ["no obligation was checked"]


def assert_proved(subject: Subject, sizes: Optional[Mapping[str, int]] = None, *,
                  timeout_ms: int = 2000) -> Report:
    """The report of ``tc.check(subject, sizes)``; ``TilecertAssertion`` unless every obligation is proved."""
    __tracebackhide__ = True  # pytest shows the message, not this frame
    report = tc.check(subject, sizes, timeout_ms=timeout_ms)
    if not report.ok:
        c = report.counts()
        head = f"not proved: {c['proved']} proved, {c['disproved']} disproved, {c['unknown']} unknown " \
               f"{report.scope()}".rstrip()
        raise TilecertAssertion("\n".join([head, *_open_obligations(report), *_replay_lines(subject)]))
    return report


def assert_matches(subject: Subject, target: str = "c", backend: Optional[Callable[..., Any]] = None, *,
                   trials: int = 10, seed: int = 0, sizes: Optional[Mapping[str, int]] = None) -> DiffReport:
    """The report of ``tc.differential(subject, target=target, backend=backend, ...)``, which is run with the
    gate open so that a failure can say why; ``TilecertAssertion`` unless ``report.matched`` (every trial agreed
    with the specification and every obligation was proved)."""
    __tracebackhide__ = True
    report = tc.differential(subject, target=target, trials=trials, seed=seed, sizes=sizes, backend=backend,
                             allow_unproved=True)
    if report.matched:
        return report
    lines = [f"does not match: {report}"]
    failure = report.first_failure
    if failure is not None:
        lines.append(f"first failing {failure}")
    if report.proof is not None and not report.proof.ok:
        lines += [f"NOT PROVED: {o}" for o in report.proof.open] or ["NOT PROVED: no obligation was checked"]
    replay = _replay_lines(subject, seed)
    if backend is not None:
        replay.append(f"  with your backend: tc.differential(s, backend={getattr(backend, '__name__', 'backend')}, "
                      f"trials={trials}, seed={seed}, allow_unproved=True)")
    raise TilecertAssertion("\n".join(lines + replay))


# a drawn kernel is captured, and often checked and compiled, inside the test: no per-example deadline
GIVEN_DEFAULTS: dict[str, Any] = {"deadline": None,
                                  "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}


def _given(strategy: st.SearchStrategy[Any], hypothesis_settings: Mapping[str, Any]) -> Callable[[Test], Test]:
    """``given(strategy)`` under ``GIVEN_DEFAULTS`` updated with ``hypothesis_settings``."""
    def decorate(test: Test) -> Test:
        return settings(**{**GIVEN_DEFAULTS, **hypothesis_settings})(given(strategy)(test))
    return decorate


def given_kernels(max_size: int = 9, **hypothesis_settings: Any) -> Callable[[Test], Test]:
    """``@given(strategies.kernels(max_size))``: the test's last argument is a ``KernelCase``; keyword arguments
    (``max_examples=20``, ...) are hypothesis settings, over ``GIVEN_DEFAULTS`` (no deadline)."""
    return _given(strategies.kernels(max_size=max_size), hypothesis_settings)


def given_schedules(kernel: Optional[tc.Kernel] = None, sizes: Optional[Mapping[str, int]] = None,
                    config: Optional[Mapping[str, Any]] = None, max_ops: int = 4,
                    **hypothesis_settings: Any) -> Callable[[Test], Test]:
    """``@given`` a ``Schedule`` of up to ``max_ops`` drawn ops (``strategies.schedules``): of ``kernel`` with
    ``sizes`` bound, or, without a kernel, of a random one (``strategies.kernels()``) with its drawn sizes bound.
    Keyword arguments are hypothesis settings."""
    if kernel is not None:
        strategy = strategies.schedules(kernel, sizes, config, max_ops=max_ops)
    else:
        strategy = strategies.kernels().flatmap(
            lambda case: strategies.schedules(case.kernel, case.sizes, max_ops=max_ops))
    return _given(strategy, hypothesis_settings)


# ----------------------------------------------------------------------------- the pytest plugin
def pytest_addoption(parser: Any) -> None:
    parser.getgroup("tilecert").addoption(
        "--tilecert-failures", metavar="DIR", default=None,
        help=f"where failing tilecert assertions write their replayable case files (default: ${FAILURES_ENV} "
             "or tilecert-failures)")


def pytest_configure(config: Any) -> None:
    global _failures_dir
    option = config.getoption("tilecert_failures", None)
    _failures_dir = None if option is None else Path(option)


def pytest_report_header(config: Any) -> str:
    return f"tilecert: failing assertions write case files to {failures_dir()}"


# ----------------------------------------------------------------------------- python -m tilecert.testing FILE
def main(argv: Optional[list[str]] = None) -> int:
    """Check the schedule of a case file again and print the report; 0 only when all is proved."""
    from tilecert.cli import ArgumentParser, existing_file, report_error
    parser = ArgumentParser(prog="python -m tilecert.testing", description=main.__doc__)
    parser.add_argument("file", help="a case file written by a failing assertion or by `tilecert fuzz`")
    argv = sys.argv[1:] if argv is None else argv
    try:
        path = existing_file(Path(parser.parse_args(argv).file), "a case .json", (".json",))
        report = tc.check(FuzzCase.from_json(path.read_text(), str(path)).schedule_for(file=str(path)))
    except tc.TilecertError as exc:
        return report_error(exc, None, set(), False)
    print(report.explain())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
