"""The modulo planner: the least initiation interval, then the earliest stage offsets (iterative modulo scheduling).

For a stage graph on ``target`` every edge ``e = (p, c, d)`` that constrains the schedule is the difference
constraint::

    theta(c) - theta(p) >= latency(e) - d * II          (latency: ``latency.edge_latency``, the one table)

and ``theta >= 0``. The edges that do not constrain it (``derive.constrains``) are the anti and output edges at
``d >= 1`` of a materialized buffer that flow edges read: a write to another version, which the buffer's slots
rename (``derive`` sizes the slots from liveness so that a slot's next write follows the release of the version in
it; the ``versions`` obligation decides it). This is Rau's iterative modulo scheduling with no resource model
beyond the latency table (ResMII = 1: a stage is not a machine operation competing for a functional unit, so only
recurrences and the window bound II):

- ``RecMII = max over the graph's cycles of ceil(sum latency / sum distance)``: a cycle of total latency ``L`` and
  distance ``D`` has constraint weight ``L - D * II``, which is ``<= 0`` exactly when ``II >= ceil(L / D)``, so
  RecMII is the least II at which the constraints have no positive cycle (found by bisection: the weights only
  fall as II grows). A cycle at distance 0 (a stage that needs its own iteration's completion) has no RecMII;
- II runs from ``max(interval, RecMII)`` up to ``max_interval``, smallest first; at each II the offsets are the
  longest paths from a source joined to every stage by weight 0 (Bellman-Ford; a positive cycle = no plan at this
  II): the earliest times, pointwise least among all solutions, so they have the fewest kernel columns
  ``max(theta) // II + 1`` any plan at this II can have; the window (``W > 0``) requires ``columns <= W``, else the
  next II. The II returned is therefore the least one at which any legal offsets fit the window;
- ties keep source order: at the chosen II the offsets are the earliest ones under the edges plus
  ``theta(s) <= theta(s + 1)`` when those are feasible and fit the window, else the earliest under the edges alone
  (a stage then issues before an earlier one only where a loop-carried edge pushes that earlier one later).

The plan leaves ``versions``, ``waits`` and ``releases`` unset: ``derive`` gives the derived protocol (slots from
liveness, a wait on every flow edge, every actual reader joins each release).
"""
from __future__ import annotations

from typing import Optional, Sequence

from .derive import constrains
from .latency import LATENCY, edge_latency
from .plan import ModuloPlan, StageGraph

Constraint = tuple[int, int, int]
"""``(p, c, w)``: ``theta(c) - theta(p) >= w``."""


def constraints(graph: StageGraph, target: str, interval: int) -> list[Constraint]:
    """``(p, c, latency(e) - d * II)`` for every edge of ``graph`` that constrains the schedule (``derive.constrains``:
    all but the writes to another version of a materialized buffer, which its slots rename)."""
    return [(e.producer, e.consumer, edge_latency(graph, e, target) - e.distance * interval) for e in graph.edges
            if constrains(graph, e)]


def longest_paths(n: int, cons: Sequence[Constraint]) -> tuple[Optional[tuple[int, ...]], tuple[int, ...]]:
    """The least ``theta >= 0`` over ``n`` stages satisfying ``cons`` (Bellman-Ford longest paths from a source
    with a weight-0 edge to every stage) and ``()``; or ``None`` and the stages of a positive cycle (no solution)."""
    theta = [0] * n
    pred: list[Optional[int]] = [None] * n
    changed = -1
    for _ in range(n + 1):
        changed = -1
        for p, c, w in cons:
            if theta[p] + w > theta[c]:
                theta[c], pred[c], changed = theta[p] + w, p, c
        if changed < 0:
            return tuple(theta), ()
    node = changed
    for _ in range(n):  # walk back onto the cycle
        node = pred[node]
    cycle, cur = [node], pred[node]
    while cur != node:
        cycle.append(cur)
        cur = pred[cur]
    return None, tuple(reversed(cycle))


def rec_mii(graph: StageGraph, target: str = "c") -> tuple[Optional[int], tuple[int, ...]]:
    """``(RecMII, ())``, the least II >= 1 with no positive cycle (1 for an acyclic graph); or ``(None, cycle)`` when
    a cycle has distance 0. A simple cycle has at most ``S`` edges, each of latency at most ``lmax`` and the cycle's
    distance >= 1 unless it is 0, so ``RecMII <= S * lmax``: infeasible there means a cycle at distance 0."""
    n = len(graph.stages)
    hi = max(1, n * max((edge_latency(graph, e, target) for e in graph.edges), default=1))
    theta, cycle = longest_paths(n, constraints(graph, target, hi))
    if theta is None:
        return None, cycle
    lo = 1
    while lo < hi:
        mid = (lo + hi) // 2
        if longest_paths(n, constraints(graph, target, mid))[0] is None:
            lo = mid + 1
        else:
            hi = mid
    return lo, ()


def columns(offsets: Sequence[int], interval: int) -> int:
    """The kernel columns (iterations in flight) of offsets at ``interval``: ``max(theta) // II + 1``."""
    return max(offsets, default=0) // interval + 1


def _schedule_error(message: str, hint: str) -> Exception:
    from ..sched.base import ScheduleError  # the schedule ops import this module: resolved at use
    return ScheduleError(message, hint=hint)


def plan_modulo(graph: StageGraph, *, window: int = 0, interval: int = 1, target: str = "c",
                max_interval: int = 64) -> ModuloPlan:
    """The plan with the least II in ``[max(interval, RecMII), max_interval]`` whose earliest offsets fit the window
    (see the module docstring); ``ScheduleError`` when there is none."""
    if target not in LATENCY:
        raise _schedule_error(f"modulo: no latency table for target {target!r}",
                              f"use one of {', '.join(LATENCY)}")
    if interval < 1 or window < 0:
        raise _schedule_error(f"modulo: interval {interval} and window {window} of pipeline {graph.loop!r}: the "
                              "interval must be >= 1 and the window >= 0",
                              "window 0 lets the planner choose, 1 forbids overlap, N allows N iterations in flight")
    n = len(graph.stages)
    mii, cycle = rec_mii(graph, target)
    if mii is None:
        raise _schedule_error(f"modulo: stages {' -> '.join(map(str, cycle))} of pipeline {graph.loop!r} form a "
                              "dependence cycle within one iteration: no interval satisfies it",
                              "a cycle needs a loop-carried edge (distance >= 1); check the stage cuts")
    order = [(s, s + 1, 0) for s in range(n - 1)]
    fewest = None
    for ii in range(max(interval, mii), max_interval + 1):
        cons = constraints(graph, target, ii)
        for candidate in (cons + order, cons):
            theta = longest_paths(n, candidate)[0]
            if theta is not None and (window == 0 or columns(theta, ii) <= window):
                return ModuloPlan(ii, theta, window, target, planned=True)
        fewest = (ii, columns(longest_paths(n, cons)[0], ii))
    if fewest is None:
        raise _schedule_error(f"modulo: pipeline {graph.loop!r} needs II >= {max(interval, mii)} (RecMII {mii}, "
                              f"interval {interval}) but max_interval is {max_interval}",
                              "raise max_interval, or lengthen the recurrence's distance")
    raise _schedule_error(f"modulo: no plan for pipeline {graph.loop!r} with II <= {max_interval} under window "
                          f"{window}: at II={fewest[0]} the earliest offsets still need {fewest[1]} iterations in "
                          "flight", "raise the window (0: the planner chooses) or max_interval")
