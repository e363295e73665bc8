"""Noninterference bookkeeping for checked execution of concurrent regions and loops: the one
recorder of the tile-level interpreters (``interp``, ``interp_fast``) and the loop-level one.

Each execution of a concurrent region opens a scope; every tensor cell an instance reads
or writes is recorded with that instance. When the scope ends, a cell written by one
instance and read or written by another is a violation (``W(i) & (R(j) | W(j))`` nonempty
for ``i != j``), reported with both instances, the cell and both accesses. The scope's
records then count as accesses of the enclosing scope's current instance, so conflicts
between instances of an outer region are found too; accesses in different executions of
an inner region (e.g. successive iterations of a serial loop) are never compared.

A scope whose instances run together (a batch) records each access with one instance
number per cell, and ``lift`` maps its instance numbers to those of the enclosing scope
when its records are passed on. A *grouped* scope (``group=n``) stands for one execution
of the region per instance of the enclosing scope, all run at once: instance number
``x`` is instance ``x % n`` of the execution for enclosing instance ``x // n``, and only
instances of one execution are compared. ``restart`` ends and reopens the innermost scopes
at a barrier: accesses in different barrier phases of those scopes are never compared.

The reported conflict does not depend on the order of the records: the first execution
(smallest group), then the smallest cell in it, the writer with the smallest instance
number and the other instance with the smallest number; for each of the two, its first
recorded access of the cell (its first write, for the writer).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from .errors import Loc, NoninterferenceError


@dataclass
class _Scope:
    name: str
    loc: Loc
    instances: Sequence[tuple[int, ...]] = field(default_factory=list)
    group: Optional[int] = None
    accesses: list[str] = field(default_factory=list)
    # per buffer: (cells, is_write, instance number of each cell, access number)
    records: dict[str, list[tuple[np.ndarray, bool, np.ndarray, int]]] = field(default_factory=dict)
    # per buffer: (origins (items x rank), box extents, buffer shape, is_write, instance of each item, access number)
    boxes: dict[str, list[tuple[np.ndarray, tuple[int, ...], tuple[int, ...], bool, np.ndarray, int]]] = \
        field(default_factory=dict)


class Grid(Sequence):
    """The instances of a batched scope: every point of the given coordinate axes, row-major."""

    def __init__(self, coords: list[np.ndarray]) -> None:
        self.coords = coords
        self.shape = tuple(len(c) for c in coords)

    def __len__(self) -> int:
        return int(np.prod(self.shape))

    def __getitem__(self, i: int) -> tuple[int, ...]:  # type: ignore[override]
        at = np.unravel_index(int(i), self.shape)
        return tuple(int(c[j]) for c, j in zip(self.coords, at))


class Recorder:
    def __init__(self) -> None:
        self.scopes: list[_Scope] = []

    @property
    def open(self) -> bool:
        return bool(self.scopes)

    def begin(self, name: str, loc: Loc, instances: Optional[Sequence[tuple[int, ...]]] = None,
              group: Optional[int] = None) -> None:
        """Open a scope; ``instances`` names a batch's instances up front (else ``instance`` adds them);
        ``group``: the instance count of one execution of a grouped scope (see the module doc)."""
        self.scopes.append(_Scope(name, loc, [] if instances is None else instances, group))

    def instance(self, point: tuple[int, ...]) -> None:
        self.scopes[-1].instances.append(point)  # type: ignore[attr-defined]

    def record(self, buf: str, cells: np.ndarray, is_write: bool, what: str,
               insts: Optional[np.ndarray] = None) -> None:
        """Record an access of ``cells`` (an array of any shape), by the current instance or by ``insts``
        (broadcastable to ``cells``: the instance of each cell)."""
        scope = self.scopes[-1]
        scope.accesses.append(what)
        if insts is None:
            cells = np.unique(cells)
            insts = np.full(len(cells), len(scope.instances) - 1)
        scope.records.setdefault(buf, []).append((cells, is_write, insts, len(scope.accesses) - 1))

    def record_boxes(self, buf: str, shape: tuple[int, ...], origins: np.ndarray, box: tuple[int, ...],
                     is_write: bool, what: str, insts: np.ndarray) -> None:
        """Record an access of the cells inside ``shape`` of a box of extents ``box`` at each row of
        ``origins`` (items x rank), by instance ``insts[item]``."""
        scope = self.scopes[-1]
        scope.accesses.append(what)
        scope.boxes.setdefault(buf, []).append((origins, box, shape, is_write, insts, len(scope.accesses) - 1))

    def restart(self, count: int, describe_cell: Callable[[str, int], tuple[int, ...]],
                shared: Callable[[str, int], bool], lifts: Sequence[Optional[Callable[[np.ndarray], np.ndarray]]]
                ) -> None:
        """A barrier of the innermost ``count`` scopes: end them (innermost first, ``lifts[k]`` for the
        k-th from the top) and reopen them with the same instances."""
        closed = []
        for k in range(count):
            scope = self.scopes[-1]
            closed.append((scope.name, scope.loc, scope.instances, scope.group))
            self.end(describe_cell, shared, lifts[k])
        for name, loc, instances, group in reversed(closed):
            self.begin(name, loc, instances, group)

    def end(self, describe_cell: Callable[[str, int], tuple[int, ...]],
            shared: Callable[[str, int], bool] = lambda buf, depth: True,
            lift: Optional[Callable[[np.ndarray], np.ndarray]] = None) -> None:
        """Check the closing scope; pass on the records of buffers ``shared`` at the parent's depth, as
        accesses of the parent's current instance or of the instances ``lift`` maps them to."""
        scope = self.scopes.pop()
        found = []
        for buf in sorted(set(scope.records) | set(scope.boxes)):
            boxes = scope.boxes.get(buf, [])
            if buf not in scope.records and not _boxes_may_conflict(boxes, scope.group):
                continue
            hit = _first_conflict(buf, scope.records.get(buf, []) + [_box_cells(*b) for b in boxes], scope.group)
            if hit is not None:
                found.append(hit)
        if found:
            _, _, buf, cell, (iw, aw), (io, ao) = min(found)
            named = lambda i: scope.instances[i % scope.group if scope.group else i]  # noqa: E731
            (n1, a1), (n2, a2) = sorted([(iw, aw), (io, ao)])
            i1, i2 = named(n1), named(n2)
            raise NoninterferenceError(
                f"concurrent {scope.name}: instances {i1} and {i2} both access "
                f"{buf}{list(describe_cell(buf, cell))}: "
                f"instance {i1} by the {scope.accesses[a1]}, instance {i2} by the {scope.accesses[a2]}",
                scope.loc,
                "concurrent instances must not touch a cell another instance writes (a barrier of their scope "
                "separates phases); use a reduction, a serial loop or a barrier")
        if self.scopes:
            parent = self.scopes[-1]
            for buf, recs in scope.records.items():
                if not shared(buf, len(self.scopes)):
                    continue
                for cells, is_write, insts, a in recs:
                    parent.accesses.append(scope.accesses[a])
                    up = np.asarray(len(parent.instances) - 1) if lift is None else lift(insts)
                    parent.records.setdefault(buf, []).append((cells, is_write, up, len(parent.accesses) - 1))
            for buf, boxes in scope.boxes.items():
                if not shared(buf, len(self.scopes)):
                    continue
                for origins, box, shape, is_write, insts, a in boxes:
                    parent.accesses.append(scope.accesses[a])
                    up = np.full(len(insts), len(parent.instances) - 1) if lift is None else lift(insts)
                    parent.boxes.setdefault(buf, []).append((origins, box, shape, is_write, up,
                                                             len(parent.accesses) - 1))


# Box records are compared pairwise (writer items x all items) up to this many pairs, else cell by cell.
PAIRS_MAX = 1 << 20


def _boxes_may_conflict(boxes: list, group: Optional[int]) -> bool:
    """Whether two items of the box records, of different instances of one execution and one of them
    a write, share a cell: their boxes clipped to the buffer intersect on every axis (True also when
    there are too many pairs to tell; the cells decide then)."""
    if not boxes:
        return False
    lo = np.concatenate([np.maximum(o, 0) for o, _, _, _, _, _ in boxes])
    hi = np.concatenate([np.minimum(o + np.asarray(b, np.int64), np.asarray(sh, np.int64))
                         for o, b, sh, _, _, _ in boxes])
    writes = np.concatenate([np.full(len(o), w) for o, _, _, w, _, _ in boxes])
    insts = np.concatenate([np.asarray(i, np.int64) for _, _, _, _, i, _ in boxes])
    live = np.all(hi > lo, axis=1)
    w, a = np.nonzero(writes & live)[0], np.nonzero(live)[0]
    if not w.size:
        return False
    if w.size * a.size > PAIRS_MAX:
        return True
    meet = np.all((lo[w][:, None] < hi[a][None]) & (lo[a][None] < hi[w][:, None]), axis=2)
    other = insts[w][:, None] != insts[a][None]
    if group:
        other &= (insts[w] // group)[:, None] == (insts[a] // group)[None]
    return bool((meet & other).any())


def _box_cells(origins: np.ndarray, box: tuple[int, ...], shape: tuple[int, ...], is_write: bool,
               insts: np.ndarray, access: int) -> tuple[np.ndarray, bool, np.ndarray, int]:
    """A box record as a cell record: the row-major cells inside ``shape`` of every item's box."""
    r = len(box)
    idx = [origins[:, a].reshape((-1,) + (1,) * a + (1,) + (1,) * (r - a - 1)) +
           np.arange(n).reshape((1,) * (a + 1) + (n,) + (1,) * (r - a - 1)) for a, n in enumerate(box)]
    full = (len(origins),) + tuple(box)
    inside = np.ones(full, bool)
    for ia, n in zip(idx, shape):
        inside = inside & (ia >= 0) & (ia < n)
    cells = np.ravel_multi_index(tuple(np.broadcast_to(ia, full)[inside] for ia in idx), shape) if r \
        else np.zeros(int(inside.sum()), np.int64)
    return cells, is_write, np.broadcast_to(np.asarray(insts).reshape((-1,) + (1,) * r), full)[inside], access


def _first_conflict(buf: str, recs: list[tuple[np.ndarray, bool, np.ndarray, int]], group: Optional[int]):
    """``(group, cell, buf, cell, (writer, its access), (other, its access))`` of the first conflict
    on ``buf`` in the order of the module doc, or None. Only cells somebody writes can conflict."""
    wrecs = [r[0].reshape(-1) for r in recs if r[1] and r[0].size]
    if not wrecs:
        return None
    top = max(int(r[0].max()) for r in recs if r[0].size) + 1
    total = sum(r[0].size for r in recs)
    if top <= 8 * total + 4096:  # a quick test first: does any cell a write touches have two instances?
        owner = np.full(top, -1, np.int64)
        for cells, is_write, insts, _ in recs:
            if is_write and cells.size:
                owner[cells] = np.broadcast_to(insts, cells.shape)
        if not any((((o := owner[cells]) >= 0) & (o != insts)).any() for cells, _, insts, _ in recs if cells.size):
            return None
    written = np.zeros(top, bool) if top <= 8 * total + 4096 else None
    if written is not None:
        written[np.concatenate(wrecs)] = True
    parts = []
    for k, (cells, is_write, insts, a) in enumerate(recs):
        sel = written[cells] if written is not None else np.isin(cells, np.concatenate(wrecs))
        if sel.any():
            parts.append((cells[sel].reshape(-1), is_write, np.broadcast_to(insts, cells.shape)[sel].reshape(-1), k))
    cells = np.concatenate([c for c, _, _, _ in parts]).astype(np.int64, copy=False)
    insts = np.concatenate([i for _, _, i, _ in parts]).astype(np.int64, copy=False)
    writes = np.concatenate([np.full(len(c), w) for c, w, _, _ in parts])
    which = np.concatenate([np.full(len(c), k) for c, _, _, k in parts])
    groups = insts // group if group else np.zeros_like(insts)
    g0 = int(groups.min())
    span = int(groups.max()) - g0 + 1
    if span * top <= 8 * len(cells) + 4096:  # dense keys
        ids, nkeys = (groups - g0) * top + cells, span * top
    else:
        _, ids = np.unique(np.stack([groups, cells], axis=1), axis=0, return_inverse=True)
        ids, nkeys = ids.reshape(-1), int(ids.max()) + 1
    lo = np.full(nkeys, np.iinfo(np.int64).max, np.int64)
    hi = np.full(nkeys, -1, np.int64)
    np.minimum.at(lo, ids, insts)
    np.maximum.at(hi, ids, insts)
    hasw = np.zeros(nkeys, bool)
    hasw[ids[writes]] = True
    bad = np.nonzero(hasw & (lo != hi))[0]
    if not bad.size:
        return None
    at = np.nonzero(np.isin(ids, bad))[0]
    key = min(zip(groups[at].tolist(), cells[at].tolist()))
    at = at[(groups[at] == key[0]) & (cells[at] == key[1])]
    iw = int(insts[at][writes[at]].min())
    io = int(insts[at][insts[at] != iw].min())

    def first(inst: int, write_only: bool) -> int:
        k = at[(insts[at] == inst) & (writes[at] | (not write_only))]
        return min(recs[int(j)][3] for j in np.unique(which[k]))
    return key[0], key[1], buf, key[1], (iw, first(iw, True)), (io, first(io, False))
