"""The differential harness: the reference interpreter against a compiled backend on random inputs.

Each trial draws sizes (those the schedule binds stay fixed; the others come from
``sizes`` or are drawn in [1, 12]) and contents for every tensor, outputs included (a kernel
may read what it writes), by ``oracle.draw_inputs``: every third trial (trial numbers 2, 5,
8, ...) mixes in edge values of each dtype. The interpreter (checked mode) and the compiled
kernel run on copies of the same arrays, and each written tensor is compared by the trial's
oracle (``oracle.oracle_for``: bitwise where no admitted evaluation can differ, else a
per-element bound by the magnitudes actually combined; see ``backends/oracle.py``).

Outcomes of a trial: ``match``; ``mismatch`` (first differing index and both values);
``both rejected`` (both raised ``ExecutionError``: an out-of-bounds access or a zero
divisor on these inputs, which counts as agreement); ``backend error`` (only the backend
raised, or it failed to build); ``invalid`` (only the interpreter raised: the program has no
meaning on these inputs, e.g. a noninterference violation; not a verdict on the backend);
``unsupported`` (the lowering does not handle a construct of the program).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

import numpy as np

from tilecert.semantics import ir
from tilecert.semantics.errors import ExecutionError
from tilecert.semantics.interp import prepare_inputs
from tilecert.semantics.loopinterp import interpret_loops

from .oracle import RULE, SIZE_RANGE, Mismatch, draw_inputs, oracle_for

FAILURES = ("mismatch", "backend error")
EDGE_EVERY = 3  # trial t uses edge values when t % EDGE_EVERY == EDGE_EVERY - 1


@dataclass(frozen=True)
class Trial:
    seed: int
    sizes: dict[str, int]
    outcome: str
    mismatch: Optional[Mismatch] = None
    detail: str = ""

    @property
    def agrees(self) -> bool:
        return self.outcome in ("match", "both rejected")

    def __str__(self) -> str:
        text = f"trial seed={self.seed} sizes={self.sizes}: {self.outcome}"
        if self.mismatch is not None:
            text += f" at {self.mismatch}"
        if self.detail:
            text += f" ({self.detail})"
        return text


@dataclass(frozen=True)
class DiffReport:
    kernel: str
    target: str
    trials: tuple[Trial, ...] = field(default_factory=tuple)

    @property
    def matched(self) -> bool:
        """Every trial agreed (and at least one ran)."""
        return bool(self.trials) and all(t.agrees for t in self.trials)

    @property
    def failed(self) -> bool:
        """Some trial is a verdict against the backend (a mismatch, or an error only the backend raised)."""
        return any(t.outcome in FAILURES for t in self.trials)

    @property
    def first_failure(self) -> Optional[Trial]:
        return next((t for t in self.trials if not t.agrees), None)

    def __str__(self) -> str:
        head = f"{self.kernel} on {self.target}: {sum(t.agrees for t in self.trials)}/{len(self.trials)} trials agree"
        bad = self.first_failure
        return head + ("" if bad is None else f"; first failure: {bad}") + f" [{RULE}]"


def run_trials(program: ir.Program, bound: Mapping[str, int], run_backend: Callable[..., dict[str, np.ndarray]],
               kernel: str, target: str, trials: int, seed: int,
               sizes: Optional[Mapping[str, int]] = None) -> DiffReport:
    """Run ``trials`` random trials of ``program`` through the interpreter and ``run_backend``."""
    results = []
    for t in range(trials):
        rng = np.random.default_rng([seed, t])
        trial_sizes = {s: int(bound[s]) if s in bound else int((sizes or {}).get(s, rng.integers(*SIZE_RANGE,
                                                                                               endpoint=True)))
                       for s in program.sizes}
        arrays = draw_inputs(rng, program, trial_sizes, edge=t % EDGE_EVERY == EDGE_EVERY - 1)
        results.append(_trial(program, run_backend, arrays, trial_sizes, seed=t))
    return DiffReport(kernel, target, tuple(results))


def _trial(program: ir.Program, run_backend, arrays: dict[str, np.ndarray], sizes: dict[str, int],
           seed: int) -> Trial:
    interp_err = backend_err = None
    expected = got = None
    dims = {str(d) for t in program.tensors for d in t.shape}
    loose = {s: n for s, n in sizes.items() if s not in dims}  # sizes no tensor shape carries
    try:
        data, bound = prepare_inputs(program, {**{k: v.copy() for k, v in arrays.items()}, **loose})
        interpret_loops(program, bound, data, checked=True)
        expected = {name: data[name] for name in program.outputs}
    except ExecutionError as exc:
        interp_err = exc
    try:
        got = run_backend(**{k: v.copy() for k, v in arrays.items()}, **loose)
    except ExecutionError as exc:
        backend_err = exc
    if interp_err is not None and backend_err is not None:
        return Trial(seed, sizes, "both rejected", detail=interp_err.message)
    if interp_err is not None:
        return Trial(seed, sizes, "invalid", detail=f"the interpreter rejects the program: {interp_err.message}")
    if backend_err is not None:
        return Trial(seed, sizes, "backend error", detail=backend_err.message)
    assert expected is not None and got is not None
    oracle = oracle_for(program, sizes, arrays)
    for tn in program.tensors:
        if tn.written:
            bad = oracle.compare(tn.name, expected[tn.name], got[tn.name])
            if bad is not None:
                return Trial(seed, sizes, "mismatch", bad)
    return Trial(seed, sizes, "match")
