"""The plan printout: what a modulo plan does to a stage graph, as ``derive`` computes it, in words.

One line each (``C`` the kernel columns, ``N`` the trip count, ``II`` the interval): the header (II, window,
columns, whether the planner chose the plan); per stage its class, ``theta``, column and issue time
``i*II+theta``; the ticks of the prologue ``[0, C-1)``, the steady state ``[C-1, N)`` and the epilogue
``[N, N+C-1)`` (numbers for a given trip: ``[0, C-1)``, ``[C-1, max(C-1, N))``, ``[max(N, C-1), N+C-1)``, so a trip
shorter than ``C-1`` has no steady state); the copy and compute issue points; every edge with its latency and slack
``theta(c) + d*II - theta(p) - latency(e)`` (an anti or output edge to another version of a materialized buffer is
marked: the slots rename it, see ``derive.constrains``); the rings (versions, slot ``i mod V``, joined
readers); the waits; the releases; and the barriers / events the target realizes them with. It states the plan,
not its legality: the obligations ``pipeline_schedule``, ``versions`` and ``release`` decide that.
"""
from __future__ import annotations

from .derive import Derived, constrains
from .latency import ASYNC_TARGETS, edge_latency
from .plan import StageGraph


def _ticks(columns: int, trip: int | None) -> str:
    c1 = columns - 1
    if trip is None:
        spans = [("prologue", "0", str(c1), c1 > 0), ("steady", str(c1), "N", True),
                 ("epilogue", "N", f"N+{c1}", c1 > 0)]
    elif trip == 0:
        return "no ticks: the loop runs no iteration"
    else:
        spans = [("prologue", "0", str(c1), c1 > 0), ("steady", str(c1), str(max(c1, trip)), trip > c1),
                 ("epilogue", str(max(trip, c1)), str(trip + c1), c1 > 0)]
    return "   ".join(f"{name}: ticks [{lo}, {hi})" if nonempty else f"{name}: none"
                       for name, lo, hi, nonempty in spans)


def _stages(stages: list[int] | tuple[int, ...]) -> str:
    """``stage 1``, ``stages 1, 2`` or ``no stage``."""
    if not stages:
        return "no stage"
    return ("stage " if len(stages) == 1 else "stages ") + ", ".join(map(str, stages))


def describe(graph: StageGraph, derived: Derived, trip: int | None = None) -> str:
    """The printout of ``derived`` (``derive(graph, plan)``) for ``graph``; ``trip`` makes the ticks numbers."""
    plan = derived.plan
    ii, theta, target = plan.interval, plan.offsets, plan.target
    head = f"pipeline {graph.loop}: II={ii}, window={plan.window}, {derived.columns} columns, target {target}"
    if trip is not None:
        head += f", N={trip}"
    elif graph.trip is not None:
        head += f", N={graph.trip}"
    lines = [head + (" (planned)" if plan.planned else "")]
    width = max((len(s.name) for s in graph.stages), default=0)
    for s in graph.stages:
        lines.append(f"  stage {s.ordinal} {s.name:<{width}}  {'(' + s.cls + ')':<9}  theta={theta[s.ordinal]}  "
                     f"column {derived.column(s.ordinal)}  issue i*{ii}+{theta[s.ordinal]}")
    lines.append("  " + _ticks(derived.columns, trip))
    copies = [s.ordinal for s in graph.stages if s.cls == "copy"]
    computes = [s.ordinal for s in graph.stages if s.cls != "copy"]
    lines.append(f"  copy issue points: {_stages(copies)}; compute issue points: {_stages(computes)}")
    lines.append("  edges:" + ("" if graph.edges else " none"))
    for e in graph.edges:
        lat = edge_latency(graph, e, target)
        slack = theta[e.consumer] + e.distance * ii - theta[e.producer] - lat
        flows = f", up to d={e.max_distance}" if e.max_distance not in (None, e.distance) else ""
        renamed = "" if constrains(graph, e) else "  (renamed by slots)"
        lines.append(f"    {e}{flows}  latency {lat}  slack {slack}{renamed}")
    ringed = {r.buffer for r in derived.rings}
    single = [b for b in graph.materialized if b not in ringed]
    rings = [f"{r.buffer}: {r.versions} version{'s' if r.versions != 1 else ''} (slot i mod {r.versions}), "
             f"written by stage {r.producer}, readers {{{', '.join(map(str, r.readers))}}}" for r in derived.rings]
    if single:
        rings.append(f"one version, no ring: {', '.join(single)}")
    lines.append("  rings: " + ("; ".join(rings) if rings else "none"))
    lines.append("  waits: " + ("; ".join(_waits(graph, derived)) or "none"))
    releases = [f"{r.buffer}: version i+{r.versions} refills slot i mod {r.versions} after "
                + (f"{_stages(r.readers)} {'releases' if len(r.readers) == 1 else 'release'} version i"
                   if r.readers else "no reader's release")
                for r in derived.rings]
    lines.append("  releases: " + ("; ".join(releases) if releases else "none"))
    lines.append("  barriers/events: " + _events(graph, derived))
    return "\n".join(lines)


def _waits(graph: StageGraph, derived: Derived) -> list[str]:
    """``stage c waits for stage p's completion of a, b (d=1)``, one per (producer, consumer) pair."""
    pairs: dict[tuple[int, int], list[str]] = {}
    for p, c, b in derived.waits:
        ds = [e.distance for e in graph.edges if (e.producer, e.consumer, e.buffer, e.dep) == (p, c, b, "flow")]
        pairs.setdefault((p, c), []).append(f"{b} (d={min(ds)})" if ds and min(ds) > 0 else b)
    return [f"stage {c} waits for stage {p}'s completion of {', '.join(bs)}" for (p, c), bs in pairs.items()]


def _events(graph: StageGraph, derived: Derived) -> str:
    """How the target realizes the protocol: none on a synchronous target; on an asynchronous one, one cp.async
    group per copy stage and iteration (waited on by that stage's waiting consumers) and a release event per ring."""
    target = derived.plan.target
    if target not in ASYNC_TARGETS:
        return f"none (on {target} copies are synchronous: program order carries every wait and release)"
    out = []
    for s in graph.stages:
        if s.cls != "copy":
            continue
        waiters = sorted({c for p, c, _ in derived.waits if p == s.ordinal})
        out.append(f"stage {s.ordinal}: one cp.async commit_group per iteration, waited on (wait_group) by "
                   f"{_stages(waiters)}")
    out += [f"release {r.buffer}: stage {r.producer}'s refill waits for the arrival of "
            f"{_stages(r.readers)}" for r in derived.rings]
    return "; ".join(out) if out else "none (no copy stage and no ring)"
