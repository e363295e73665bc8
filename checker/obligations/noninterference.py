"""noninterference: distinct instances of a parallel or bound loop touch no common written cell.

Formula, for every loop ``l`` whose iterations are concurrent (a parallel loop, or one bound
to grid / block / warp / lane / vector / core) and every pair of accesses ``a``, ``b`` to one
buffer, at least one of which writes (an ``Accum`` update writes: reductions never make a
concurrent loop legal without privatization):

    W(i) ∩ (R(j) ∪ W(j)) = ∅   for instances i, j whose first differing shared loop is l,
                               unless a barrier orders them (block / warp / lane loops:
                               per barrier phase, see order.py)

As cases: ``x in D_s, y in D_t, Guard_a(x), Guard_b(y), cell_a(x) = cell_b(y)`` and the
coordinates of ``x`` and ``y`` first differ at ``l``, minus ``Sep_l(x, y) or Sep_l(y, x)``.
A counterexample is the two instances, the cell and both accesses.
"""
from __future__ import annotations

from typing import Callable, Mapping

from ..formula import conj
from ..model import Access, Model, Stmt, access_guard, domain, index_terms, inst, same_cell
from ..order import Names, unordered_levels
from ..solve import Case, search
from ..verdict import Verdict, Witness
from .common import evaluate_at, instance_of, sizes_of, verdict_of

FORMULA = ("for every concurrent loop l and instances i != j first differing at l, not ordered by a barrier: "
           "W(i) ∩ (R(j) ∪ W(j)) = ∅")


def access_pairs(m: Model) -> list[tuple[Stmt, Access, Stmt, Access]]:
    """Every unordered pair of accesses to one buffer, at least one of them a write."""
    flat = [(s, a) for s in m.statements for a in s.accesses]
    out = []
    for i, (s, a) in enumerate(flat):
        for t, b in flat[i:]:
            if a.buffer is b.buffer and (a.writes or b.writes):
                out.append((s, a, t, b))
    return out


def _a(mode: str) -> str:
    return f"an {mode}" if mode[0] in "aeiou" else f"a {mode}"


def check(m: Model, timeout_ms: int, skip: Callable[[Stmt, Stmt], bool] = lambda s, t: False) -> Verdict:
    """``skip(s, t)``: the pair is known to satisfy the obligation (checked before, unchanged since)."""
    cases = []
    fresh = Names()
    for n, (s, a, t, b) in enumerate(access_pairs(m)):
        if skip(s, t):
            continue
        owner = len(a.buffer.owner_loops)
        x = inst(s, "a")
        y = inst(t, "b", share=(x, owner))
        base = conj(domain(m, x), domain(m, y), access_guard(m, x, a), access_guard(m, y, b), same_cell(m, x, a, y, b))
        for k, pos, neg in unordered_levels(m, x, y, fresh, floor=owner):
            cases.append(Case(f"p{n}_{k}", conj(base, pos), neg, about=(x, a, y, b, k)))

    def witness(case: Case, point: Mapping[str, int]) -> Witness:
        x, a, y, b, k = case.about
        loop = x.stmt.loops[k]
        cell = [evaluate_at(t, point) for t in index_terms(m, x, a) or index_terms(m, y, b)]
        what = "bound to " + loop.node.binding if loop.node.binding else loop.node.kind
        return Witness(f"two iterations of loop {loop.name!r} ({what}) conflict: {_a(a.mode)} and {_a(b.mode)} of "
                       f"{a.buffer.name} reach one cell with no order between them", sizes_of(point),
                       (instance_of(x, point), instance_of(y, point)), f"{a.buffer.name}{cell}")

    def doubtful(case: Case) -> str:
        _, a, _, b, _ = case.about
        return "the conflict involves a load under a data-dependent select: it may not happen" if a.may or b.may else ""

    return verdict_of(search(cases, timeout_ms), witness, doubtful)
