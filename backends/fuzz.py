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
``tilecert diff FILE``) runs again. A case whose schedule the gate refuses
(``UnprovedScheduleError``: not every obligation proved) is ``unproved``, not a failure.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

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


def campaign(cases: st.SearchStrategy[FuzzCase], count: int, seed: int, run: Callable[[FuzzCase], DiffReport],
             out_dir: Optional[Path], on_result: Callable[[int, FuzzCase, DiffReport, Optional[Path]], None]) -> None:
    """Run ``count`` drawn cases, reporting each to ``on_result``; a failing one (``DiffReport.failed``, or a
    build error) is also written to ``out_dir``. A construct the lowering or the target does not handle
    (``UNSUPPORTED``) is ``unsupported`` and a schedule the
    gate refuses ``unproved``, neither a failure; a missing device (``NoDevice``) ends the campaign."""
    done = [0]

    @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @hypothesis_seed(seed)
    @given(cases)
    def one(case: FuzzCase) -> None:
        try:
            report = run(case)
        except UNSUPPORTED as exc:
            report = DiffReport(case.kernel, "", (Trial(case.seed, {}, "unsupported", detail=exc.message),))
        except UnprovedScheduleError as exc:
            report = DiffReport(case.kernel, "", (Trial(case.seed, {}, "unproved", detail=exc.message),))
        except NoDevice:
            raise
        except TilecertError as exc:
            report = DiffReport(case.kernel, "", (Trial(case.seed, {}, "backend error", detail=str(exc)),))
        path = None
        if report.failed and out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            path = out_dir / f"case-{seed}-{done[0]:05d}.json"
            path.write_text(case.to_json(report))
        done[0] += 1
        on_result(done[0], case, report, path)

    one()
