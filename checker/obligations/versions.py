"""versions: two versions sharing a slot of a materialized buffer have disjoint live intervals.

For every materialized buffer ``b`` some flow edge reads, with ``V`` slots under the plan (its ring of
``derive(graph, plan)``, else one slot), version ``i`` in slot ``i mod V``, and the trip count ``N`` symbolic (the
graph's where the bound sizes fix it):

    forall i >= 0, m >= 1, j = i + V*m < N, every stage p writing b, every flow edge e = (p_e, r, d_e) of b,
    every distance d of e (d_e <= d <= max_distance(e)) with i + d < N:
        Issue(p, j) >= Issue(r, i + d) + latency(r)

i.e. ``Issue(p, j) >= release(i)``, the completion of the last read of version ``i`` by any ACTUAL reader (every
flow edge of the buffer, whichever readers the plan joins). An edge whose greatest distance is unbounded is
refused: disproved where a read can still be live, else unknown (no slot count is proved for reads arbitrarily
far). A counterexample is the buffer, the slot, the versions ``i`` and ``j``, the reader whose read is live, its
read's issue and completion and the overwrite's issue, at the least ``N``.
"""
from __future__ import annotations

from typing import Mapping, Optional

from tilecert.semantics.pipeline.latency import stage_latency
from tilecert.semantics.pipeline.plan import ModuloPlan, StageGraph

from ..solve import DEFAULT_TIMEOUT_MS
from ..verdict import Verdict, unknown
from .plan_common import PlanWitness, instance, overwrite, query, slotted, stage_name, verdict

FORMULA = ("for every materialized buffer with V slots (version i in slot i mod V): forall i >= 0, m >= 1, "
           "j = i + V*m < N, stage p writing b, flow edge (p_e, r, d) with i + d < N: Issue(p, j) >= Issue(r, i + d) + "
           "latency(r), N symbolic")


def check(graph: StageGraph, plan: ModuloPlan, *, sizes: Optional[Mapping[str, int]] = None,
          timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Verdict:
    """The ``versions`` verdict of ``plan`` for ``graph`` (module doc)."""
    q = query(graph, plan, sizes)
    if isinstance(q, Verdict):
        return q
    unbounded: list[str] = []
    found: list[tuple[tuple[int, ...], PlanWitness]] = []
    for s in slotted(graph, plan):
        for p in s.producers:
            for e in s.flows:
                constraints, order = overwrite(q, graph, p, e, s.versions, live=True)
                status, at = q.least(constraints, order, timeout_ms)
                if status == "unknown":
                    return unknown(f"z3 did not decide the slots of {s.buffer} within {timeout_ms} ms", "z3")
                if status == "sat":
                    found.append(((at["N"], at["i"], at["m"]), _witness(graph, plan, s.buffer, s.versions, p, e, at)))
                elif e.max_distance is None:
                    unbounded.append(f"{s.buffer} is read by {stage_name(graph, e.consumer)} at an unbounded "
                                     "distance")
    if unbounded and not found:
        return unknown("; ".join(unbounded) + ": no slot count is proved for reads arbitrarily far", "z3")
    return verdict(found)


def _witness(graph: StageGraph, plan: ModuloPlan, b: str, v: int, p: int, e, at: dict[str, int]) -> PlanWitness:
    n, i, d = at["N"], at["i"], at["d"]
    j = i + v * at["m"]
    r = e.consumer
    read = plan.issue(r, i + d)
    done = read + stage_latency(graph, r, plan.target)
    write = plan.issue(p, j)
    summary = (f"{b} has {v} slot{'s' * (v != 1)}: version {j} overwrites slot {i % v} at {write} "
               f"({stage_name(graph, p)}, iteration {j}), while version {i} in it is still read by "
               f"{stage_name(graph, r)} at iteration {i + d} (issued {read}, released {done})")
    return PlanWitness(summary, instances=(instance(graph, r, i + d), instance(graph, p, j)),
                       cell=f"{b} slot {i % v}", trip=n,
                       facts=(("buffer", b), ("slot", i % v), ("versions", v), ("i", i), ("j", j), ("N", n),
                              ("reader", r), ("read_issue", read), ("release", done), ("write_issue", write)))
