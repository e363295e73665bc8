"""prefix_cut: tau factors through every observed cut, bijectively where the cut defines identity.

The observed cuts of loop form are the memory owners: the loops around each ``Decl`` (an
operation's anchor is the owner of the buffer it defines, so anchors are among them). For
an old buffer ``b`` owned by loops ``P_j``, a new buffer ``b'`` standing for it (owned by
``P'_rho(j)``), ``pi_j`` the projection of an old instance onto ``P_j`` and ``pi'`` that of a
new one onto its buffer's owner loops, with ``tau_j`` the map tau gives ``b'``'s allocation
instances:

    factors:    for every instance x' of a statement accessing b':
                pi_j(tau(x')) = tau_j(pi'(x'))      (the old owner depends on the new one only)
    bijective:  tau_j(a'1) = tau_j(a'2)  =>  a'1 = a'2   over the allocations of every b'
                standing for b                      (no two new allocations claim one identity)

that is ``pi_j . tau = tau_j . pi'_rho(j)`` with ``tau_j`` injective. When tau gives no
``tau_j`` (it does not apply to the new ``Decl``: the new cut is crossed), the same two
conditions are asked of every pair of accessing instances directly: equal new owners give
equal old owners, and equal old owners come from equal new owners. Statements and
allocations the transform left untouched satisfy both by identity. A counterexample is
the two new instances, their allocations and the old owner.
"""
from __future__ import annotations

from typing import Mapping

from ..correspondence import Correspondence
from ..formula import TRUE, Term, conj, differ, equal_all
from ..model import BufferRec, Inst, inst
from ..solve import Case, search
from ..verdict import Verdict, Witness
from .common import evaluate_at, instance_of, sizes_of, verdict_of

FORMULA = "for every buffer owner cut j: pi_j . tau = tau_j . pi'_rho(j), tau_j injective on the allocations used"


def _owner(x: Inst, buf: BufferRec) -> list[Term]:
    return [x.at[lp.var] for lp in buf.owner_loops]


def check(c: Correspondence, timeout_ms: int) -> Verdict:
    cases = []
    for b in c.old.buffers:
        if b.decl is None:
            continue
        news = [nb for nb in c.new.buffers if nb.decl is not None and c.buffer_of(nb) is b]
        for nb in news:
            users = [s for s in c.new.statements if s.id in c.images and s is not nb.decl
                     and any(a.buffer is nb for a in s.accesses)]
            if nb.decl.id in c.images:
                cases += _against_allocation(c, b, nb, users)
            else:
                cases += _pairwise(c, b, [(s, nb) for s in users])
        allocations = [(nb.decl, nb) for nb in news if nb.decl.id in c.images]
        if not (len(allocations) == 1 and c.unchanged(c.images[allocations[0][0].id])):
            cases += _pairwise(c, b, allocations, factor=False)

    def witness(case: Case, point: Mapping[str, int]) -> Witness:
        what, b, nb1, nb2, x1, x2, o1 = case.about

        def owner(nb: BufferRec, x: Inst) -> str:
            return f"{nb.name}({', '.join(f'{lp.name}={evaluate_at(x.at[lp.var], point)}' for lp in nb.owner_loops)})"

        old = f"{b.name}({', '.join(f'{lp.name}={evaluate_at(o1.at[lp.var], point)}' for lp in b.owner_loops)})"
        if what == "factor":
            text = (f"one new allocation {owner(nb1, x1)} stands for two old allocations of {b.name}: the old owner "
                    "depends on a loop below the new cut (tau does not factor through it)")
        else:
            text = (f"the new allocations {owner(nb1, x1)} and {owner(nb2, x2)} both claim the old allocation {old} "
                    "(two new prefixes, one old identity)")
        return Witness(text, sizes_of(point), (instance_of(x1, point, "new"), instance_of(x2, point, "new")), old)

    def doubtful(case: Case) -> str:
        return f"the correspondence is ambiguous ({c.ambiguous[0]})" if c.ambiguous else ""

    return verdict_of(search(cases, timeout_ms), witness, doubtful)


def _against_allocation(c: Correspondence, b: BufferRec, nb: BufferRec, users: list) -> list[Case]:
    """Each access's old owner is tau_j of its new owner (the allocation instance around it)."""
    out = []
    for s in users:
        if c.unchanged(c.images[s.id]) and c.unchanged(c.images[nb.decl.id]):
            continue
        x = inst(s, "a")
        xo, rel, _ = c.forward(c.images[s.id], x, "c", full=False)
        d = inst(nb.decl, "b", share=(x, len(nb.owner_loops)))
        do, rel_d, _ = c.forward(c.images[nb.decl.id], d, "d", full=False)
        pos = conj(rel, rel_d, differ(_owner(xo, b), _owner(do, b)))
        out.append(Case(f"f{b.decl.id}_{nb.decl.id}_{s.id}", pos, about=("factor", b, nb, nb, x, d, xo)))
    return out


def _pairwise(c: Correspondence, b: BufferRec, users: list, factor: bool = True) -> list[Case]:
    """For every pair of (statement, new buffer): equal new owners <=> equal old owners."""
    out = []
    for i, (s1, nb1) in enumerate(users):
        for s2, nb2 in users[i:]:
            x1, x2 = inst(s1, "a"), inst(s2, "b")
            o1, rel1, _ = c.forward(c.images[s1.id], x1, "c", full=False)
            o2, rel2, _ = c.forward(c.images[s2.id], x2, "d", full=False)
            both = conj(rel1, rel2)
            n1, n2 = _owner(x1, nb1), _owner(x2, nb2)
            old1, old2 = _owner(o1, b), _owner(o2, b)
            about = (b, nb1, nb2, x1, x2, o1)
            key = f"{b.decl.id}_{s1.id}_{s2.id}"
            distinct = differ(n1, n2) if nb1 is nb2 else TRUE
            out.append(Case(f"pi{key}", conj(both, equal_all(old1, old2), distinct), about=("inject",) + about))
            if factor and nb1 is nb2:
                out.append(Case(f"pf{key}", conj(both, equal_all(n1, n2), differ(old1, old2)),
                                about=("factor",) + about))
    return out
