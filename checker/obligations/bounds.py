"""bounds: every allocation has a non-negative extent, and every access stays inside its buffer, or
is guarded off where it would not.

Formula, for every declaration ``d`` and every axis ``i`` of the buffer it allocates, and for every
statement ``s`` and access ``a`` of ``s`` to buffer ``b``:

    D_d  ⊆  { x : shape_d(x)_i >= 0 }
    D_s ∩ Guard_a  ⊆  { x : 0 <= index_a(x)_i < shape_b(x)_i for every axis i }

(an allocation of negative extent has no meaning: the interpreters refuse it). A counterexample
to the first is an allocating instance with its sizes and the extent it gets.
``Guard_a`` is the conjunction of the select conditions under which a load happens (a load
in the branch a select does not take is no access). A counterexample is an instance, the
index it accesses and the shape it leaves.
"""
from __future__ import annotations

from typing import Callable, Mapping

from ..formula import Const, cmp, conj, term_of
from ..model import Model, Stmt, access_guard, domain, index_terms, inst, out_of_bounds
from ..solve import Case, search
from ..verdict import Verdict, Witness
from .common import evaluate_at, instance_of, sizes_of, verdict_of

FORMULA = ("for every declaration d: D_d ⊆ {x : shape_d(x) >= 0}; for every access a of statement s: "
           "D_s ∩ Guard_a ⊆ {x : 0 <= index_a(x) < shape(buffer_a)}")


def check(m: Model, timeout_ms: int, skip: Callable[[Stmt], bool] = lambda s: False) -> Verdict:
    """``skip(s)``: the statement is known to satisfy the obligation (checked before, unchanged since)."""
    cases = []
    for s in m.statements:
        if skip(s):
            continue
        if s.kind == "decl":
            x = inst(s, "a")
            for i, n in enumerate(s.target.shape):
                extent = term_of(n, m.env(x.at))
                cases.append(Case(f"s{s.id}_extent{i}", conj(domain(m, x), cmp("lt", extent, Const(0))),
                                  about=(x, i)))
            continue
        for j, acc in enumerate(s.accesses):
            if acc.index is None or not acc.index:
                continue
            x = inst(s, "a")
            pos = conj(domain(m, x), access_guard(m, x, acc), out_of_bounds(m, x, acc))
            cases.append(Case(f"s{s.id}_{j}", pos, about=(x, acc)))

    def witness(case: Case, point: Mapping[str, int]) -> Witness:
        x, acc = case.about
        if isinstance(acc, int):
            b = x.stmt.target
            shape = [evaluate_at(term_of(n, m.env(x.at)), point) for n in b.shape]
            return Witness(f"the allocation of {b.name} has a negative extent: shape {shape} (axis {acc} is "
                           f"{b.shape[acc]})", sizes_of(point), (instance_of(x, point),))
        index = [evaluate_at(t, point) for t in index_terms(m, x, acc)]
        shape = [evaluate_at(term_of(n, m.env(x.at)), point) for n in acc.buffer.shape]
        return Witness(f"the {acc.mode} of {acc.buffer.name}{index} is outside its shape {shape}", sizes_of(point),
                       (instance_of(x, point),), f"{acc.buffer.name}{index}")

    def doubtful(case: Case) -> str:
        may = not isinstance(case.about[1], int) and case.about[1].may
        return "the access is a load under a data-dependent select: it may not happen" if may else ""

    return verdict_of(search(cases, timeout_ms), witness, doubtful)
