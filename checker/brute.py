"""Brute-force enumeration at concrete sizes: the oracle the symbolic checker is held against.

Every statement instance is enumerated (loops run over their concrete ranges, guards are
evaluated), every access becomes a concrete cell, and each obligation is decided by
looking at all of them: pairs of instances on one cell for ``noninterference`` and
``dependence``, every participant for ``barrier_uniform``, every index and allocation extent for ``bounds``, and
for a transform the concrete images of every new instance under tau for ``coverage`` and
``prefix_cut``. The order ``hb`` is computed from coordinates by the rules of ``order.py``
written out directly, and "the same operation" compares the operations themselves: the
target cell, and the value as a tree whose loads are concrete cells (a select on an index
condition is resolved on the coordinates). Nothing here builds a formula or calls a
solver; the cost grows with the extents, which is what the symbolic checker avoids.

Each ``brute_*`` function returns the list of violations found (empty: the obligation
holds at these sizes); a violation is a short tuple describing it. ``brute_check_schedule``
runs them all over a schedule's history (the benchmark's baseline).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from tilecert.semantics import loopir as L
from tilecert.semantics.index import IExpr, evaluate

from .agreement import literal_key
from .check import subjects
from .correspondence import Correspondence, correspond
from .forwarding import through_temporaries
from .model import Access, Model, Stmt, common_depth, textually_before
from .obligations.barrier_uniform import participant_levels
from .obligations.dependence import commute


@dataclass(frozen=True)
class BInst:
    stmt: Stmt
    coords: tuple[int, ...]

    def env(self) -> dict[tuple[int, int], int]:
        return {(v, 0): c for v, c in zip(self.stmt.vars, self.coords)}


class Enumeration:
    """All instances and accesses of a model's program at concrete ``sizes``."""

    def __init__(self, m: Model, sizes: Mapping[str, int]) -> None:
        self.m = m
        self.sizes = {**dict(sizes), **m.sizes}
        self._instances: dict[int, list[BInst]] = {}
        self._members: dict[int, set[BInst]] = {}

    def ev(self, e: IExpr, x: BInst) -> int:
        return int(evaluate(e, self.sizes, x.env()))

    def instances(self, s: Stmt) -> list[BInst]:
        if s.id not in self._instances:
            self._instances[s.id] = list(self._walk(s, 0, ()))
        return self._instances[s.id]

    def _walk(self, s: Stmt, k: int, prefix: tuple[int, ...]) -> Iterator[BInst]:
        partial = BInst(s, prefix)
        if k == len(s.loops):
            if all(self.ev(g, partial) for g in s.guards):
                yield partial
            return
        node = s.loops[k].node
        start = self.ev(node.start, partial)
        for v in range(start, start + self.ev(node.extent, partial)):
            yield from self._walk(s, k + 1, prefix + (v,))

    def member(self, x: BInst) -> bool:
        if x.stmt.id not in self._members:
            self._members[x.stmt.id] = set(self.instances(x.stmt))
        return x in self._members[x.stmt.id]

    def cells(self, x: BInst, a: Access) -> list[tuple]:
        """The cells access ``a`` of instance ``x`` touches: ``(buffer, owner coords, index)``."""
        if not all(bool(self.ev(c, x)) == taken for c, taken in a.guards):
            return []
        owner = x.coords[:len(a.buffer.owner_loops)]
        if a.index is not None:
            return [(id(a.buffer), owner, tuple(self.ev(e, x) for e in a.index))]
        shape = [range(self.ev(n, x)) for n in a.buffer.shape]
        return [(id(a.buffer), owner, idx) for idx in itertools.product(*shape)]

    def by_cell(self) -> dict[tuple, list[tuple[BInst, Access]]]:
        out: dict[tuple, list[tuple[BInst, Access]]] = {}
        for s in self.m.statements:
            for x in self.instances(s):
                for a in s.accesses:
                    for cell in self.cells(x, a):
                        out.setdefault(cell, []).append((x, a))
        return out

    # ------------------------------------------------------------------ order
    def hb(self, x: BInst, y: BInst) -> bool:
        s, t = x.stmt, y.stmt
        for k in range(common_depth(s, t)):
            a, b = x.coords[k], y.coords[k]
            if a == b:
                continue
            order = s.loops[k].order
            if order == "ordered":
                return a < b
            return order == "threads" and self.separated(k, x, y)
        return textually_before(s, t)

    def separated(self, k: int, x: BInst, y: BInst) -> bool:
        loop = x.stmt.loops[k]
        for b in self.m.barriers:
            if len(b.loops) <= k or b.loops[k].node is not loop.node:
                continue
            if b.node.scope == "warp" and loop.binding != "lane":
                continue
            for z in self.instances(b):
                if z.coords[:k] == x.coords[:k] and _erased_before(x, z, k) and _erased_before(z, y, k):
                    return True
        return False


def _erased_before(x: BInst, y: BInst, k: int) -> bool:
    s, t = x.stmt, y.stmt
    for j in range(k + 1, common_depth(s, t)):
        order = s.loops[j].order
        if order == "threads" or x.coords[j] == y.coords[j]:
            continue
        return order == "ordered" and x.coords[j] < y.coords[j]
    return textually_before(s, t)


# ----------------------------------------------------------------------------- program obligations
def brute_noninterference(e: Enumeration) -> list[tuple]:
    out = []
    for cell, users in e.by_cell().items():
        for i, (x, a) in enumerate(users):
            for y, b in users[i + 1:]:
                if (a.writes or b.writes) and x != y and not e.hb(x, y) and not e.hb(y, x):
                    out.append(("race", x, y, cell, a.may or b.may))
    return out


def brute_reduction_policy(e: Enumeration) -> list[tuple]:
    out = []
    for cell, users in e.by_cell().items():
        for i, (x, a) in enumerate(users):
            for y, b in users[i + 1:]:
                same_reducer = a.mode == b.mode == "update" and (a.op, a.policy) == (b.op, b.policy)
                if not (a.writes or b.writes) or same_reducer:
                    continue
                k = _first_difference(x, y)
                if k is not None and x.stmt.loops[k].node.kind == "reduce" and x.stmt.loops[k].order == "ordered":
                    out.append(("reduce interaction", x, y, cell, a.may or b.may))
    return out


def _first_difference(x: BInst, y: BInst):
    for k in range(common_depth(x.stmt, y.stmt)):
        if x.coords[k] != y.coords[k]:
            return k
    return None


def brute_bounds(e: Enumeration) -> list[tuple]:
    out = []
    for s in e.m.statements:
        for x in e.instances(s):
            if s.kind == "decl" and any(e.ev(n, x) < 0 for n in s.target.shape):
                out.append(("negative extent", x, s.target.name))
                continue
            for a in s.accesses:
                for cell in e.cells(x, a):
                    shape = [e.ev(n, x) for n in a.buffer.shape]
                    if a.index is not None and any(not 0 <= i < n for i, n in zip(cell[2], shape)):
                        out.append(("out of bounds", x, a.buffer.name, cell[2], a.may))
    return out


def brute_barrier_uniform(e: Enumeration) -> list[tuple]:
    out = []
    for b in e.m.barriers:
        levels = participant_levels(b.loops, b.node.scope)
        for x in e.instances(b):
            for other in _participants(e, b, x, levels):
                if not e.member(other):
                    out.append(("not reached", x, other))
    return out


def _participants(e: Enumeration, b: Stmt, x: BInst, levels: list[int]) -> Iterator[BInst]:
    def rec(k: int, coords: list[int]) -> Iterator[BInst]:
        if k == len(levels):
            yield BInst(b, tuple(coords))
            return
        level = levels[k]
        probe = BInst(b, tuple(coords))
        node = b.loops[level].node
        start = e.ev(node.start, probe)
        for v in range(start, start + e.ev(node.extent, probe)):
            yield from rec(k + 1, coords[:level] + [v] + coords[level + 1:])

    yield from rec(0, list(x.coords))


# ----------------------------------------------------------------------------- transforms
class Transform:
    """The concrete correspondence of a transform: each new instance's old images under tau."""

    def __init__(self, c: Correspondence, sizes: Mapping[str, int]) -> None:
        self.c = c
        self.old = Enumeration(c.old, sizes)
        self.new = Enumeration(c.new, sizes)
        self.images: dict[BInst, list[BInst]] = {}
        for s in c.new.statements:
            if not s.effectful:
                continue
            img = c.images.get(s.id)
            for xn in self.new.instances(s):
                found = []
                if img is not None:
                    for p in img.pieces:
                        if not self.new.ev(p.guard, xn):
                            continue
                        subst = dict(p.subst)
                        xo = BInst(img.old, tuple(self.new.ev(subst[v], xn) for v in img.old.vars))
                        if self.old.member(xo) and self.same_operation(xo, xn):
                            found.append(xo)
                self.images[xn] = found
        self.preimages: dict[BInst, list[BInst]] = {}
        for xn, olds in self.images.items():
            for xo in olds:
                self.preimages.setdefault(xo, []).append(xn)

    def same_operation(self, xo: BInst, xn: BInst) -> bool:
        o, n = xo.stmt.node, xn.stmt.node
        if type(o) is not type(n):
            return False
        if isinstance(o, L.Decl):
            return ((o.buf.dtype, o.buf.scope) == (n.buf.dtype, n.buf.scope)
                    and [self.old.ev(e, xo) for e in o.buf.shape] == [self.new.ev(e, xn) for e in n.buf.shape])
        if isinstance(o, L.Accum) and (o.op, o.policy) != (n.op, n.policy):
            return False
        target_o = (xo.stmt.target, tuple(self.old.ev(e, xo) for e in o.index))
        target_n = (self.c.buffer_of(xn.stmt.target), tuple(self.new.ev(e, xn) for e in n.index))
        return target_o == target_n and (self._tree(o.value, xo, self.old, None) ==
                                         self._tree(n.value, xn, self.new, self.c.buffer_of))

    def _tree(self, v: L.SExpr, x: BInst, en: Enumeration, mapping) -> Any:
        """The operation a value performs at ``x``: loads as old buffers and concrete cells."""
        if isinstance(v, L.Sel) and isinstance(v.cond, L.Ix):
            return self._tree(v.a if en.ev(v.cond.expr, x) else v.b, x, en, mapping)
        if isinstance(v, L.Ld):
            buf = next(a.buffer for a in x.stmt.accesses if a.mode == "read" and a.buffer.name == v.buf)
            return ("ld", mapping(buf) if mapping else buf, tuple(en.ev(e, x) for e in v.index))
        if isinstance(v, L.Lit):
            return ("lit", literal_key(v))
        if isinstance(v, L.Ix):
            return ("ix", en.ev(v.expr, x), v.dtype)
        if isinstance(v, (L.Un, L.Cvt)):
            return (type(v).__name__, getattr(v, "fn", None), v.dtype, self._tree(v.x, x, en, mapping))
        if isinstance(v, L.Bin):
            return ("bin", v.fn, v.dtype, self._tree(v.a, x, en, mapping), self._tree(v.b, x, en, mapping))
        return ("sel", v.dtype, self._tree(v.cond, x, en, mapping), self._tree(v.a, x, en, mapping),
                self._tree(v.b, x, en, mapping))


def brute_coverage(t: Transform) -> list[tuple]:
    out = []
    for xn, olds in t.images.items():
        if xn.stmt.kind != "decl" and not olds:
            out.append(("extra", xn))
    for s in t.c.old.effectful:
        for xo in t.old.instances(s):
            pre = t.preimages.get(xo, [])
            if not pre:
                out.append(("lost", xo))
            elif len(pre) > 1 and s.kind != "decl":
                out.append(("twice", xo, pre))
    return out


def brute_dependence(t: Transform) -> list[tuple]:
    out = []
    for cell, users in t.old.by_cell().items():
        for x, a in users:
            for y, b in users:
                if x == y or not (a.writes or b.writes) or commute(a, b) or not t.old.hb(x, y):
                    continue
                for xn in t.preimages.get(x, []):
                    for yn in t.preimages.get(y, []):
                        if not t.new.hb(xn, yn):
                            out.append(("reordered", x, y, xn, yn, cell, a.may or b.may))
    return out


def brute_prefix_cut(t: Transform) -> list[tuple]:
    out = []
    for b in t.c.old.buffers:
        if b.decl is None:
            continue
        forward: dict[tuple, set] = {}
        backward: dict[tuple, set] = {}
        for nb in t.c.new.buffers:
            if nb.decl is None or t.c.buffer_of(nb) is not b:
                continue
            for s in t.c.new.statements:
                if not any(a.buffer is nb for a in s.accesses):
                    continue
                for xn in t.new.instances(s):
                    for xo in t.images.get(xn, []):
                        new_owner = (id(nb), xn.coords[:len(nb.owner_loops)])
                        old_owner = xo.coords[:len(b.owner_loops)]
                        forward.setdefault(new_owner, set()).add(old_owner)
                        backward.setdefault(old_owner, set()).add(new_owner)
        out += [("factor", b.name, k, v) for k, v in forward.items() if len(v) > 1]
        out += [("inject", b.name, k, v) for k, v in backward.items() if len(v) > 1]
    return out



PROGRAM_OBLIGATIONS = {"noninterference": brute_noninterference, "reduction_policy": brute_reduction_policy,
                       "barrier_uniform": brute_barrier_uniform, "bounds": brute_bounds}
TRANSFORM_OBLIGATIONS = {"coverage": brute_coverage, "prefix_cut": brute_prefix_cut, "dependence": brute_dependence}


def brute_check_schedule(s: Any, sizes: Mapping[str, int], timeout_ms: int = 2000) -> list[tuple[str, str, int]]:
    """Every obligation of a schedule by enumeration at concrete ``sizes``: (subject, kind, violations),
    subjects named as ``check_schedule`` names them.

    The statement-level correspondence of each op is the symbolic checker's (which old statement a new
    one stands for; a program with temporaries is compared in its restored and inlined form, as
    ``check.py`` does, and not at all where they cannot be read through); everything about instances is enumerated."""
    sizes = {**s.sizes, **dict(sizes)}
    names = subjects(s)
    first = Enumeration(Model(s.programs[0], sizes), sizes)
    out = [(names[0], kind, len(fn(first))) for kind, fn in PROGRAM_OBLIGATIONS.items()]
    for k, t in enumerate(s.transforms):
        c = correspond(Model(s.programs[k], sizes), Model(s.programs[k + 1], sizes), t.tau, timeout_ms, t.datamaps)
        compared = through_temporaries(c, t.tau, timeout_ms, t.datamaps)
        if not isinstance(compared, str):
            tr = Transform(compared, sizes)
            out += [(names[k + 1], kind, len(fn(tr))) for kind, fn in TRANSFORM_OBLIGATIONS.items()]
        new = Enumeration(c.new, sizes)
        out += [(names[k + 1], kind, len(fn(new))) for kind, fn in PROGRAM_OBLIGATIONS.items()]
    return out
