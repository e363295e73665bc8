"""What a modulo plan implies: kernel columns, prologue / steady state / epilogue, versions, slots, protocol.

With ``II = plan.interval`` and ``theta = plan.offsets``:

- the kernel has ``C = max(theta) // II + 1`` columns; tick ``j`` in ``[0, N + C - 1)`` runs stage ``s`` for
  iteration ``i = j - theta(s) // II`` when ``0 <= i < N``: ticks ``[0, C - 1)`` are the prologue, ``[C - 1, N)``
  the steady state (every stage active), ``[N, N + C - 1)`` the epilogue;
- a materialized buffer ``b`` written by stage ``p`` and read by stages ``r`` (at distances up to ``d_r``) holds
  version ``i`` from ``Issue(p, i)`` until its release, the completion of its last joined reader,
  ``max_r Issue(r, i + d_r) + latency(r)``; the next write into the same slot, version ``i + V``, issues at
  ``Issue(p, i) + V * II``, so ``V = max(1, ceil((max_r (theta(r) + d_r * II + latency(r)) - theta(p)) / II))``
  slots suffice, indexed ``i mod V``. A buffer that needs one slot gets no ring (pure SSA edges acquire no
  fictitious versions). ``plan.versions`` overrides ``V``;
- the protocol: each flow edge's consumer waits for its producer's completion (``plan.waits``, or every flow
  edge); a slot's reuse waits for the release of every reader the plan joins (``plan.releases``, or every
  actual reader of the buffer).
"""
from __future__ import annotations

from dataclasses import dataclass

from .latency import stage_latency
from .plan import Edge, ModuloPlan, StageGraph


@dataclass(frozen=True)
class Ring:
    """Buffer ``buffer``, written by stage ``producer``, gets ``versions`` slots (version ``i`` in slot ``i mod
    versions``); ``readers`` are the stages whose release its reuse waits for."""

    buffer: str
    producer: int
    versions: int
    readers: tuple[int, ...]


@dataclass(frozen=True)
class Derived:
    plan: ModuloPlan
    columns: int
    rings: tuple[Ring, ...]
    waits: tuple[tuple[int, int, str], ...]

    def column(self, stage: int) -> int:
        """The kernel column of ``stage``: at tick ``j`` it runs iteration ``j - column``."""
        return self.plan.offsets[stage] // self.plan.interval

    def ring(self, buffer: str) -> Ring | None:
        return next((r for r in self.rings if r.buffer == buffer), None)


def flow_edges(graph: StageGraph, buffer: str) -> list[Edge]:
    return [e for e in graph.edges if e.buffer == buffer and e.dep == "flow"]


def constrains(graph: StageGraph, e: Edge) -> bool:
    """Whether edge ``e`` constrains the schedule: every edge but a write after a read or a write of another version
    (anti or output at ``d >= 1``) of a materialized buffer that flow edges read; its slots rename that buffer, and
    the versions rule (a slot's next write after the release of the version in it) decides such an edge instead."""
    return not (e.dep != "flow" and e.distance >= 1 and e.buffer in graph.materialized and flow_edges(graph, e.buffer))


def joined_readers(graph: StageGraph, plan: ModuloPlan, buffer: str) -> tuple[int, ...]:
    """The reader stages whose release the reuse of ``buffer``'s slot waits for under ``plan``."""
    if plan.releases is not None:
        return dict(plan.releases).get(buffer, ())
    return tuple(sorted({e.consumer for e in flow_edges(graph, buffer)}))


def needed_versions(graph: StageGraph, plan: ModuloPlan, buffer: str, readers: tuple[int, ...]) -> int:
    """``max(1, ceil((max_r (theta(r) + d_r * II + latency(r)) - theta(p)) / II))`` over the readers given (an
    unbounded flow distance needs unboundedly many: refused by the caller before)."""
    ii, theta = plan.interval, plan.offsets
    edges = [e for e in flow_edges(graph, buffer) if e.consumer in readers]
    if not edges:
        return 1
    p = edges[0].producer
    span = max(theta[e.consumer] + (e.max_distance if e.max_distance is not None else e.distance) * ii
               + stage_latency(graph, e.consumer, plan.target) for e in edges) - theta[p]
    return max(1, -(-span // ii))


def derive(graph: StageGraph, plan: ModuloPlan) -> Derived:
    """The columns, rings and waits ``plan`` implies for ``graph`` (see the module docstring)."""
    overrides = dict(plan.versions)
    rings = []
    for b in graph.materialized:
        flows = flow_edges(graph, b)
        if not flows:
            continue
        readers = joined_readers(graph, plan, b)
        v = overrides.get(b, needed_versions(graph, plan, b, readers))
        if v > 1 or b in overrides:
            rings.append(Ring(b, flows[0].producer, v, readers))
    waits = plan.waits if plan.waits is not None else tuple(
        (e.producer, e.consumer, e.buffer) for e in graph.edges if e.dep == "flow")
    columns = max(plan.offsets, default=0) // plan.interval + 1
    return Derived(plan, columns, tuple(rings), tuple(waits))
