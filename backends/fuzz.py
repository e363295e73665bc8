"""Fuzz campaigns: random kernels with random structural schedules, interpreter against a backend.

A ``FuzzCase`` is self-contained, replayable data: the kernel as IR (``tc.dump`` of its
captured program), the schedule (``Schedule.to_json``: sizes, config and op history) and the
seed of the differential trials (the inputs are drawn from it). Replaying a case reads
the program with ``tc.load`` and the schedule with ``Schedule.from_json`` (both checked
against their schemas) and runs no code from the file. A case file (``to_json``)::

    {"format": "tilecert-fuzz-case", "version": 2, "kernel": NAME, "program": {IR tree},
     "schedule": {schedule}, "seed": INT >= 0, "report": TEXT | null}

A file may instead carry the kernel's Python ``source`` (files of version 1 did); replaying
it would run that code, so ``schedule_for`` refuses it unless the caller passes a loader
for trusted source (``tilecert diff FILE --trust-source``).

``fuzz_cases(kernels, schedules)`` draws cases from hypothesis strategies for kernels and
schedules (the caller supplies them, e.g. ``tilecert.strategies``); ``campaign`` runs a
number of them and writes every failing one as a ``.json`` file that ``replay`` (and
``tilecert diff FILE``) runs again. Case ``i`` of campaign ``seed`` is drawn from the seed
``case_seed(seed, i)`` alone, so cases are independent and any executor (this process, or
dask workers: ``backends/campaigns.py``) gives the same results. A case whose schedule the gate refuses
(``UnprovedScheduleError``: not every obligation proved) is ``unproved``, not a failure.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.internal.conjecture import providers

from tilecert.checker.gate import UnprovedScheduleError
from tilecert.lowering import LoweringError
from tilecert.semantics.errors import Loc, SerializationError, TilecertError
from tilecert.semantics.jsondata import conforms, parse_json
from tilecert.semantics.kernel import Kernel
from tilecert.semantics.sched import Schedule
from tilecert.semantics.serialize import dump, load

from .cuda.errors import CudaUnsupported, NoDevice
from .differential import DiffReport, Trial

FORMAT = "tilecert-fuzz-case"
VERSION = 2
FIELDS: dict[str, Any] = {"format": str, "version": int, "kernel": str, "program": Optional[dict[str, Any]],
                          "source": Optional[str], "schedule": dict[str, Any], "seed": int, "report": Optional[str]}
REQUIRED = ("format", "kernel", "schedule", "seed")
HINT = "pass a .json file written by `tilecert fuzz`"
LoadSource = Callable[[str, str], Kernel]
UNSUPPORTED = (LoweringError, CudaUnsupported)  # the target refuses a construct: no verdict on the backend


@dataclass(frozen=True)
class FuzzCase:
    program: Optional[str]  # tc.dump of the kernel's program
    schedule: str  # Schedule.to_json
    seed: int
    kernel: str = "generated"
    source: Optional[str] = None  # Python source of the kernel: run only when the caller trusts it

    def to_json(self, report: Optional[DiffReport] = None) -> str:
        data: dict[str, Any] = {"format": FORMAT, "version": VERSION, "kernel": self.kernel}
        if self.program is not None:
            data["program"] = json.loads(self.program)
        if self.source is not None:
            data["source"] = self.source
        data.update(schedule=json.loads(self.schedule), seed=self.seed,
                    report=str(report) if report is not None else None)
        return json.dumps(data, indent=2)

    @classmethod
    def from_json(cls, text: str, file: Optional[str] = None) -> "FuzzCase":
        """The case a file written by ``to_json`` holds; every field is checked against ``FIELDS``."""
        loc = None if file is None else Loc(file, 1)
        data = parse_json(text, "fuzz case file", HINT, file)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise SerializationError(f"not a fuzz case file (no \"format\": \"{FORMAT}\")", loc, HINT)
        for key, value in data.items():
            if key not in FIELDS:
                raise SerializationError(f"unknown field {key!r} in the fuzz case file", loc, HINT)
            if not conforms(value, FIELDS[key]):
                raise SerializationError(f"field {key!r} of the fuzz case file holds {repr(value)[:60]}", loc, HINT)
        missing = [key for key in REQUIRED if key not in data]
        if missing or ("program" not in data and "source" not in data):
            raise SerializationError(f"the fuzz case file has no {(missing or ['program'])[0]!r} field", loc, HINT)
        if data["seed"] < 0:
            raise SerializationError(f"seed {data['seed']} is negative", loc, "trial seeds are ints >= 0")
        if data.get("version", 1) not in (1, VERSION):
            raise SerializationError(f"fuzz case file version {data['version']} is not 1 or {VERSION}", loc, HINT)
        if isinstance(data.get("program"), dict) and data["program"].get("name") != data["kernel"]:
            raise SerializationError(f"the case names kernel {data['kernel']!r} but its program is "
                                     f"{data['program'].get('name')!r}", loc, HINT)
        program = data.get("program")
        return cls(None if program is None else json.dumps(program), json.dumps(data["schedule"]), data["seed"],
                   data["kernel"], data.get("source"))

    def schedule_for(self, load_source: Optional[LoadSource] = None, file: Optional[str] = None) -> Schedule:
        """The case's schedule, replayed on its program. A case that carries Python source is refused unless
        ``load_source`` (which runs the source and returns the kernel it defines) is given; ``file`` (the case
        file's path) locates errors."""
        if self.source is not None and load_source is None:
            raise SerializationError("the fuzz case file carries Python source, and replaying it would run that code",
                                     None if file is None else Loc(file, 1),
                                     "replay only a file you trust, with --trust-source; files written by "
                                     "`tilecert fuzz` hold the kernel as IR and need no trust")
        subject = load(self.program, file) if self.program is not None else load_source(self.source, self.kernel)
        return Schedule.from_json(self.schedule, subject, file)


def fuzz_cases(kernels: st.SearchStrategy[Any], schedules: Callable[..., st.SearchStrategy[Schedule]],
               max_ops: int = 4) -> st.SearchStrategy[FuzzCase]:
    """Cases from a strategy of kernel cases (``.kernel``, ``.source``, ``.sizes``) and one of schedules."""

    @st.composite
    def draw_case(draw) -> FuzzCase:
        case = draw(kernels)
        bind = draw(st.booleans(), label="bind the sizes")
        s = draw(schedules(case.kernel, sizes=case.sizes if bind else None, max_ops=max_ops))
        return FuzzCase(dump(case.kernel.capture()), s.to_json(),
                        draw(st.integers(0, 2**31 - 1), label="trial seed"), case.kernel.name)

    return draw_case()


def replay(case: FuzzCase, check: Callable[..., DiffReport], trials: int = 2,
           load_source: Optional[LoadSource] = None, file: Optional[str] = None) -> DiffReport:
    """Run one case: ``check(schedule, trials=..., seed=...)`` is the differential harness of a target;
    ``load_source`` only for a trusted case that carries Python source (``FuzzCase.schedule_for``)."""
    return check(case.schedule_for(load_source, file), trials=trials, seed=case.seed)


def case_seed(seed: int, index: int) -> int:
    """The seed of case ``index`` of the campaign ``seed``: the first 8 bytes of
    ``sha256(f"{seed}:{index}")`` as an int below 2**63, so every case depends on these two numbers only."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{index}".encode()).digest()[:8], "big") >> 1


def draw_case(cases: st.SearchStrategy[FuzzCase], seed: int) -> FuzzCase:
    """The case ``cases`` draws for ``seed``: the last example of a two-example hypothesis run seeded with
    ``seed`` (generation only, no database). The first example of every run is hypothesis's simplest one, the
    same for every seed, so it is drawn and dropped."""
    drawn: list[FuzzCase] = []

    @settings(max_examples=2, database=None, deadline=None, phases=[Phase.generate], derandomize=False,
              suppress_health_check=list(HealthCheck))
    @hypothesis_seed(seed)
    @given(cases)
    def collect(case: FuzzCase) -> None:
        drawn.append(case)

    with _no_local_constants():
        collect()
    return drawn[-1]


@contextlib.contextmanager
def _no_local_constants() -> Iterator[None]:
    """Hypothesis also draws literals it collects from the local modules imported so far, which differ
    between a process that has judged cases and a fresh worker; without them a case depends on its seed alone."""
    saved = providers._get_local_constants
    providers._get_local_constants = lambda: providers.Constants()
    providers.CONSTANTS_CACHE.cache.clear()  # it holds the local constants drawn from before
    try:
        yield
    finally:
        providers._get_local_constants = saved
        providers.CONSTANTS_CACHE.cache.clear()


def run_case(case: FuzzCase, run: Callable[[FuzzCase], DiffReport]) -> DiffReport:
    """``run(case)``, with a refusal turned into a one-trial report: a construct the lowering or the target does
    not handle (``UNSUPPORTED``) is ``unsupported``, a schedule the gate refuses ``unproved`` (neither a failure),
    another ``TilecertError`` a ``backend error`` (a failure); a missing device (``NoDevice``) propagates."""
    try:
        return run(case)
    except UNSUPPORTED as exc:
        return DiffReport(case.kernel, "", (Trial(case.seed, {}, "unsupported", detail=exc.message),))
    except UnprovedScheduleError as exc:
        return DiffReport(case.kernel, "", (Trial(case.seed, {}, "unproved", detail=exc.message),))
    except NoDevice:
        raise
    except TilecertError as exc:
        return DiffReport(case.kernel, "", (Trial(case.seed, {}, "backend error", detail=str(exc)),))


def outcome(report: DiffReport) -> str:
    """One word for a case's report: ``failed``, ``matched``, ``unproved`` (trials agreed, obligations open), the
    outcome of a one-trial refusal (``unsupported``), else ``invalid``."""
    if report.failed:
        return "failed"
    if report.matched:
        return "matched"
    if report.agreed:
        return "unproved"
    return report.trials[0].outcome if len(report.trials) == 1 else "invalid"


@dataclass(frozen=True)
class CaseResult:
    """Case ``index`` of a campaign: the case and its report."""

    index: int
    case: FuzzCase
    report: DiffReport

    @property
    def outcome(self) -> str:
        return outcome(self.report)


def run_indexed(cases: st.SearchStrategy[FuzzCase], run: Callable[[FuzzCase], DiffReport], seed: int,
                index: int) -> CaseResult:
    """Case ``index`` of campaign ``seed``, drawn (``draw_case`` at ``case_seed(seed, index)``) and run
    (``run_case``): a pure function of its arguments, so any process may compute it."""
    case = draw_case(cases, case_seed(seed, index))
    return CaseResult(index, case, run_case(case, run))


Task = Callable[[int], CaseResult]
Executor = Callable[[Task, range], Iterable[CaseResult]]


def in_process(task: Task, indices: range) -> Iterator[CaseResult]:
    """The serial executor: each case in this process, in index order."""
    return map(task, indices)


def campaign(cases: st.SearchStrategy[FuzzCase], count: int, seed: int, run: Callable[[FuzzCase], DiffReport],
             out_dir: Optional[Path], on_result: Callable[[int, FuzzCase, DiffReport, Optional[Path]], None],
             executor: Executor = in_process) -> list[CaseResult]:
    """Run cases ``0 .. count - 1`` of campaign ``seed`` (``run_indexed``) through ``executor`` (which may
    return them in any order, e.g. ``backends.campaigns.dask_executor``), reporting each to ``on_result`` as it
    arrives; a failing one (``DiffReport.failed``, or a build error) is also written to ``out_dir`` as
    ``case-SEED-INDEX.json``. Returns the results in index order: the same for every executor."""
    results: list[CaseResult] = []
    for done, result in enumerate(executor(functools.partial(run_indexed, cases, run, seed), range(count)), 1):
        path = None
        if result.report.failed and out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            path = out_dir / f"case-{seed}-{result.index:05d}.json"
            path.write_text(result.case.to_json(result.report))
        results.append(result)
        on_result(done, result.case, result.report, path)
    return sorted(results, key=lambda r: r.index)
