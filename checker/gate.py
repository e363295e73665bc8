"""The gate: nothing is emitted, compiled or compared before what it comes from is checked.

``require(subject, sizes, allow_unproved=..., action=...)`` checks a ``Schedule`` (its
initial program and every op) or a ``Program`` (its own obligations) and returns the
``Proof``: the verdict counts, the sizes they hold for, and every obligation not proved.
Unless every obligation is proved it raises ``UnprovedScheduleError`` naming each open
one (kind, verdict, and the op: index, name and arguments from the schedule's history);
``allow_unproved=True`` lets it through, and whatever is made from it carries the
``Proof`` (``Proof.lines()``: a ``NOT PROVED: ...`` line per open obligation).

Reports are cached, keyed by the digests of every program of the schedule, its op
history and taus, the size names in order and the check options (target, z3 timeout).
A cached report answers a request at sizes ``S`` (the sizes fixed for what is built or
compared; all others range freely) only when it covers ``S`` (``Report.covers``: every
size it bound is fixed to the same value in ``S``) and either is all proved or was
checked at exactly ``S``; otherwise the subject is checked again at ``S``. So a report
proved for N = 8 is never taken for N = 9, and an unknown from a symbolic check is
retried at the concrete sizes asked for. Witnesses are not replayed here (a replay does
not change a verdict); ``s.check().explain()`` shows them replayed.

``cached`` is that rule for any report (the lowering pipeline caches its reports with it).
"""
from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Hashable, Mapping, Optional, Union

from tilecert.semantics import ir
from tilecert.semantics.errors import Loc, TilecertError
from tilecert.semantics.serialize import digest
from tilecert.semantics.transform import History

from .check import check
from .solve import DEFAULT_TIMEOUT_MS
from tilecert.semantics.bindings import DEFAULT_TARGET, Target
from .verdict import DISPROVED, PROVED, UNKNOWN, Report

Subject = Union[History, ir.Program]
CACHE_SIZE = 256
_CACHE: "OrderedDict[Hashable, list[Report]]" = OrderedDict()
_LOCK = threading.Lock()  # one check at a time: the solvers' contexts are not shared across threads
REASON_CHARS = 80


@dataclass(frozen=True)
class Open:
    """An obligation not proved: its kind, verdict, where (``op k: name(args)`` or the initial program)."""

    kind: str
    status: str
    subject: str
    reason: str = ""

    def __str__(self) -> str:
        why = f" ({self.reason[:REASON_CHARS]})" if self.status == UNKNOWN and self.reason else ""
        return f"{self.kind} {self.status} at {self.subject}{why}"


@dataclass(frozen=True)
class Proof:
    """What the checker established about a schedule or program: verdict counts, their scope, the open obligations."""

    what: str  # "schedule of <kernel>" or "program <name>"
    proved: int
    disproved: int
    unknown: int
    scope: str  # Report.scope(): the sizes the verdicts hold for
    open: tuple[Open, ...]

    @property
    def ok(self) -> bool:
        """Every obligation proved (and there was at least one)."""
        return not self.open and self.proved > 0

    def counts(self) -> str:
        return f"{self.proved} proved, {self.disproved} disproved, {self.unknown} unknown" + \
            (f" {self.scope}" if self.scope else "")

    def lines(self) -> list[str]:
        """The text emitted files start with: the counts, then one ``NOT PROVED`` line per open obligation."""
        head = f"checker: {self.what}: {self.counts()}" + ("" if self.ok else ": NOT PROVED")
        tail = [f"NOT PROVED: {o}" for o in self.open] or ([] if self.ok else ["NOT PROVED: no obligation was checked"])
        return [head] + tail

    @classmethod
    def of(cls, report: Report, what: str) -> "Proof":
        c = report.counts()
        return cls(what, c[PROVED], c[DISPROVED], c[UNKNOWN], report.scope(),
                   tuple(Open(r.kind, r.status, r.subject, r.verdict.reason) for r in report if not r.verdict.proved))


class UnprovedScheduleError(TilecertError):
    """A schedule or program was to be emitted, compiled or compared before all its obligations were proved."""

    exit_status = 1  # the command line's status for a verdict that is not a certificate

    def __init__(self, proof: Proof, action: str, loc: Loc) -> None:
        self.proof = proof
        opened = "; ".join(str(o) for o in proof.open) or "no obligation was checked"
        super().__init__(f"{action}: {proof.what} is not proved ({proof.counts()}): {opened}", loc,
                         "see each witness with s.check().explain() (or `tilecert check FILE`); fix the schedule, "
                         "or pass allow_unproved=True (`--allow-unproved`) to go on with output marked NOT PROVED")


def describe(subject: Subject) -> str:
    """How proofs and errors name ``subject``."""
    return f"schedule of {subject.kernel.name}" if isinstance(subject, History) else f"program {subject.name}"


def require(subject: Subject, sizes: Optional[Mapping[str, int]] = None, *, allow_unproved: bool, action: str,
            target: Target = DEFAULT_TARGET, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Proof:
    """The ``Proof`` of ``subject`` at ``sizes``; ``UnprovedScheduleError`` unless all is proved or
    ``allow_unproved``. ``action`` says what was asked (``emit``, ``compile``, ``differential``)."""
    proof = Proof.of(checked(subject, sizes, target=target, timeout_ms=timeout_ms), describe(subject))
    if not proof.ok and not allow_unproved:
        program = subject.initial if isinstance(subject, History) else subject
        raise UnprovedScheduleError(proof, action, program.loc)
    return proof


def checked(subject: Subject, sizes: Optional[Mapping[str, int]] = None, *, target: Target = DEFAULT_TARGET,
            timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Report:
    """The checker's report of ``subject`` at ``sizes`` (with a schedule's bound sizes), from the cache
    when a cached report answers the request (see the module doc)."""
    bound = {**(subject.sizes if isinstance(subject, History) else {}), **dict(sizes or {})}
    return cached((_key(subject), target, timeout_ms), bound,
                   lambda: check(subject, sizes, target=target, timeout_ms=timeout_ms, replay=False))


def cached(key: Hashable, bound: Mapping[str, int], run: Callable[[], Report]) -> Report:
    """A report cached under ``key`` that answers a request at sizes ``bound`` (the rule of the module doc),
    else ``run()``'s, then cached. ``key`` must name everything ``run``'s report depends on but ``bound``."""
    with _LOCK:
        reports = _CACHE.pop(key, [])
        found = next((r for r in reports if r.covers(bound) and (r.ok or r.sizes == bound)), None)
        if found is None:
            found = run()
            reports = reports + [found]
        _CACHE[key] = reports  # most recently used last
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
        return found


def _key(subject: Subject) -> Hashable:
    if isinstance(subject, History):
        return ("schedule", tuple(subject.initial.sizes), tuple(digest(p) for p in subject.programs),
                json.dumps(subject.history, sort_keys=True, default=repr),
                tuple(str(t.tau) for t in subject.transforms))
    return ("program", tuple(subject.sizes), digest(subject))
