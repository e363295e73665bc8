"""Queries: is there a point where an obligation fails? isl when it can, z3 otherwise.

Every obligation is reduced to cases ``pos - neg``: a counterexample is a point (values of
the case's variables: sizes and instance coordinates) satisfying ``pos`` and not ``neg``.
``search`` decides a list of cases and returns the first counterexample, ``empty`` when
there is none (the obligation is proved), or ``unknown`` with the reason. Quasi-affine
cases go to isl in one batch; the others go to z3 one by one, each with a timeout, all
within a budget of a few timeouts (the cases left over are then unknown).

A point a solver returns is never trusted as is: it is substituted back into ``pos`` and
``neg`` and both are re-decided on the concrete values (directly when no existential
remains, by a residual query otherwise). A point that does not check out makes the
outcome ``unknown``, so a solver or translation bug can cost a verdict but never produce
a false one.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Optional, Sequence

from . import isl_solve, z3_solve
from .formula import FALSE, TRUE, And, Const, Exists, Formula, Or, Var, cmp, conj, holds, substitute, variables

DEFAULT_TIMEOUT_MS = 2000
Z3_BUDGET_CASES = 2  # z3 time per search: at most this many timeouts; the cases left over stay unknown


@dataclass(frozen=True)
class Case:
    """Is there a point satisfying ``pos`` and not ``neg``? ``about`` is the obligation's own
    record of what the case stands for (used to turn a point into a witness)."""

    key: str
    pos: Formula
    neg: Formula = FALSE
    about: Any = None

    @property
    def names(self) -> tuple[str, ...]:
        """The case's variables, sizes first (so a least point has the smallest sizes)."""
        return tuple(sorted(variables(self.pos) | variables(self.neg), key=lambda n: (not n.startswith("p_"), n)))


@dataclass(frozen=True)
class Outcome:
    status: str  # "empty" | "point" | "unknown"
    case: Optional[Case] = None
    point: Mapping[str, int] = field(default_factory=dict)
    engine: str = ""
    reason: str = ""


def search(cases: Sequence[Case], timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Outcome:
    """The first case (isl cases first, then z3 ones, each in order) that has a counterexample.
    Every symbolic size (a variable ``p_<name>``) ranges over the integers >= 0."""
    live = [_sized(c) for c in cases if c.pos != FALSE and c.neg != TRUE]
    by_key = {c.key: c for c in live}
    if len(by_key) != len(live):
        raise ValueError("case keys must be unique")
    affine, other = [], []
    for c in live:
        pos, neg = isl_solve.render(c.pos), (None if c.neg == FALSE else isl_solve.render(c.neg))
        if pos is not None and (c.neg == FALSE or neg is not None):
            affine.append((c.key, c.names, pos, neg))
        else:
            other.append(c)
    found = isl_solve.first_point(affine)
    if found is not None:
        return _checked(by_key[found[0]], found[1], "isl", timeout_ms)
    unknown: list[str] = []
    deadline = time.monotonic() + Z3_BUDGET_CASES * timeout_ms / 1000
    for c in other:
        if time.monotonic() > deadline:
            unknown.append("z3's time budget for this obligation is spent")
            continue
        status, point, reason = z3_solve.find_point(c.names, c.pos, c.neg, timeout_ms)
        if status == "sat":
            return _checked(c, point, "z3", timeout_ms)
        if status == "unknown":
            unknown.append(reason)
    engine = "isl" if not other else ("z3" if not affine else "isl+z3")
    if unknown:
        more = f" (and {len(unknown) - 1} more case(s))" if len(unknown) > 1 else ""
        return Outcome("unknown", engine="z3", reason=unknown[0] + more)
    return Outcome("empty", engine=engine)


def _sized(c: Case) -> Case:
    sizes = [n for n in c.names if n.startswith("p_")]
    return replace(c, pos=conj(c.pos, *(cmp("le", Const(0), Var(n)) for n in sizes))) if sizes else c


def _checked(case: Case, point: Mapping[str, int], engine: str, timeout_ms: int) -> Outcome:
    pos, neg = decide_closed(case.pos, point, timeout_ms), decide_closed(case.neg, point, timeout_ms)
    if pos is True and neg is False:
        return Outcome("point", case, dict(point), engine)
    return Outcome("unknown", case, dict(point), engine,
                   f"{engine} returned a point that does not re-check on concrete values ({dict(point)}); not trusted")


def decide_closed(f: Formula, point: Mapping[str, int], timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Optional[bool]:
    """Whether ``f`` holds at ``point`` (None if a residual existential stays undecided)."""
    return _decide(substitute(f, point), timeout_ms)


def _decide(g: Formula, timeout_ms: int) -> Optional[bool]:
    """The truth of a closed formula, three-valued over its parts: a conjunction is false when a part is,
    a disjunction true when a part is, and a closed ``exists v: body`` holds when ``search`` finds values
    of ``v`` satisfying ``body`` (that point is re-checked on ``body``, a strictly smaller formula, so
    the recursion ends)."""
    if isinstance(g, Exists):
        out = search([Case("witness", g.body)], timeout_ms)
        return None if out.status == "unknown" else out.status == "point"
    if isinstance(g, (And, Or)):
        values = [_decide(p, timeout_ms) for p in g.parts]
        decisive = isinstance(g, Or)  # the value of a part that decides the whole
        if decisive in values:
            return decisive
        return None if None in values else not decisive
    return holds(g, {})
