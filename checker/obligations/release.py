"""release: a slot's reuse waits for every actual reader of the version in it.

For every materialized buffer ``b`` some flow edge reads, with ``V`` slots under the plan (its ring, else one),
the plan's joined readers ``J(b)`` (``plan.releases``, else every actual reader: ``derive.joined_readers``) must
include every actual reader, every consumer of a flow edge of ``b``:

    forall flow edges e = (p, r, d) of b:  r in J(b)   or   no version i read by r at i + d < N has its slot
                                                          rewritten by a version j = i + V*m < N (m >= 1)

A missing reader is disproved with the buffer, the reader, the version ``i`` it reads and the version ``j`` that
overwrites its slot (the least ``N``), and whether the timing alone would hide it (no such overwrite issues before
the read completes: ``versions`` would prove the slots, but nothing in the protocol makes the write wait). A
joined stage that never reads ``b`` is no safety error: it is reported in the verdict's reason (the derived
protocol joins exactly the readers).
"""
from __future__ import annotations

from typing import Mapping, Optional

from tilecert.semantics.pipeline.derive import joined_readers
from tilecert.semantics.pipeline.plan import Edge, ModuloPlan, StageGraph

from ..solve import DEFAULT_TIMEOUT_MS
from ..verdict import Verdict, unknown
from .plan_common import PlanWitness, instance, overwrite, query, slotted, stage_name, verdict

FORMULA = ("for every materialized buffer b with V slots: every consumer r of a flow edge (p, r, d) of b is "
           "joined by the release of b's slots, or no version i it reads (i + d < N) shares a slot with a version "
           "j = i + V*m < N, N symbolic")


def check(graph: StageGraph, plan: ModuloPlan, *, sizes: Optional[Mapping[str, int]] = None,
          timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Verdict:
    """The ``release`` verdict of ``plan`` for ``graph`` (module doc)."""
    q = query(graph, plan, sizes)
    if isinstance(q, Verdict):
        return q
    notes: list[str] = []
    found: list[tuple[tuple[int, ...], PlanWitness]] = []
    for s in slotted(graph, plan):
        joined = joined_readers(graph, plan, s.buffer)
        readers = {e.consumer for e in s.flows}
        notes += [f"{stage_name(graph, r)} joins the release of {s.buffer} but never reads it" for r in joined
                  if r not in readers]
        for r in sorted(readers - set(joined)):
            reuse, live = [], []  # the overwrites of a version r reads, those before its read completes
            for e in (f for f in s.flows if f.consumer == r):
                for p in s.producers:
                    for kind, into in ((False, reuse), (True, live)):
                        constraints, order = overwrite(q, graph, p, e, s.versions, live=kind)
                        status, at = q.least(constraints, order, timeout_ms)
                        if status == "unknown":
                            return unknown(f"z3 did not decide the reuse of {s.buffer} within {timeout_ms} ms", "z3")
                        if status == "sat":
                            into.append(((at["N"], at["i"], at["m"]), p, e, at))
            if reuse:
                key, p, e, at = min(reuse, key=lambda f: f[0])
                found.append((key, _witness(graph, plan, s.buffer, s.versions, p, e, joined, at, hidden=not live)))
    return verdict(found, "; ".join(notes) + " (not a safety error)" if notes else "")


def _witness(graph: StageGraph, plan: ModuloPlan, b: str, v: int, p: int, e: Edge, joined: tuple[int, ...],
             at: dict[str, int], hidden: bool) -> PlanWitness:
    n, i, d = at["N"], at["i"], at["d"]
    j = i + v * at["m"]
    r = e.consumer
    waits = "only for " + ", ".join(stage_name(graph, s) for s in joined) if joined else "for no reader"
    timing = ("the timing alone hides it (no overwrite issues before such a read completes), but nothing in the "
              "protocol makes the write wait" if hidden else
              "and the timing does not hide it: the overwrite can issue before the read completes")
    summary = (f"{stage_name(graph, r)} reads version {i} of {b} (slot {i % v}) at iteration {i + d}, but the reuse "
               f"of the slot by version {j} ({stage_name(graph, p)}) waits {waits}; {timing}")
    return PlanWitness(summary, instances=(instance(graph, r, i + d), instance(graph, p, j)),
                       cell=f"{b} slot {i % v}", trip=n,
                       facts=(("buffer", b), ("reader", r), ("i", i), ("j", j), ("N", n), ("slot", i % v),
                              ("joined", joined), ("hidden", hidden)))
