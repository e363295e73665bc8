"""Fuzz campaigns: random kernels with random structural schedules, interpreter against a backend.

A ``FuzzCase`` is self-contained and replayable: the kernel's source text, the schedule
(``Schedule.to_json``: sizes, config and op history) and the seed of the differential
trials. ``fuzz_cases(kernels, schedules)`` draws cases from hypothesis strategies for
kernels and schedules (the caller supplies them, e.g. ``tilecert.strategies``);
``campaign`` runs a number of them and writes every failing one as a ``.json`` file that
``replay`` (and ``tilecert diff FILE``) runs again. A case whose schedule the gate refuses
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
from tilecert.semantics.errors import SerializationError, TilecertError
from tilecert.semantics.kernel import Kernel
from tilecert.semantics.sched import Schedule

from .differential import DiffReport, Trial

FORMAT = "tilecert-fuzz-case"


@dataclass(frozen=True)
class FuzzCase:
    source: str
    schedule: str
    seed: int
    kernel: str = "generated"

    def to_json(self, report: Optional[DiffReport] = None) -> str:
        return json.dumps({"format": FORMAT, "kernel": self.kernel, "source": self.source,
                           "schedule": json.loads(self.schedule), "seed": self.seed,
                           "report": str(report) if report is not None else None}, indent=2)

    @classmethod
    def from_json(cls, text: str) -> "FuzzCase":
        try:
            data = json.loads(text)
            if data.get("format") != FORMAT:
                raise KeyError("format")
            return cls(data["source"], json.dumps(data["schedule"]), int(data["seed"]), data.get("kernel", "generated"))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise SerializationError(f"not a fuzz case file ({exc})",
                                     hint="pass a .json file written by `tilecert fuzz`") from None

    def schedule_for(self, load_kernel: Callable[[str, str], Kernel]) -> Schedule:
        """The case's schedule, replayed on the kernel its source defines."""
        return Schedule.from_json(self.schedule, load_kernel(self.source, self.kernel))


def fuzz_cases(kernels: st.SearchStrategy[Any], schedules: Callable[..., st.SearchStrategy[Schedule]],
               max_ops: int = 4) -> st.SearchStrategy[FuzzCase]:
    """Cases from a strategy of kernel cases (``.kernel``, ``.source``, ``.sizes``) and one of schedules."""

    @st.composite
    def draw_case(draw) -> FuzzCase:
        case = draw(kernels)
        bind = draw(st.booleans(), label="bind the sizes")
        s = draw(schedules(case.kernel, sizes=case.sizes if bind else None, max_ops=max_ops))
        return FuzzCase(case.source, s.to_json(), draw(st.integers(0, 2**31 - 1), label="trial seed"),
                        case.kernel.name)

    return draw_case()


def replay(case: FuzzCase, load_kernel: Callable[[str, str], Kernel], check: Callable[..., DiffReport],
           trials: int = 2) -> DiffReport:
    """Run one case: ``check(schedule, trials=..., seed=...)`` is the differential harness of a target."""
    return check(case.schedule_for(load_kernel), trials=trials, seed=case.seed)


def campaign(cases: st.SearchStrategy[FuzzCase], count: int, seed: int, run: Callable[[FuzzCase], DiffReport],
             out_dir: Optional[Path], on_result: Callable[[int, FuzzCase, DiffReport, Optional[Path]], None]) -> None:
    """Run ``count`` drawn cases, reporting each to ``on_result``; a failing one (``DiffReport.failed``, or a
    build error) is also written to ``out_dir``. A construct the lowering does not handle is ``unsupported``, a
    schedule the gate refuses ``unproved``."""
    done = [0]

    @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @hypothesis_seed(seed)
    @given(cases)
    def one(case: FuzzCase) -> None:
        try:
            report = run(case)
        except LoweringError as exc:
            report = DiffReport(case.kernel, "", (Trial(case.seed, {}, "unsupported", detail=exc.message),))
        except UnprovedScheduleError as exc:
            report = DiffReport(case.kernel, "", (Trial(case.seed, {}, "unproved", detail=exc.message),))
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
