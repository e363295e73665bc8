"""The data of a software pipeline: its stages, the dependence edges between them and a modulo plan.

A pipeline loop over ``i in [0, N)`` (``N`` the trip count, symbolic) has stages ``0 .. S-1`` in source
order. A plan fixes, for every stage ``s``, the issue time of iteration ``i``::

    Issue(s, i) = i * interval + theta(s)

and is legal when, for every edge ``e = (p, c, d, payload)`` and every ``i`` with ``0 <= i`` and
``i + d < N``::

    Issue(c, i + d) >= Issue(p, i) + latency(e)

(``pipeline_schedule``), every materialized buffer has enough slots that two versions sharing one have
disjoint live intervals (``versions``) and every reader of a version joins its release (``release``).
Nothing here is target code: ``latency`` prices an edge from its producer's class on a target.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

STAGE_CLASSES = ("copy", "mma", "compute")
"""What a stage does, for the latency table: ``copy`` moves data only (global to a tile), ``mma`` accumulates
products, ``compute`` is anything else."""

PAYLOADS = ("value", "effect")
"""An edge carries a tile value (a buffer the expansion minted for an SSA value) or a memory effect (a tensor or a
memory the program allocates)."""

DEPS = ("flow", "anti", "output")
"""Read after write, write after read, write after write."""


@dataclass(frozen=True)
class StageInfo:
    """Stage ``ordinal`` of a pipeline: its label, latency class and whether its membership was inferred."""

    ordinal: int
    name: str
    cls: str = "compute"
    inferred: bool = False


@dataclass(frozen=True)
class Edge:
    """``consumer`` at iteration ``i + distance`` depends on ``producer`` at iteration ``i`` through ``buffer``.

    ``distance`` is the least such distance (>= 0; 0 only for ``producer < consumer``); ``max_distance`` the
    greatest one a value flows (None: unbounded), which sets how long a version lives."""

    producer: int
    consumer: int
    distance: int
    payload: str
    buffer: str
    dep: str = "flow"
    max_distance: Optional[int] = None

    def __str__(self) -> str:
        return f"{self.producer} -> {self.consumer} (d={self.distance}, {self.dep} {self.payload} {self.buffer})"


@dataclass(frozen=True)
class StageGraph:
    """The stage graph of one pipeline loop: ``loop`` is its name, ``trip`` its trip count (an index expression
    over the sizes), ``materialized`` the buffers written in one stage and read in another (the only ones that may
    get versions), ``notes`` what the analysis could not model exactly (taken conservatively)."""

    pipeline: int
    loop: str
    stages: tuple[StageInfo, ...]
    edges: tuple[Edge, ...]
    materialized: tuple[str, ...] = ()
    trip: object = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ModuloPlan:
    """A modulo plan for one pipeline loop.

    ``offsets[s]`` is ``theta(s)``; ``window`` bounds the iterations in flight (0: unbounded). ``versions``
    overrides the slot count derived for a buffer; ``waits`` lists the ``(producer, consumer, buffer)`` edges whose
    consumer waits for the producer's completion (None: every flow edge, the derived protocol); ``releases`` maps a
    buffer to the reader stages whose completion its slot's reuse waits for (None: every actual reader). The
    overrides exist so that a plan can be stated exactly as a user or a compiler wrote it, and checked."""

    interval: int
    offsets: tuple[int, ...]
    window: int = 0
    target: str = "c"
    versions: tuple[tuple[str, int], ...] = ()
    waits: Optional[tuple[tuple[int, int, str], ...]] = None
    releases: Optional[tuple[tuple[str, tuple[int, ...]], ...]] = None
    planned: bool = field(default=False, compare=False)
    """True when the planner chose it (the printout says so)."""

    def issue(self, stage: int, i: int) -> int:
        """``Issue(stage, i) = i * interval + theta(stage)``."""
        return i * self.interval + self.offsets[stage]
