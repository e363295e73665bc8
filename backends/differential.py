"""The differential harness: the specification, the scheduled program and a backend on random inputs.

Each trial draws sizes (those the schedule binds stay fixed; the others come from
``sizes`` or are drawn in [1, 12]) and contents for every tensor, outputs included (a kernel
may read what it writes), by ``oracle.draw_inputs``: every third trial (trial numbers 2, 5,
8, ...) mixes in edge values of each dtype. Three
runs take copies of the same arrays (a ``Chain``):

- the **specification**: the original kernel on the tile-level interpreter (``tc.run``), the
  meaning of the program (a loop-form program given as such is its own specification);
- the **scheduled** program on the loop-level interpreter;
- the **backend**: the compiled kernel, or any callable with its calling convention.

Both interpreters run in checked mode, in the trial's order: trial ``t`` uses
``canonical``, ``reverse`` and ``shuffle`` in turn (``ORDERS[t % 3]``; the shuffle seeded per
trial), so a schedule whose result depends on the order of concurrent instances cannot
match by luck of one order. The verdict of a trial is specification against backend. It
also names the link of the chain that broke: ``transform`` (specification and scheduled
program differ, with the first differing cell, or only the scheduled program raises) or
``lowering`` (scheduled program and backend differ, or only the backend raises).

Each comparison (``_Judge``, the one place results are compared) uses the trial's
oracle (``oracle.oracle_for``, built from the scheduled program and the trial's inputs):
bitwise where no admitted evaluation can differ, else a per-element bound by the magnitudes
actually combined (see ``backends/oracle.py``).

Outcomes of a trial: ``match``; ``mismatch`` (first differing index and both values);
``inconclusive`` (nothing differs beyond the oracle's bounds, but some element's bound is at
least its magnitude, so agreement there proves nothing: neither agreement nor failure);
``both rejected`` (specification and backend raised ``ExecutionError``: an out-of-bounds
access or a zero divisor on these inputs, which counts as agreement); ``backend error``
(only the backend raised, or it failed to build); ``invalid`` (only the specification
raised: the program has no meaning on these inputs, e.g. a noninterference violation; not a
verdict on the backend); ``unsupported`` (the lowering does not handle a construct of the
program); ``unproved`` (a campaign case the gate refused).

A ``DiffReport`` carries the ``Proof`` of what it compared (``checker/gate.py``): it is
``matched`` (a certificate) only when every trial agreed and every obligation was proved;
``agreed`` is the trials alone. Its text says NOT A CERTIFICATE otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from dataclasses import replace
from typing import Callable, Mapping, Optional, Union

import numpy as np

from tilecert.checker.gate import Proof
from tilecert.semantics import ir
from tilecert.semantics.errors import ExecutionError
from tilecert.semantics.expand import expand
from tilecert.semantics.inputs import prepare_inputs
from tilecert.semantics.interp_fast import interpret
from tilecert.semantics.loopinterp import interpret_loops
from tilecert.semantics.loopir import is_loop_form
from tilecert.semantics.sched import Schedule

from .oracle import RULE, SIZE_RANGE, Mismatch, Oracle, draw_inputs, oracle_for

FAILURES = ("mismatch", "backend error")
ORDERS = ("canonical", "reverse", "shuffle")
EDGE_EVERY = 3  # trial t uses edge values when t % EDGE_EVERY == EDGE_EVERY - 1
RUNS = {"spec": "specification", "scheduled": "scheduled program", "backend": "backend"}
LINKS = {"transform": "specification vs scheduled program", "lowering": "scheduled program vs backend"}


@dataclass(frozen=True)
class Link:
    """A broken link of the chain: ``transform`` or ``lowering`` (``LINKS``), with the first differing
    cell, or what only one side raised."""

    name: str
    mismatch: Optional[Mismatch] = None
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.name} ({LINKS[self.name]}: {self.mismatch if self.mismatch is not None else self.detail})"


@dataclass(frozen=True)
class Trial:
    seed: int
    sizes: dict[str, int]
    outcome: str
    mismatch: Optional[Mismatch] = None
    detail: str = ""
    order: str = "canonical"
    broken: tuple[Link, ...] = ()

    @property
    def agrees(self) -> bool:
        return self.outcome in ("match", "both rejected")

    def __str__(self) -> str:
        text = f"trial seed={self.seed} sizes={self.sizes} order={self.order}: {self.outcome}"
        if self.mismatch is not None:
            text += f" at {self.mismatch}"
        if self.detail:
            text += f" ({self.detail})"
        if self.broken:
            text += "; broken link: " + "; ".join(str(link) for link in self.broken)
        return text


@dataclass(frozen=True)
class DiffReport:
    kernel: str
    target: str
    trials: tuple[Trial, ...] = field(default_factory=tuple)
    proof: Optional[Proof] = None  # what the checker proved of the subject; None: nothing was checked

    @property
    def agreed(self) -> bool:
        """Every trial agreed with the specification (and at least one ran); says nothing of proofs."""
        return bool(self.trials) and all(t.agrees for t in self.trials)

    @property
    def proved(self) -> bool:
        return self.proof is not None and self.proof.ok

    @property
    def matched(self) -> bool:
        """A certificate: every trial agreed with the specification and every obligation was proved."""
        return self.agreed and self.proved

    @property
    def ok(self) -> bool:
        """``matched``, named like ``Report.ok``."""
        return self.matched

    def __bool__(self) -> bool:
        return self.matched

    @property
    def broken_links(self) -> tuple[str, ...]:
        """The links of the chain some trial found broken, in chain order."""
        found = {link.name for t in self.trials for link in t.broken}
        return tuple(name for name in LINKS if name in found)

    @property
    def label(self) -> str:
        """``MATCH`` (a certificate), ``UNPROVED`` (trials agreed, obligations open), ``INCONCLUSIVE`` (no trial
        failed, but some compared only vacuously) or ``MISMATCH``."""
        if self.matched:
            return "MATCH"
        if self.agreed:
            return "UNPROVED"
        inconclusive = any(t.outcome == "inconclusive" for t in self.trials)
        return "INCONCLUSIVE" if inconclusive and not self.failed else "MISMATCH"

    @property
    def failed(self) -> bool:
        """Some trial is a verdict against the backend (a mismatch, or an error only the backend raised)."""
        return any(t.outcome in FAILURES for t in self.trials)

    @property
    def first_failure(self) -> Optional[Trial]:
        return next((t for t in self.trials if not t.agrees), None)

    def __str__(self) -> str:
        head = f"{self.kernel} on {self.target}: {sum(t.agrees for t in self.trials)}/{len(self.trials)} trials " \
               "agree with the specification"
        bad = self.first_failure
        links = "; ".join(f"{name} ({LINKS[name]})" for name in self.broken_links)
        if self.proof is None:
            proof = "NOT A CERTIFICATE: nothing was checked"
        elif self.proof.ok:
            proof = f"{self.proof.what} proved: {self.proof.counts()}"
        else:
            proof = f"NOT A CERTIFICATE: {self.proof.what} is not proved ({self.proof.counts()}): " + \
                "; ".join(str(o) for o in self.proof.open)
        return head + ("" if bad is None else f"; first failure: {bad}") + \
            (f"; links broken in some trial: {links}" if links else "") + f" | {proof} [{RULE}]"


@dataclass(frozen=True)
class Chain:
    """What a trial runs besides the backend: ``spec``, the original tile program (None when the subject
    is a loop-form program, its own specification), ``initial``, its loop form, and ``scheduled``."""

    spec: Optional[ir.Program]
    initial: ir.Program
    scheduled: ir.Program

    @classmethod
    def of(cls, subject: Union[Schedule, ir.Program]) -> "Chain":
        if isinstance(subject, Schedule):
            spec = subject.specification
            return cls(None if is_loop_form(spec.body) else spec, subject.initial, subject.program)
        loop = expand(subject)
        return cls(None if is_loop_form(subject.body) else subject, loop, loop)


def run_trials(chain: Chain, bound: Mapping[str, int], run_backend: Callable[..., Mapping[str, np.ndarray]],
               target: str, trials: int, seed: int, sizes: Optional[Mapping[str, int]] = None,
               proof: Optional[Proof] = None, on_trial: Optional[Callable[[Trial], None]] = None) -> DiffReport:
    """Run ``trials`` random trials of ``chain`` and ``run_backend``; ``proof`` is what the checker proved;
    ``on_trial`` sees each trial as it ends."""
    program = chain.scheduled
    results = []
    for t in range(trials):
        rng = np.random.default_rng([seed, t])
        trial_sizes = {s: int(bound[s]) if s in bound else int((sizes or {}).get(s, rng.integers(*SIZE_RANGE,
                                                                                               endpoint=True)))
                       for s in program.sizes}
        arrays = draw_inputs(rng, program, trial_sizes, edge=t % EDGE_EVERY == EDGE_EVERY - 1)
        order = ORDERS[t % len(ORDERS)]
        results.append(_trial(chain, run_backend, arrays, trial_sizes, t, order, int(rng.integers(2**31))))
        if on_trial is not None:
            on_trial(results[-1])
    return DiffReport(program.name, target, tuple(results), proof)


def _trial(chain: Chain, run_backend, arrays: dict[str, np.ndarray], sizes: dict[str, int], seed: int,
           order: str, order_seed: int) -> Trial:
    program = chain.scheduled
    dims = {str(d) for t in program.tensors for d in t.shape}
    loose = {s: n for s, n in sizes.items() if s not in dims}  # sizes no tensor shape carries
    copies = lambda: {**{k: v.copy() for k, v in arrays.items()}, **loose}  # noqa: E731

    def scheduled() -> dict[str, np.ndarray]:
        data, bound = prepare_inputs(program, copies())
        interpret_loops(program, bound, data, order=order, seed=order_seed, checked=True)
        return {name: data[name] for name in program.outputs}

    def spec() -> dict[str, np.ndarray]:
        assert chain.spec is not None
        return interpret(chain.spec, order=order, seed=order_seed, checked=True, **copies())

    expected, spec_err = _attempt(spec if chain.spec is not None else scheduled)
    mid, mid_err = _attempt(scheduled) if chain.spec is not None else (expected, spec_err)
    got, backend_err = _attempt(lambda: run_backend(**copies()))
    judge = _Judge(program if mid_err is None else chain.initial, sizes, arrays)
    broken: list[Link] = []
    runs = {"spec": (expected, spec_err), "scheduled": (mid, mid_err), "backend": (got, backend_err)}
    for link, first, second in (("transform", "spec", "scheduled"), ("lowering", "scheduled", "backend")):
        (want, first_err), (have, second_err) = runs[first], runs[second]
        if first_err is not None:
            continue
        if second_err is not None:
            broken.append(Link(link, detail=f"only the {RUNS[second]} raises: {second_err.message}"))
        elif (bad := judge.difference(want, have, (first, second))) is not None:
            broken.append(Link(link, bad))
    done = lambda outcome, **kw: Trial(seed, sizes, outcome, order=order, broken=tuple(broken), **kw)  # noqa: E731
    if spec_err is not None and backend_err is not None:
        return done("both rejected", detail=spec_err.message)
    if spec_err is not None:
        return done("invalid", detail=f"the specification rejects the inputs: {spec_err.message}")
    if backend_err is not None:
        return done("backend error", detail=backend_err.message)
    bad = judge.difference(expected, got, ("spec", "backend"))
    if judge.error is not None:
        return done("invalid", detail=f"the oracle cannot run the program on these inputs: {judge.error.message}")
    if bad is not None:
        return done("mismatch", mismatch=bad)
    vacuous = judge.vacuous(expected)
    if vacuous:
        return done("inconclusive", detail=f"{vacuous} elements have a bound at least their magnitude: admitted "
                    "evaluations may differ by more than the value there, so agreement proves nothing (use a wider "
                    "accumulating dtype or shorter reductions)")
    return done("match")


def _attempt(run: Callable[[], Mapping[str, np.ndarray]]) -> tuple[Optional[Mapping[str, np.ndarray]],
                                                                    Optional[ExecutionError]]:
    """``run()``'s outputs, or the ``ExecutionError`` it raised."""
    try:
        return run(), None
    except ExecutionError as exc:
        return None, exc


class _Judge:
    """The one place the harness compares results: each written tensor by the trial's oracle, built on
    first use from the loop-form program that follows the schedule (``oracle_for``). If building it
    raises (the program has no meaning on these inputs), ``error`` holds why and nothing differs."""

    def __init__(self, program: ir.Program, sizes: Mapping[str, int], arrays: Mapping[str, np.ndarray]) -> None:
        self.program, self.sizes, self.arrays = program, sizes, arrays
        self.oracle: Optional[Oracle] = None
        self.error: Optional[ExecutionError] = None

    def vacuous(self, expected: Mapping[str, np.ndarray]) -> int:
        """How many written elements the oracle can compare only vacuously (``Oracle.vacuous``)."""
        if self.oracle is None:
            return 0
        return sum(self.oracle.vacuous(tn.name, expected[tn.name]) for tn in self.program.tensors if tn.written)

    def difference(self, expected: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray],
                   labels: tuple[str, str]) -> Optional[Mismatch]:
        """The first written tensor's first element where ``got`` differs from ``expected``, or None."""
        if self.oracle is None and self.error is None:
            try:
                self.oracle = oracle_for(self.program, self.sizes, self.arrays)
            except ExecutionError as exc:
                self.error = exc
        if self.oracle is None:
            return None
        for tn in self.program.tensors:
            if tn.written:
                bad = self.oracle.compare(tn.name, expected[tn.name], got[tn.name])
                if bad is not None:
                    return replace(bad, labels=labels)
        return None
