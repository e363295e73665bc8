"""The latency model: how many issue slots after its producer's issue an edge's consumer may issue.

One table, per target, by the producer's stage class (``plan.STAGE_CLASSES``); an anti or output edge (a write
after a read or a write) is priced by its first access's stage, the one whose completion the write waits for. The
figures are issue slots of the modulo schedule, not cycles: they order a plan, they do not predict its time.

    target     copy  mma  compute
    interp        1    1        1
    c             1    1        1
    cuda          2    2        1
    cuda-host     2    2        1

On cuda a copy is asynchronous (``cp.async``) and an mma's operand reads are in flight until it completes, so both
span two slots; on C every statement completes before the next issues.
"""
from __future__ import annotations

from .plan import Edge, StageGraph

ASYNC_TARGETS = ("cuda", "cuda-host")
"""The targets whose copies are asynchronous (``cp.async``, complete at their consumer's wait) and whose mma reads
its operands in flight."""

LATENCY: dict[str, dict[str, int]] = {
    "interp": {"copy": 1, "mma": 1, "compute": 1},
    "c": {"copy": 1, "mma": 1, "compute": 1},
    "cuda": {"copy": 2, "mma": 2, "compute": 1},
    "cuda-host": {"copy": 2, "mma": 2, "compute": 1},
}


def stage_latency(graph: StageGraph, stage: int, target: str) -> int:
    """The issue slots stage ``stage`` takes to complete on ``target``."""
    return LATENCY[target][graph.stages[stage].cls]


def edge_latency(graph: StageGraph, e: Edge, target: str) -> int:
    """``latency(e)``: the producer's completion, in issue slots after its issue."""
    return stage_latency(graph, e.producer, target)
