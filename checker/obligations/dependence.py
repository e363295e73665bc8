"""dependence: every dependence of the original program holds in the transformed one.

A dependence is a pair of old instances ``x`` before ``y`` (``HB_old(x, y)``, ``order.py``)
touching one cell, at least one writing (RAW, WAR, WAW; an allocation writes every cell of
its buffer instance), unless both are updates of one reducer whose policy lets them commute
(``unordered_tree``: any order; ``ordered_tree`` and the folds keep their order). With
``tau``'s correspondence ``R`` (``correspondence.py``), for every such pair and every pair of
new instances performing them:

    R(x', x) and R(y', y) and cell(x) = cell(y) and HB_old(x, y)  =>  HB_new(x', y')

Loop bounds that read other loops' variables enter through the exact domains. Commuting
updates never make a concurrent loop legal: that is ``noninterference`` of the new program.
A pair whose images keep their coordinates and sit in the same order structure as before
(``same_order``) is skipped: its ``HB_new`` is its ``HB_old``. A counterexample is the two old
instances, the cell and their new images, which run in the opposite order or with no order
between them.
"""
from __future__ import annotations

from typing import Mapping

from ..correspondence import Correspondence, Image
from ..formula import conj
from ..model import Access, access_guard, index_terms, inst, order_shape, same_cell
from ..order import Names, happens_before
from ..solve import Case, decide_closed, search
from ..verdict import Verdict, Witness
from .common import evaluate_at, instance_of, sizes_of, verdict_of

FORMULA = ("for old x, y on one cell (not both reads, not commuting updates) with HB_old(x, y): "
           "R(x', x) and R(y', y) => HB_new(x', y')")


def commute(a: Access, b: Access) -> bool:
    """Updates of one reducer under unordered_tree may run in any order."""
    return a.mode == b.mode == "update" and a.op == b.op and a.policy == b.policy == "unordered_tree"


def same_order(img1: Image, img2: Image) -> bool:
    """Both images keep their coordinates and the pair sits in the same order structure as before
    (``model.order_shape``). ``HB_new`` of the images is then ``HB_old`` of the originals, term for term."""
    if not (img1.identity and img2.identity):
        return False
    old = order_shape(img1.old, img2.old)
    return old is not None and old == order_shape(img1.new, img2.new)


def check(c: Correspondence, timeout_ms: int) -> Verdict:
    cases = []
    fresh = Names()
    flat = [(s, a) for s in c.old.statements for a in s.accesses]
    for i, (s, a) in enumerate(flat):
        for j, (t, b) in enumerate(flat):
            if a.buffer is not b.buffer or not (a.writes or b.writes) or commute(a, b):
                continue
            for img1 in c.images_of(s):
                for img2 in c.images_of(t):
                    if same_order(img1, img2):
                        continue
                    xn, yn = inst(img1.new, "a"), inst(img2.new, "b")
                    xo, rel1, _ = c.forward(img1, xn, "c", full=False)
                    yo, rel2, _ = c.forward(img2, yn, "d", full=False)
                    pos = conj(rel1, rel2, access_guard(c.old, xo, a), access_guard(c.old, yo, b),
                               same_cell(c.old, xo, a, yo, b), happens_before(c.old, xo, yo, fresh))
                    cases.append(Case(f"k{i}_{j}_{img1.new.id}_{img2.new.id}", pos,
                                      happens_before(c.new, xn, yn, fresh), about=(xo, a, yo, b, xn, yn)))

    def witness(case: Case, point: Mapping[str, int]) -> Witness:
        xo, a, yo, b, xn, yn = case.about
        cell = [evaluate_at(t, point) for t in index_terms(c.old, xo, a) or index_terms(c.old, yo, b)]
        reversed_ = decide_closed(happens_before(c.new, yn, xn, Names("w")), point, timeout_ms)
        how = "in the opposite order" if reversed_ else "with no order between them"
        return Witness(f"the {a.mode} of the first old instance precedes the {b.mode} of the second, but the new "
                       f"program runs their images {how}", sizes_of(point),
                       (instance_of(xo, point, "old"), instance_of(yo, point, "old"), instance_of(xn, point, "new"),
                        instance_of(yn, point, "new")),
                       f"{a.buffer.name}{cell}")

    def doubtful(case: Case) -> str:
        _, a, _, b, _, _ = case.about
        if a.may or b.may:
            return "the dependence involves a load under a data-dependent select: it may not exist"
        return f"the correspondence is ambiguous ({c.ambiguous[0]})" if c.ambiguous else ""

    return verdict_of(search(cases, timeout_ms), witness, doubtful)
