"""pipeline_schedule: a modulo plan issues every consumer late enough, and waits where a producer completes late.

For a plan with interval ``II`` and offsets ``theta`` of a stage graph (``semantics.pipeline.plan``), with the
trip count ``N`` symbolic (the graph's trip count where the bound sizes fix it):

    II >= 1;  columns = max(theta) // II + 1 <= window  (when window > 0);
    every flow edge (p, c, buffer) from a copy stage (every flow edge on an asynchronous target: cuda,
    cuda-host, where copies and mma complete after their issue) has its wait in the plan (``derive``:
    plan.waits, else every flow edge);
    for every edge e = (p, c, d):  forall i >= 0, i + d < N:  Issue(c, i + d) >= Issue(p, i) + latency(e)

with ``Issue(s, i) = i * II + theta(s)`` and ``latency(e) = edge_latency`` (the producer's class on the plan's
target). A write after a read or a write of another version (an anti or output edge of least distance >= 1) of
a materialized buffer that flow edges read is no constraint here (``derive.constrains``): the buffer's slots rename it, and ``versions``
decides whether a write into a slot waits for the reads of the version in it (within one version, at ``d = 0``,
the edge stays a constraint). A counterexample is the edge, the iteration ``i`` and the least ``N``, with both issue times and the latency (or the
flow edge whose consumer waits for nothing); the least ``N`` over all edges is reported.
"""
from __future__ import annotations

from typing import Mapping, Optional

import z3

from tilecert.semantics.pipeline.derive import constrains, derive
from tilecert.semantics.pipeline.latency import ASYNC_TARGETS, edge_latency
from tilecert.semantics.pipeline.plan import Edge, ModuloPlan, StageGraph

from ..solve import DEFAULT_TIMEOUT_MS
from ..verdict import Verdict, disproved, unknown
from .plan_common import PlanWitness, Query, instance, stage_name, trip_count, verdict

FORMULA = ("II >= 1; max(theta) // II + 1 <= window (window > 0); every flow edge from a copy stage (every one on "
           "an asynchronous target) waited for; for every edge "
           "(p, c, d): forall i >= 0, i + d < N: i*II + d*II + theta(c) >= i*II + theta(p) + latency(e), N symbolic")


def needs_wait(graph: StageGraph, plan: ModuloPlan, e: Edge) -> bool:
    """Whether flow edge ``e``'s consumer must wait for its producer: a copy's, or any on an asynchronous target."""
    return e.dep == "flow" and (graph.stages[e.producer].cls == "copy" or plan.target in ASYNC_TARGETS)


def check(graph: StageGraph, plan: ModuloPlan, *, sizes: Optional[Mapping[str, int]] = None,
          timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Verdict:
    """The ``pipeline_schedule`` verdict of ``plan`` for ``graph`` (module doc)."""
    if len(plan.offsets) != len(graph.stages):
        return unknown(f"the plan gives {len(plan.offsets)} offsets for {len(graph.stages)} stages", "structure")
    if plan.interval < 1:
        return disproved(PlanWitness(f"the interval is {plan.interval}: a modulo plan needs II >= 1"), "structure")
    columns = max(plan.offsets, default=0) // plan.interval + 1
    if 0 < plan.window < columns:
        return disproved(PlanWitness(f"{columns} iterations are in flight (max(theta) = {max(plan.offsets)}, II = "
                                     f"{plan.interval}), more than the window {plan.window}",
                                     facts=(("columns", columns),)), "structure")
    q = Query(plan, trip_count(graph, sizes))
    waits = set(derive(graph, plan).waits)
    found: list[tuple[tuple[int, ...], PlanWitness]] = []
    for e in graph.edges:
        if not constrains(graph, e):
            continue
        i = z3.Int("i")
        unwaited = needs_wait(graph, plan, e) and (e.producer, e.consumer, e.buffer) not in waits
        late = q.issue(e.consumer, i + e.distance) < q.issue(e.producer, i) + edge_latency(graph, e, plan.target)
        status, at = q.least([i >= 0, i + e.distance < q.n] + ([] if unwaited else [late]), [i], timeout_ms)
        if status == "unknown":
            return unknown(f"z3 did not decide edge {e} within {timeout_ms} ms", "z3")
        if status == "sat":
            found.append(((at["N"], at["i"]), _witness(graph, plan, e, at["N"], at["i"], unwaited)))
    return verdict(found)


def _witness(graph: StageGraph, plan: ModuloPlan, e: Edge, n: int, i: int, unwaited: bool) -> PlanWitness:
    lat = edge_latency(graph, e, plan.target)
    tp, tc = plan.issue(e.producer, i), plan.issue(e.consumer, i + e.distance)
    c, p = stage_name(graph, e.consumer), stage_name(graph, e.producer)
    if unwaited:
        summary = (f"edge {e}: {c} at iteration {i + e.distance} reads {e.buffer} from {p} at iteration {i} but the "
                   f"plan has no wait for it (it may read before the producer completes)")
    else:
        summary = (f"edge {e}: {c} issues iteration {i + e.distance} at {tc}, before {p}'s iteration {i} completes "
                   f"at {tp} + {lat} = {tp + lat}")
    return PlanWitness(summary, instances=(instance(graph, e.producer, i), instance(graph, e.consumer, i + e.distance)),
                       cell=e.buffer, trip=n,
                       facts=(("edge", e), ("i", i), ("N", n), ("producer_issue", tp), ("consumer_issue", tc),
                              ("latency", lat), ("wait", not unwaited)))
