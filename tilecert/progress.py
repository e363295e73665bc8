"""What ``tilecert check``, ``diff`` and ``fuzz`` print: progress, the failures, a summary table, or JSON.

Three views, the same verdicts:

- the default view shows a progress bar on a terminal's stderr (per op for ``check``, per
  trial for ``diff``, per case for ``fuzz``; nothing when stderr is not a terminal), then only
  what is not proved or did not match, then a summary table with one row per schedule;
- ``--verbose`` shows every obligation (every trial, every case) and the table;
- ``--json`` prints one JSON document and nothing else (the ``*_json`` functions give its parts).

Every line names its kernel and schedule as ``KERNEL/SCHEDULE`` (``SCHEDULE`` is the name the
file binds it to; a kernel checked on its own is ``KERNEL/(kernel)``). The words follow the
trust chain: a row says ``OK`` only when every obligation was proved (``Report.ok``), a diff
says ``MATCH`` only for a certificate (``DiffReport.matched``), and unknown is never success.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from tilecert.backends.differential import DiffReport, Trial
from tilecert.backends.fuzz import outcome as fuzz_outcome
from tilecert.checker.check import check, check_schedule
from tilecert.checker.verdict import DISPROVED, PROVED, UNKNOWN, Report, Result
from tilecert.semantics.sched.schedule import Schedule

WIDTH = 160  # the table's width when stdout is not a terminal (a log, a pipe, a test)
JSON_FORMAT = "tilecert-results"
JSON_VERSION = 1


def name_of(name: str, obj: Any) -> str:
    """``KERNEL/SCHEDULE`` for a schedule the file binds to ``name``, ``KERNEL/(kernel)`` for a kernel."""
    if isinstance(obj, Schedule):
        kernel = obj.kernel.name
        return f"{kernel}/(kernel)" if name == kernel else f"{kernel}/{name}"
    return f"{getattr(obj, 'name', name)}/(kernel)"


def bar() -> Progress:
    """A transient progress bar on stderr, shown only when stderr is a terminal (lines printed on stdout
    meanwhile appear above it)."""
    console = Console(file=sys.stderr)
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=True, disable=not console.is_terminal)


def table(title: str, columns: Iterable[str], rows: Iterable[Iterable[str]]) -> None:
    """Print a summary table on stdout (cells as plain text: no markup is read from them)."""
    out = Table(title=title, title_justify="left")
    for c in columns:
        out.add_column(c, overflow="fold")
    for row in rows:
        out.add_row(*(Text(str(cell)) for cell in row))
    console = Console(file=sys.stdout, highlight=False)
    if not console.is_terminal:
        console = Console(file=sys.stdout, highlight=False, width=WIDTH)
    console.print(out)


def dump_json(kind: str, items: list[dict[str, Any]], ok: bool, **extra: Any) -> None:
    print(json.dumps({"format": JSON_FORMAT, "version": JSON_VERSION, "command": kind, "ok": ok, **extra,
                      "items": items}, indent=2, default=str))


# ----------------------------------------------------------------------------- check
def check_all(found: Mapping[str, Any], *, timeout_ms: int, replay: bool, verbose: bool, as_json: bool) -> bool:
    """Check each subject (``name -> Schedule | Kernel``); print the chosen view; whether all is proved."""
    reports: list[tuple[str, Report]] = []
    steps = sum(len(o.transforms) + 1 if isinstance(o, Schedule) else 1 for o in found.values())
    with bar() as progress:
        task = progress.add_task("check", total=steps)
        for name, obj in found.items():
            label = name_of(name, obj)
            progress.update(task, description=label)

            def step(subject: str, part: Report, label: str = label) -> None:
                progress.advance(task)
                if not as_json:
                    for line in result_lines(label, (r for r in part if verbose or not r.verdict.proved)):
                        print(line)

            if isinstance(obj, Schedule):
                report = check_schedule(obj, timeout_ms=timeout_ms, replay=replay, on_step=step)
            else:
                report = check(obj, timeout_ms=timeout_ms, replay=replay)
                step(label, report)
            reports.append((label, report))
    ok = all(r.ok for _, r in reports)
    if as_json:
        dump_json("check", [report_json(label, r) for label, r in reports], ok)
        return ok
    table("check", ("kernel/schedule", "steps", "proved", "disproved", "unknown", "scope", "verdict"),
          ([label, str(len({x.subject for x in r})), *(str(r.counts()[k]) for k in (PROVED, DISPROVED, UNKNOWN)),
            r.scope() or "-", verdict_word(r)] for label, r in reports))
    print(f"{len(reports)} checked, {sum(r.ok for _, r in reports)} proved: {'OK' if ok else 'NOT OK'}")
    return ok


def verdict_word(r: Report) -> str:
    """``OK`` only when every obligation is proved; else what keeps it from being a proof."""
    if r.ok:
        return "OK"
    c = r.counts()
    return "NOT OK: " + (f"{c[DISPROVED]} disproved" if c[DISPROVED] else f"{c[UNKNOWN]} unknown, not proved") \
        if r.results else "NOT OK: nothing was checked"


def result_lines(label: str, results: Iterable[Result]) -> Iterator[str]:
    """Each result as ``KERNEL/SCHEDULE: SUBJECT: KIND: STATUS [engine]``, then its formula, reason and witness."""
    for r in results:
        v = r.verdict
        yield f"{label}: {r.subject}: {r.kind}: {v.status.upper()}" + (f" [{v.engine}]" if v.engine else "")
        yield f"    formula: {r.formula}"
        if v.reason:
            yield f"    reason: {v.reason}"
        if v.witness is not None:
            yield from (f"    {line}" for line in v.witness.lines())


def report_json(label: str, r: Report) -> dict[str, Any]:
    kernel, _, schedule = label.partition("/")
    return {"kernel": kernel, "schedule": schedule, "ok": r.ok, "scope": r.scope(), "sizes": r.sizes,
            "symbolic": list(r.symbolic), "counts": r.counts(),
            "results": [{"subject": x.subject, "kind": x.kind, "status": x.status, "engine": x.verdict.engine,
                         "formula": x.formula, "reason": x.verdict.reason,
                         "witness": None if x.verdict.witness is None else asdict(x.verdict.witness)}
                        for x in r]}


# ----------------------------------------------------------------------------- diff
def diff_all(runs: Mapping[str, Callable[..., DiffReport]], trials: int, *, verbose: bool, as_json: bool) -> bool:
    """Run each ``KERNEL/SCHEDULE -> run(on_trial=...)``; print the chosen view; whether every one matched."""
    done: list[tuple[str, DiffReport]] = []
    with bar() as progress:
        task = progress.add_task("diff", total=trials * len(runs))
        for label, run in runs.items():
            progress.update(task, description=label)
            report = run(on_trial=lambda trial: progress.advance(task))
            done.append((label, report))
            if not as_json:
                print(report.label.ljust(10) + f"{label}: {report}")
                for trial in report.trials:
                    if verbose or not trial.agrees:
                        print(f"  {label}: {trial}")
    ok = all(r.matched for _, r in done)
    if as_json:
        dump_json("diff", [diff_json(label, r) for label, r in done], ok)
        return ok
    table("diff", ("kernel/schedule", "target", "trials agree", "obligations", "verdict"),
          ([label, r.target, f"{sum(t.agrees for t in r.trials)}/{len(r.trials)}",
            "not checked" if r.proof is None else r.proof.counts(), r.label] for label, r in done))
    return ok


def diff_json(label: str, r: DiffReport) -> dict[str, Any]:
    kernel, _, schedule = label.partition("/")
    return {"kernel": kernel, "schedule": schedule, "target": r.target, "label": r.label, "matched": r.matched,
            "agreed": r.agreed, "proved": r.proved, "broken_links": list(r.broken_links),
            "proof": None if r.proof is None else {"what": r.proof.what, "counts": r.proof.counts(),
                                                   "open": [str(o) for o in r.proof.open]},
            "trials": [trial_json(t) for t in r.trials]}


def trial_json(t: Trial) -> dict[str, Any]:
    return {"seed": t.seed, "sizes": t.sizes, "order": t.order, "outcome": t.outcome,
            "mismatch": None if t.mismatch is None else str(t.mismatch), "detail": t.detail,
            "broken": [str(link) for link in t.broken]}


# ----------------------------------------------------------------------------- fuzz
class FuzzView:
    """A campaign's progress and summary: counts by outcome, each failing case as it is written."""

    def __init__(self, cases: int, *, verbose: bool, as_json: bool) -> None:
        self.cases, self.verbose, self.as_json = cases, verbose, as_json
        self.counts: dict[str, int] = {}
        self.first_unsupported: Optional[str] = None
        self.failures: list[dict[str, Any]] = []
        self.t0 = time.perf_counter()
        self.progress = bar()
        self.task = self.progress.add_task("fuzz", total=cases)

    def __enter__(self) -> "FuzzView":
        self.progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.stop()

    def case(self, done: int, case: Any, report: DiffReport, path: Any) -> None:
        """One case's result (``campaign``'s ``on_result``)."""
        outcome = fuzz_outcome(report)
        self.counts[outcome] = self.counts.get(outcome, 0) + 1
        if outcome == "unsupported" and self.first_unsupported is None:
            self.first_unsupported = report.trials[0].detail
        self.progress.update(self.task, advance=1, description=f"fuzz: {self.summary()}")
        label = f"{case.kernel}/case {done}"
        if path is not None:
            self.failures.append({"kernel": case.kernel, "case": done, "file": str(path),
                                  "first_failure": str(report.first_failure)})
        if self.as_json:
            return
        if self.verbose:
            print(f"[{done}/{self.cases}] {label}: {outcome}: {report}")
        if path is not None:
            print(f"[{done}/{self.cases}] {label}: FAILED, case written to {path}: {report.first_failure}")

    def summary(self) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))

    def finish(self) -> None:
        """The closing line (``[done/N] counts (seconds, cases per minute)``) and table, or the JSON document."""
        seconds = time.perf_counter() - self.t0
        done = sum(self.counts.values())
        rate = done / seconds * 60 if seconds > 0 else 0.0
        if self.as_json:
            dump_json("fuzz", self.failures, not self.counts.get("failed") and bool(self.counts.get("matched")),
                      cases=done, counts=self.counts, seconds=round(seconds, 3), cases_per_minute=round(rate, 1))
            return
        print(f"[{done}/{self.cases}] {self.summary()} ({seconds:.0f} s, {rate:.1f} cases/min)")
        table("fuzz", ("outcome", "cases"), sorted(self.counts.items()))
