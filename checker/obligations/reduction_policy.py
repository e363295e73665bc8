"""reduction_policy: the iterations of a reduce loop interact only through their reducer's updates.

A reduce loop promises that its iterations combine only through ``Accum`` updates, so that
any order (and grouping) its policy admits gives the same result; the interpreter relies on
it and runs all iterations at once. Formula, for every reduce loop ``l`` that runs in order
(not bound to a concurrent scope: ``noninterference`` covers those) and every pair of
accesses ``a``, ``b`` to one buffer, at least one writing, that are not two updates of one
reducer:

    W(i) ∩ (R(j) ∪ W(j)) = ∅   for instances i, j whose first differing shared loop is l

A counterexample is the two iterations, the cell and both accesses (say, an iteration reading
a cell another iteration updates).
"""
from __future__ import annotations

from typing import Callable, Mapping

from ..formula import cmp, conj
from ..model import Model, Stmt, access_guard, common_depth, domain, index_terms, inst, same_cell
from ..solve import Case, search
from ..verdict import Verdict, Witness
from .common import evaluate_at, instance_of, sizes_of, verdict_of
from .noninterference import access_pairs

FORMULA = ("for every ordered reduce loop l and instances i != j first differing at l: W(i) ∩ (R(j) ∪ W(j)) = ∅ "
           "unless both accesses are updates of one reducer")


def check(m: Model, timeout_ms: int, skip: Callable[[Stmt, Stmt], bool] = lambda s, t: False) -> Verdict:
    """``skip(s, t)``: the pair is known to satisfy the obligation (checked before, unchanged since)."""
    cases = []
    for n, (s, a, t, b) in enumerate(access_pairs(m)):
        if a.mode == b.mode == "update" and (a.op, a.policy) == (b.op, b.policy) or skip(s, t):
            continue
        owner = len(a.buffer.owner_loops)
        x = inst(s, "a")
        y = inst(t, "b", share=(x, owner))
        base = conj(domain(m, x), domain(m, y), access_guard(m, x, a), access_guard(m, y, b), same_cell(m, x, a, y, b))
        eq = []
        for k in range(common_depth(s, t)):
            lp = s.loops[k]
            if k >= owner and lp.node.kind == "reduce" and lp.order == "ordered":
                cases.append(Case(f"r{n}_{k}", conj(base, *eq, cmp("ne", x.coord(k), y.coord(k))),
                                  about=(x, a, y, b, k)))
            eq.append(cmp("eq", x.coord(k), y.coord(k)))

    def witness(case: Case, point: Mapping[str, int]) -> Witness:
        x, a, y, b, k = case.about
        cell = [evaluate_at(e, point) for e in index_terms(m, x, a) or index_terms(m, y, b)]
        return Witness(f"two iterations of reduce loop {x.stmt.loops[k].name!r} interact outside their reducer: "
                       f"a {a.mode} and a {b.mode} of {a.buffer.name} reach one cell", sizes_of(point),
                       (instance_of(x, point), instance_of(y, point)), f"{a.buffer.name}{cell}")

    def doubtful(case: Case) -> str:
        _, a, _, b, _ = case.about
        return "the conflict involves a load under a data-dependent select: it may not happen" if a.may or b.may else ""

    return verdict_of(search(cases, timeout_ms), witness, doubtful)
