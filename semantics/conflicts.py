"""Noninterference bookkeeping for checked execution of parallel regions and loops.

Each execution of a parallel region opens a scope; every tensor cell an instance reads
or writes is recorded with that instance. When the scope ends, a cell written by one
instance and read or written by another is a violation (``W(i) & (R(j) | W(j))`` nonempty
for ``i != j``), reported with both instances, the cell and both accesses. The scope's
records then count as accesses of the enclosing scope's current instance, so conflicts
between instances of an outer region are found too; accesses in different executions of
an inner region (e.g. successive iterations of a serial loop) are never compared.

A scope whose instances run together (a batch of lockstep instances) records each access
with one instance number per cell, and ``lift`` maps its instance numbers to those of the
enclosing scope when its records are passed on. ``restart`` ends and reopens the innermost
scopes at a barrier: accesses in different barrier phases of those scopes are never compared.
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
    accesses: list[str] = field(default_factory=list)
    # per buffer: (cells, is_write, instance number of each cell, access number)
    records: dict[str, list[tuple[np.ndarray, bool, np.ndarray, int]]] = field(default_factory=dict)


class Recorder:
    def __init__(self) -> None:
        self.scopes: list[_Scope] = []

    @property
    def open(self) -> bool:
        return bool(self.scopes)

    def begin(self, name: str, loc: Loc, instances: Optional[Sequence[tuple[int, ...]]] = None) -> None:
        """Open a scope; ``instances`` names a batch's instances up front (else ``instance`` adds them)."""
        self.scopes.append(_Scope(name, loc, [] if instances is None else instances))

    def instance(self, point: tuple[int, ...]) -> None:
        self.scopes[-1].instances.append(point)  # type: ignore[attr-defined]

    def record(self, buf: str, cells: np.ndarray, is_write: bool, what: str,
               insts: Optional[np.ndarray] = None) -> None:
        """Record an access of ``cells``, by the current instance or by ``insts`` (one per cell)."""
        scope = self.scopes[-1]
        scope.accesses.append(what)
        if insts is None:
            cells = np.unique(cells)
            insts = np.full(len(cells), len(scope.instances) - 1)
        scope.records.setdefault(buf, []).append((cells, is_write, insts, len(scope.accesses) - 1))

    def restart(self, count: int, describe_cell: Callable[[str, int], tuple[int, ...]],
                shared: Callable[[str, int], bool], lifts: Sequence[Optional[Callable[[np.ndarray], np.ndarray]]]
                ) -> None:
        """A barrier of the innermost ``count`` scopes: end them (innermost first, ``lifts[k]`` for the
        k-th from the top) and reopen them with the same instances."""
        closed = []
        for k in range(count):
            scope = self.scopes[-1]
            closed.append((scope.name, scope.loc, scope.instances))
            self.end(describe_cell, shared, lifts[k])
        for name, loc, instances in reversed(closed):
            self.begin(name, loc, instances)

    def end(self, describe_cell: Callable[[str, int], tuple[int, ...]],
            shared: Callable[[str, int], bool] = lambda buf, depth: True,
            lift: Optional[Callable[[np.ndarray], np.ndarray]] = None) -> None:
        """Check the closing scope; pass on the records of buffers ``shared`` at the parent's depth, as
        accesses of the parent's current instance or of the instances ``lift`` maps them to."""
        scope = self.scopes.pop()
        for buf, recs in scope.records.items():
            cells = np.concatenate([r[0] for r in recs])
            writes = np.concatenate([np.full(len(r[0]), r[1]) for r in recs])
            insts = np.concatenate([r[2] for r in recs])
            acc = np.concatenate([np.full(len(r[0]), r[3]) for r in recs])
            pairs = np.unique(np.stack([cells, insts], axis=1), axis=0) if cells.size else np.zeros((0, 2), int)
            ids, counts = np.unique(pairs[:, 0], return_counts=True)
            bad = np.intersect1d(ids[counts > 1], np.unique(cells[writes]))
            if bad.size:
                cell = int(bad[0])
                at = np.nonzero(cells == cell)[0]
                w = next(i for i in at if writes[i])
                other = next(i for i in at if insts[i] != insts[w])
                i1, i2 = scope.instances[insts[w]], scope.instances[insts[other]]
                raise NoninterferenceError(
                    f"concurrent {scope.name}: instances {i1} and {i2} both access "
                    f"{buf}{list(describe_cell(buf, cell))}: "
                    f"instance {i1} by the {scope.accesses[acc[w]]}, instance {i2} by the {scope.accesses[acc[other]]}",
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
                    up = np.full(len(cells), len(parent.instances) - 1) if lift is None else lift(insts)
                    parent.records.setdefault(buf, []).append((cells, is_write, up, len(parent.accesses) - 1))
