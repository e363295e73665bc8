"""Noninterference bookkeeping for checked execution of parallel regions and loops.

Each execution of a parallel region opens a scope; every tensor cell an instance reads
or writes is recorded with that instance. When the scope ends, a cell written by one
instance and read or written by another is a violation (``W(i) & (R(j) | W(j))`` nonempty
for ``i != j``), reported with both instances, the cell and both accesses. The scope's
records then count as accesses of the enclosing scope's current instance, so conflicts
between instances of an outer region are found too; accesses in different executions of
an inner region (e.g. successive iterations of a serial loop) are never compared.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .errors import Loc, NoninterferenceError


@dataclass
class _Scope:
    name: str
    loc: Loc
    instances: list[tuple[int, ...]] = field(default_factory=list)
    accesses: list[str] = field(default_factory=list)
    # per buffer: (cells, is_write, instance number, access number)
    records: dict[str, list[tuple[np.ndarray, bool, int, int]]] = field(default_factory=dict)


class Recorder:
    def __init__(self) -> None:
        self.scopes: list[_Scope] = []

    @property
    def open(self) -> bool:
        return bool(self.scopes)

    def begin(self, name: str, loc: Loc) -> None:
        self.scopes.append(_Scope(name, loc))

    def instance(self, point: tuple[int, ...]) -> None:
        self.scopes[-1].instances.append(point)

    def record(self, buf: str, cells: np.ndarray, is_write: bool, what: str) -> None:
        scope = self.scopes[-1]
        scope.accesses.append(what)
        scope.records.setdefault(buf, []).append(
            (np.unique(cells), is_write, len(scope.instances) - 1, len(scope.accesses) - 1))

    def end(self, describe_cell: Callable[[str, int], tuple[int, ...]],
            shared: Callable[[str, int], bool] = lambda buf, depth: True) -> None:
        """Check the closing scope; pass on the records of buffers ``shared`` at the parent's depth."""
        scope = self.scopes.pop()
        for buf, recs in scope.records.items():
            cells = np.concatenate([r[0] for r in recs])
            writes = np.concatenate([np.full(len(r[0]), r[1]) for r in recs])
            insts = np.concatenate([np.full(len(r[0]), r[2]) for r in recs])
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
                    f"parallel {scope.name}: instances {i1} and {i2} both access {buf}{list(describe_cell(buf, cell))}: "
                    f"instance {i1} by the {scope.accesses[acc[w]]}, instance {i2} by the {scope.accesses[acc[other]]}",
                    scope.loc,
                    "parallel instances must not touch a cell another instance writes; use a reduction or a serial loop")
        if self.scopes:
            parent = self.scopes[-1]
            for buf, recs in scope.records.items():
                if not shared(buf, len(self.scopes)):
                    continue
                for cells, is_write, _, a in recs:
                    parent.accesses.append(scope.accesses[a])
                    parent.records.setdefault(buf, []).append(
                        (cells, is_write, len(parent.instances) - 1, len(parent.accesses) - 1))
