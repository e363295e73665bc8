"""What the obligation modules share: turning a solver outcome into a verdict with a witness."""
from __future__ import annotations

from typing import Callable, Mapping

from tilecert.semantics.solver_names import user_name

from ..formula import value
from ..model import Inst
from ..solve import Case, Outcome
from ..verdict import Instance, Verdict, Witness, disproved, proved, unknown


def sizes_of(point: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """The size values of a point (its size variables, by the user's size names)."""
    named = ((user_name(n), int(v)) for n, v in point.items())
    return tuple(sorted((n, v) for n, v in named if n is not None))


def instance_of(x: Inst, point: Mapping[str, int], role: str = "") -> Instance:
    return Instance(x.stmt.label(), tuple((lp.name, evaluate_at(x.at[lp.var], point)) for lp in x.stmt.loops), role)


def evaluate_at(term, point: Mapping[str, int]) -> object:
    """A term's value at a point (``?`` where it divides by zero)."""
    v = value(term, point)
    return "?" if v is None else v


def verdict_of(outcome: Outcome, witness: Callable[[Case, Mapping[str, int]], Witness],
               doubtful: Callable[[Case], str] = lambda case: "") -> Verdict:
    """``proved`` when no case has a counterexample, ``disproved`` with the witness of the first
    one, ``unknown`` when a case is undecided or the counterexample is ``doubtful`` (the function
    says why, e.g. it rests on a may-access)."""
    if outcome.status == "empty":
        return proved(outcome.engine)
    if outcome.status == "unknown":
        return unknown(outcome.reason, outcome.engine)
    w = witness(outcome.case, outcome.point)
    why = doubtful(outcome.case)
    if why:
        return unknown(why, outcome.engine, w)
    return disproved(w, outcome.engine)

