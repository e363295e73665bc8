"""What the three plan obligations (``pipeline_schedule``, ``versions``, ``release``) share.

A plan obligation is a question about the integers: is there a trip count ``N >= 0`` (the graph's trip count
where the bound sizes fix it, else any) and iterations ``i, ...`` making a formula of ``Issue(s, i) = i * II +
theta(s)`` false? ``II`` and ``theta`` are the plan's constants, so every formula is linear and z3 decides it for
all ``N``; ``least`` returns the counterexample with the least ``N`` (then the least ``i``, ...), the one a
witness reports. ``PlanWitness`` carries the facts of a counterexample (the edge, the iteration, the slot, the
two versions, the issue times) by name beside its summary.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import z3

from tilecert.semantics.index import IExpr, const_value
from tilecert.semantics.pipeline.derive import derive, flow_edges
from tilecert.semantics.pipeline.latency import stage_latency
from tilecert.semantics.pipeline.plan import Edge, ModuloPlan, StageGraph

from ..verdict import Instance, Verdict, Witness, disproved, proved, unknown


@dataclass(frozen=True)
class PlanWitness(Witness):
    """A counterexample to a plan obligation at trip count ``trip`` (None: at every one, a fault of the plan's
    structure); ``facts`` name what its summary states."""

    trip: Optional[int] = None
    facts: tuple[tuple[str, Any], ...] = ()

    def fact(self, name: str) -> Any:
        return dict(self.facts)[name]

    def lines(self) -> list[str]:
        head, *rest = super().lines()
        return [head, *([f"trip count: N = {self.trip}"] if self.trip is not None else []), *rest]


def trip_count(graph: StageGraph, sizes: Optional[Mapping[str, int]] = None) -> Optional[int]:
    """The pipeline loop's trip count where ``graph.trip`` is a constant under ``sizes`` (None: symbolic)."""
    if isinstance(graph.trip, int):
        return graph.trip
    return const_value(graph.trip, sizes) if isinstance(graph.trip, IExpr) else None


class Query:
    """Integer variables over one pipeline loop: ``N`` (the trip count) and the iterations a formula names."""

    def __init__(self, plan: ModuloPlan, trip: Optional[int]) -> None:
        self.plan = plan
        self.n = z3.Int("N")
        self.base: list[z3.BoolRef] = [self.n >= 0] + ([self.n == trip] if trip is not None else [])

    def issue(self, stage: int, i: z3.ArithRef) -> z3.ArithRef:
        """``Issue(stage, i) = i * II + theta(stage)``."""
        return i * self.plan.interval + self.plan.offsets[stage]

    def distance(self, e: Edge, name: str) -> tuple[z3.ArithRef, list[z3.BoolRef]]:
        """A distance of ``e``: between its least and its greatest (unbounded when that is None)."""
        d = z3.Int(name)
        return d, [d >= e.distance] + ([d <= e.max_distance] if e.max_distance is not None else [])

    def least(self, constraints: Sequence[z3.BoolRef], order: Sequence[z3.ArithRef],
              timeout_ms: int) -> tuple[str, Optional[dict[str, int]]]:
        """``("sat", values)`` for the solution of ``constraints`` least in ``N``, then ``order`` (by name),
        ``("unsat", None)``, or ``("unknown", None)`` when z3 does not decide within ``timeout_ms``."""
        opt = z3.Optimize()
        opt.set("timeout", timeout_ms)
        opt.add(*self.base, *constraints)
        for v in (self.n, *order):
            opt.minimize(v)
        answer = opt.check()
        if answer == z3.sat:
            model = opt.model()
            return "sat", {str(v): model.eval(v, model_completion=True).as_long() for v in (self.n, *order)}
        return ("unsat", None) if answer == z3.unsat else ("unknown", None)


def query(graph: StageGraph, plan: ModuloPlan, sizes: Optional[Mapping[str, int]]) -> Query | Verdict:
    """The query over ``plan``'s loop (the trip count fixed where ``sizes`` fix it), or the unknown verdict when
    ``plan`` is no modulo plan of ``graph`` (``pipeline_schedule`` says why)."""
    if len(plan.offsets) != len(graph.stages) or plan.interval < 1:
        return unknown("the plan is no modulo plan of this graph (pipeline_schedule says why)", "structure")
    return Query(plan, trip_count(graph, sizes))


def verdict(found: Sequence[tuple[tuple[int, ...], PlanWitness]], reason: str = "") -> Verdict:
    """Disproved with the witness of least key (the trip count first) among ``found``, else proved."""
    if found:
        return disproved(min(found, key=lambda f: f[0])[1], "z3", reason)
    return proved("z3", reason)


@dataclass(frozen=True)
class Slots:
    """A materialized buffer some flow edge reads: its slot count ``versions`` under the plan (its ring's, else
    one: version ``i`` lives in slot ``i mod versions``), its flow edges and the stages writing it (producers of
    flow and output edges, consumers of anti and output edges)."""

    buffer: str
    versions: int
    flows: tuple[Edge, ...]
    producers: tuple[int, ...]


def slotted(graph: StageGraph, plan: ModuloPlan) -> list[Slots]:
    """Every materialized buffer of ``graph`` some flow edge reads, with its slots under ``plan``."""
    derived = derive(graph, plan)
    out = []
    for b in graph.materialized:
        flows = tuple(flow_edges(graph, b))
        if flows:
            ring = derived.ring(b)
            writers = {w for e in graph.edges if e.buffer == b
                       for w in ((e.producer,) if e.dep == "flow" else (e.consumer,) if e.dep == "anti"
                                 else (e.producer, e.consumer))}
            out.append(Slots(b, ring.versions if ring is not None else 1, flows, tuple(sorted(writers))))
    return out


def overwrite(q: Query, graph: StageGraph, producer: int, e: Edge, versions: int,
              live: bool) -> tuple[list[z3.BoolRef], list[z3.ArithRef]]:
    """The constraints and variables ``(i, m, d)`` of: ``e``'s consumer reads version ``i`` of ``e.buffer`` at
    iteration ``i + d < N`` (``d`` a distance of ``e``), and ``producer`` writes version ``j = i + V*m < N``
    (``m >= 1``) into the same slot; with ``live``, that write issues before the read completes:
    ``Issue(producer, j) < Issue(r, i + d) + latency(r)``."""
    i, m = z3.Int("i"), z3.Int("m")
    d, within = q.distance(e, "d")
    j = i + versions * m
    out = [i >= 0, m >= 1, j < q.n, i + d < q.n, *within]
    if live:
        out.append(q.issue(producer, j) < q.issue(e.consumer, i + d) + stage_latency(graph, e.consumer,
                                                                                    q.plan.target))
    return out, [i, m, d]


def instance(graph: StageGraph, stage: int, i: int) -> Instance:
    """Stage ``stage`` at iteration ``i`` of the pipeline loop, as a witness names it."""
    return Instance(f"stage {stage} {graph.stages[stage].name}", ((graph.loop, i),))


def stage_name(graph: StageGraph, stage: int) -> str:
    return f"stage {stage} ({graph.stages[stage].name})"
