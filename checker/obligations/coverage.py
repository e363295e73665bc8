"""coverage: tau is a bijection between the active domains, and each instance keeps its operation.

With ``R`` the relation of the correspondence (``correspondence.py``: a new instance, the
old instance tau maps it to, both in their domains, performing the same operation), for
every effectful statement (allocation, store, update):

    (1) D_s' ⊆ dom R                  every new instance performs an old one (no extra work)
    (2) R(x'1, x) and R(x'2, x) => x'1 = x'2   no old instance is performed twice
    (3) D_s ⊆ ran R                   every old instance is performed (no lost work)

(1) and (2) are not asked of allocations: a fresh buffer instance nothing accesses changes
nothing, and two allocations standing for one are refused by ``prefix_cut``. A statement the
transform left untouched (``Correspondence.unchanged``) satisfies all three by identity. This is the
implemented-domain check: the new program's domain equals the specified one. A new
program that reads a loop variable outside its loop, or a buffer outside its declaration,
is ill-formed: disproved with the place. A counterexample is the instance that is extra,
performed twice, or lost.
"""
from __future__ import annotations

from typing import Mapping

from ..correspondence import Correspondence
from ..formula import FALSE, conj, differ, disj, equal_all, exists
from ..model import domain, inst
from ..solve import Case, search
from ..verdict import Verdict, Witness, disproved, unknown
from .common import instance_of, sizes_of, verdict_of

FORMULA = ("for every effectful statement: D_s' ⊆ dom R (no extra work), R injective (nothing twice), "
           "D_s ⊆ ran R (nothing lost), R = tau restricted to agreeing operations")


def check(c: Correspondence, timeout_ms: int) -> Verdict:
    if c.new.problems:
        return disproved(Witness(f"the transformed program is ill-formed: {c.new.problems[0]}"), "structure")
    if c.fresh:
        names = ", ".join(b.name for b in c.fresh)
        return unknown(f"the transform introduces buffers with no counterpart ({names}) that are not temporaries "
                       "forwarding a value (check.py compares through those)", "structure")
    cases = []
    for s in c.unmatched:
        cases.append(Case(f"u{s.id}", domain(c.new, inst(s, "a")), about=("unmatched", inst(s, "a"))))
    for img in c.images.values():
        if img.new.kind == "decl" or c.unchanged(img):
            continue
        xn = inst(img.new, "a")
        xo, rel, extra = c.forward(img, xn, "c")
        cases.append(Case(f"x{img.new.id}", domain(c.new, xn), exists(extra, rel), about=("extra", xn, xo)))
    for o in c.old.effectful:
        imgs = c.images_of(o)
        if len(imgs) == 1 and c.unchanged(imgs[0]):
            continue
        if o.kind != "decl":
            for i, first in enumerate(imgs):
                for second in imgs[i:]:
                    xn, yn = inst(first.new, "a"), inst(second.new, "b")
                    xo, tau1, _ = c.image_of(first, xn, "c")
                    yo, tau2, _ = c.image_of(second, yn, "e")
                    same = equal_all(xo.coords(), yo.coords())
                    if same == FALSE:  # tau sends the two to different instances (unrolled copies): nothing to ask
                        continue
                    pos = conj(c.relation(first, xn, xo, tau1), c.relation(second, yn, yo, tau2), same)
                    if first.new is second.new:
                        pos = conj(pos, differ(xn.coords(), yn.coords()))
                    cases.append(Case(f"d{o.id}_{first.new.id}_{second.new.id}", pos, about=("twice", xn, yn, xo)))
        xo = inst(o, "c")
        claims = []
        for img in imgs:
            xn = inst(img.new, "a")
            claims.append(exists(xn.owned(), c.relation(img, xn, xo, c.reading(img, xn, xo))))
        cases.append(Case(f"m{o.id}", domain(c.old, xo), disj(*claims), about=("lost", xo)))

    def witness(case: Case, point: Mapping[str, int]) -> Witness:
        what = case.about[0]
        sizes = sizes_of(point)
        if what == "unmatched":
            return Witness("this new instance performs no old statement's operation under tau", sizes,
                           (instance_of(case.about[1], point, "new"),))
        if what == "extra":
            _, xn, xo = case.about
            why = "lies outside the old domain or performs a different operation (cell or value differ)"
            return Witness(f"this new instance performs no old instance: its tau image {why}", sizes,
                           (instance_of(xn, point, "new"), instance_of(xo, point, "old")))
        if what == "twice":
            _, xn, yn, xo = case.about
            return Witness("two new instances perform one old instance", sizes,
                           (instance_of(xn, point, "new"), instance_of(yn, point, "new"),
                            instance_of(xo, point, "old")))
        return Witness("this old instance is performed by no new instance", sizes,
                       (instance_of(case.about[1], point, "old"),))

    def doubtful(case: Case) -> str:
        if c.ambiguous:
            return f"the correspondence is ambiguous ({c.ambiguous[0]}); the reading chosen fails here"
        return ""

    return verdict_of(search(cases, timeout_ms), witness, doubtful)
