"""Verdicts, witnesses and the report of a check.

Every obligation ends in a ``Verdict``: ``proved``, ``disproved`` with a ``Witness`` (the
sizes, the instances as loop coordinates, the cell or participants, and the outcome of a
replay on the interpreter where one was possible), or ``unknown`` with the reason. A
``Report`` holds one ``Result`` per obligation and subject; ``report.ok`` is true only when
there is at least one result and every one is proved (unknown is never success), and
``bool(report)`` is ``report.ok`` (so ``assert s.check()`` fails on a disproved schedule).
A report holds for the sizes it was checked at: ``report.sizes`` are the bound ones, every
size in ``report.symbolic`` ranges over all values ``>= 0`` (``report.scope()``).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterator, Mapping, Optional

PROVED, DISPROVED, UNKNOWN = "proved", "disproved", "unknown"


@dataclass(frozen=True)
class Instance:
    """One statement instance: the statement and its loop coordinates by loop name."""

    statement: str
    coords: tuple[tuple[str, int], ...]
    role: str = ""  # "old" / "new" for the two programs of a transform

    def __str__(self) -> str:
        at = ", ".join(f"{n}={v}" for n, v in self.coords)
        return f"{self.role + ' ' if self.role else ''}`{self.statement}` at ({at})"


@dataclass(frozen=True)
class Witness:
    summary: str
    sizes: tuple[tuple[str, int], ...] = ()
    instances: tuple[Instance, ...] = ()
    cell: str = ""
    replay: str = ""
    origin: str = ""  # the schedule call that introduced the obligation (op and file:line)

    def lines(self) -> list[str]:
        out = [self.summary]
        if self.origin:
            out.append(f"introduced by: {self.origin}")
        if self.sizes:
            out.append("sizes: " + ", ".join(f"{n}={v}" for n, v in self.sizes))
        out += [f"instance: {i}" for i in self.instances]
        if self.cell:
            out.append(f"cell: {self.cell}")
        if self.replay:
            out.append(f"replay: {self.replay}")
        return out


@dataclass(frozen=True)
class Verdict:
    status: str
    reason: str = ""
    witness: Optional[Witness] = None
    engine: str = ""

    @property
    def proved(self) -> bool:
        return self.status == PROVED


def proved(engine: str, reason: str = "") -> Verdict:
    return Verdict(PROVED, reason, None, engine)


def disproved(witness: Witness, engine: str, reason: str = "") -> Verdict:
    return Verdict(DISPROVED, reason, witness, engine)


def unknown(reason: str, engine: str = "", witness: Optional[Witness] = None) -> Verdict:
    return Verdict(UNKNOWN, reason, witness, engine)


def with_replay(v: Verdict, outcome: str) -> Verdict:
    """``v`` with the outcome of its witness replay recorded."""
    if v.witness is None or not outcome:
        return v
    return replace(v, witness=replace(v.witness, replay=outcome))


def with_origin(v: Verdict, origin: str) -> Verdict:
    """``v`` with its witness (if any) naming the schedule call ``origin`` that introduced the obligation."""
    if v.witness is None:
        return v
    return replace(v, witness=replace(v.witness, origin=origin))


@dataclass(frozen=True)
class Result:
    kind: str  # an obligation kind (coverage, prefix_cut, ...)
    subject: str  # what was checked: a program, or one op of a schedule
    formula: str
    verdict: Verdict

    @property
    def status(self) -> str:
        return self.verdict.status


@dataclass
class Report:
    results: list[Result] = field(default_factory=list)
    sizes: dict[str, int] = field(default_factory=dict)  # the sizes the check bound
    symbolic: tuple[str, ...] = ()  # the sizes it holds for, for every value >= 0
    stated: dict[str, tuple[str, ...]] = field(default_factory=dict)  # subject -> the kinds its op stated

    @property
    def ok(self) -> bool:
        return bool(self.results) and all(r.verdict.proved for r in self.results)

    def __bool__(self) -> bool:
        return self.ok

    def scope(self) -> str:
        """For which sizes the verdicts hold, e.g. ``for all N >= 0, M = 4`` (empty: no sizes)."""
        parts = [f"all {name} >= 0" for name in self.symbolic] + [f"{n} = {v}" for n, v in sorted(self.sizes.items())]
        return "for " + ", ".join(parts) if parts else ""

    def covers(self, sizes: Mapping[str, int]) -> bool:
        """Whether the verdicts hold wherever ``sizes`` holds: every size this report bound is fixed
        by ``sizes`` to the same value (a symbolic size covers every value)."""
        return all(name in sizes and sizes[name] == v for name, v in self.sizes.items())

    def __iter__(self) -> Iterator[Result]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def extend(self, other: "Report") -> None:
        self.results.extend(other.results)
        self.stated.update(other.stated)

    def contract(self) -> dict[str, dict[str, str]]:
        """Per op (subject), each kind it stated with the status the checker gave it: that of the op's own
        results of the kind, else (a kind decided only of the final program) that of the last subject's,
        else unknown. A stated kind nothing decided is never reported proved."""
        last = self.results[-1].subject if self.results else None
        out: dict[str, dict[str, str]] = {}
        for subject, kinds in self.stated.items():
            out[subject] = {}
            for kind in kinds:
                where = subject if self.verdicts(kind, subject) else last
                out[subject][kind] = self.status(kind, where) if self.verdicts(kind, where) else UNKNOWN
        return out

    def verdicts(self, kind: Optional[str] = None, subject: Optional[str] = None) -> list[Verdict]:
        return [r.verdict for r in self.results
                if (kind is None or r.kind == kind) and (subject is None or r.subject == subject)]

    def status(self, kind: str, subject: Optional[str] = None) -> str:
        """The combined status of every result of ``kind`` (disproved > unknown > proved)."""
        found = {v.status for v in self.verdicts(kind, subject)}
        if not found:
            raise KeyError(f"no {kind} result" + (f" for {subject}" if subject else ""))
        return DISPROVED if DISPROVED in found else (UNKNOWN if UNKNOWN in found else PROVED)

    def counts(self) -> dict[str, int]:
        out = {PROVED: 0, DISPROVED: 0, UNKNOWN: 0}
        for r in self.results:
            out[r.status] += 1
        return out

    def explain(self) -> str:
        """Each obligation's formula, verdict and witness, grouped by subject."""
        lines: list[str] = []
        subject = None
        contract = self.contract()
        for r in self.results:
            if r.subject != subject:
                subject = r.subject
                lines.append(f"== {subject}")
                if contract.get(subject):
                    lines.append("  stated by the op: " + ", ".join(f"{k} {v.upper()}"
                                                                   for k, v in contract[subject].items()))
            v = r.verdict
            engine = f" [{v.engine}]" if v.engine else ""
            lines.append(f"  {r.kind}: {v.status.upper()}{engine}")
            lines.append(f"    formula: {r.formula}")
            if v.reason:
                lines.append(f"    reason: {v.reason}")
            if v.witness is not None:
                lines += [f"    {line}" for line in v.witness.lines()]
        c = self.counts()
        scope = self.scope()
        lines.append(f"{c[PROVED]} proved, {c[DISPROVED]} disproved, {c[UNKNOWN]} unknown"
                     f"{' ' + scope if scope else ''}: {'OK' if self.ok else 'NOT OK'}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.explain()
