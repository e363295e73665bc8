"""The execution order of a loop-form program: which instance surely runs before which.

``HB(x, y)`` (x happens before y) looks at the outermost loop where the coordinates of
``x`` and ``y`` differ, among the loops both statements share:

- an *ordered* loop (serial, reduce, pipeline; unbound or bound to serial / unrolled):
  ``x`` is first iff its coordinate is smaller (lexicographic order);
- an *independent* loop (parallel, or bound to grid / core / vector): no order;
- a *threads* loop (bound to block / warp / lane): the iterations are concurrent
  participants of one scope instance, ordered only by a barrier between them:
  ``Sep_k(x, y) = exists z in D_B: z agrees with x above level k and
  ET(x) < ET(z) < ET(y)``, for a barrier ``B`` inside that loop whose scope covers both
  (a block barrier always, a warp barrier when the loop is a lane loop, so that ``x`` and
  ``y`` are lanes of one warp). ``ET`` is the *erased time* inside the loop: the
  lexicographic order of the coordinates below level ``k`` with every threads loop left
  out (participants run the same program text in barrier phases), independent loops
  required equal;

and when the coordinates agree on every shared loop, ``x`` is first iff its statement
comes first in the program text. In particular sibling loops run one after the other, and
the end of a threads loop is a synchronization point of its scope (as when a lowering
inserts a barrier between consecutive thread loops of one block).

``unordered_levels`` gives the complement the noninterference obligation needs: for each
shared concurrent loop ``k``, the pairs whose first difference is at ``k``, minus (for a
threads loop) the pairs a barrier separates.
"""
from __future__ import annotations

from itertools import count
from typing import Iterator

from .formula import FALSE, Formula, cmp, conj, disj, exists
from .model import Inst, Model, common_depth, domain, inst, textually_before


class Names:
    """Fresh variable-name prefixes for the existential copies of one query."""

    def __init__(self, stem: str = "z") -> None:
        self.stem = stem
        self.counter = count()

    def prefix(self) -> str:
        return f"{self.stem}{next(self.counter)}_"


def happens_before(m: Model, x: Inst, y: Inst, fresh: Names) -> Formula:
    """``HB(x, y)``: the instance ``x`` surely completes before ``y`` starts."""
    s, t = x.stmt, y.stmt
    parts: list[Formula] = []
    eq: list[Formula] = []
    for k in range(common_depth(s, t)):
        lp, xk, yk = s.loops[k], x.coord(k), y.coord(k)
        if lp.order == "ordered":
            parts.append(conj(*eq, cmp("lt", xk, yk)))
        elif lp.order == "threads":
            parts.append(conj(*eq, cmp("ne", xk, yk), separated(m, k, x, y, fresh)))
        eq.append(cmp("eq", xk, yk))
    if textually_before(s, t):
        parts.append(conj(*eq))
    return disj(*parts)


def unordered_levels(m: Model, x: Inst, y: Inst, fresh: Names,
                     floor: int = 0) -> Iterator[tuple[int, Formula, Formula]]:
    """For each concurrent loop ``k >= floor`` shared by ``x`` and ``y``: ``(k, pos, neg)`` where
    ``pos`` says the first difference is at ``k`` and ``neg`` that a barrier orders them."""
    s, t = x.stmt, y.stmt
    eq: list[Formula] = []
    for k in range(common_depth(s, t)):
        lp, xk, yk = s.loops[k], x.coord(k), y.coord(k)
        if k >= floor and lp.order != "ordered":
            neg = FALSE
            if lp.order == "threads":
                neg = disj(separated(m, k, x, y, fresh), separated(m, k, y, x, fresh))
            yield k, conj(*eq, cmp("ne", xk, yk)), neg
        eq.append(cmp("eq", xk, yk))


def separated(m: Model, k: int, x: Inst, y: Inst, fresh: Names) -> Formula:
    """``Sep_k(x, y)``: a barrier inside threads loop ``k`` runs after ``x`` and before ``y``."""
    loop = x.stmt.loops[k]
    out: list[Formula] = []
    for b in m.barriers:
        if len(b.loops) <= k or b.loops[k].node is not loop.node:
            continue
        if b.node.scope == "warp" and loop.binding != "lane":
            continue
        z = inst(b, fresh.prefix(), share=(x, k))
        body = conj(domain(m, z), erased_before(x, z, k), erased_before(z, y, k))
        out.append(exists(z.owned(k), body))
    return disj(*out)


def erased_before(x: Inst, y: Inst, k: int) -> Formula:
    """``ET(x) < ET(y)`` below threads level ``k``: threads loops left out, independent ones equal."""
    s, t = x.stmt, y.stmt
    parts: list[Formula] = []
    eq: list[Formula] = []
    for j in range(k + 1, common_depth(s, t)):
        lp = s.loops[j]
        if lp.order == "threads":
            continue
        xj, yj = x.coord(j), y.coord(j)
        if lp.order == "ordered":
            parts.append(conj(*eq, cmp("lt", xj, yj)))
        eq.append(cmp("eq", xj, yj))
    if textually_before(s, t):
        parts.append(conj(*eq))
    return disj(*parts)
