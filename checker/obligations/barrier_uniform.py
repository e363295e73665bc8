"""barrier_uniform: every barrier is reached by all participants of its scope, or by none.

The participants of a barrier's scope instance are the coordinates of the loops around it
that are bound to threads of that scope (block / warp / lane for a block barrier, lane for
a warp barrier), with every other coordinate fixed. Formula, for every barrier ``B``:

    x in D_B  and  y agrees with x off the participant loops  and  y's participant
    coordinates lie in those loops' ranges   ==>   y in D_B

A counterexample is a participant that reaches the barrier instance and one that does not
(a barrier under a thread-dependent guard, or under a guard only some lanes of a partial
warp pass, or in a loop whose trip count depends on the thread).
"""
from __future__ import annotations

from typing import Mapping

from tilecert.semantics.bindings import PARTICIPANTS

from ..formula import Var, arith, cmp, conj, term_of
from ..model import Inst, Model, domain, inst
from ..solve import Case, search
from ..verdict import Verdict, Witness
from .common import evaluate_at, instance_of, sizes_of, verdict_of

FORMULA = ("for every barrier B: x in D_B and y differs from x only in participant coordinates within their loop "
           "ranges => y in D_B")


def participant_levels(b_loops, scope: str) -> list[int]:
    """The loops around a barrier whose coordinates name its participants."""
    return [k for k, lp in enumerate(b_loops) if lp.binding in PARTICIPANTS[scope]]


def check(m: Model, timeout_ms: int) -> Verdict:
    cases = []
    for b in m.barriers:
        levels = participant_levels(b.loops, b.node.scope)
        if not levels:
            continue
        x = inst(b, "a")
        at = dict(x.at)
        for k in levels:
            at[b.loops[k].var] = Var(f"b{b.loops[k].var}")
        y = Inst(b, at)
        env = m.env(y.at)
        box = []
        for k in levels:
            node = b.loops[k].node
            start = term_of(node.start, env)
            box += [cmp("le", start, y.coord(k)), cmp("lt", y.coord(k), arith("add", start, term_of(node.extent, env)))]
        cases.append(Case(f"b{b.id}", conj(domain(m, x), *box), domain(m, y), about=(x, y, levels)))

    def witness(case: Case, point: Mapping[str, int]) -> Witness:
        x, y, levels = case.about
        who = ", ".join(f"{x.stmt.loops[k].name}={evaluate_at(y.coord(k), point)}" for k in levels)
        return Witness(f"the barrier is reached by the participant of the first instance but not by ({who})",
                       sizes_of(point), (instance_of(x, point),), "")

    return verdict_of(search(cases, timeout_ms), witness)
