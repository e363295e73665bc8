"""The plan printout of a 2- and a 3-stage graph: the ticks against the definition of the kernel's columns, the slack
against ``Issue``, the slots against brute-force liveness, the waits, releases and events the protocol gives."""
import re

import pytest

from tilecert.semantics.pipeline.derive import derive
from tilecert.semantics.pipeline.describe import describe
from tilecert.semantics.pipeline.latency import LATENCY
from tilecert.semantics.pipeline.plan import Edge, ModuloPlan, StageGraph, StageInfo
from tilecert.semantics.pipeline.planner import plan_modulo

TWO = StageGraph(0, "k", (StageInfo(0, "load", "copy", inferred=True), StageInfo(1, "compute", "mma", inferred=True)),
                 (Edge(0, 1, 0, "value", "a"), Edge(0, 1, 0, "value", "b"), Edge(1, 1, 1, "effect", "acc")),
                 materialized=("a", "b"))
THREE = StageGraph(1, "j", (StageInfo(0, "load", "copy"), StageInfo(1, "scale", "compute"),
                            StageInfo(2, "acc", "mma")),
                   (Edge(0, 1, 0, "value", "a"), Edge(0, 2, 0, "value", "b"),  # b skips stage 1
                    Edge(1, 2, 0, "value", "c"), Edge(2, 2, 1, "effect", "acc")),
                   materialized=("a", "b", "c"))


def line(text, prefix):
    return next(ln.strip() for ln in text.splitlines() if ln.strip().startswith(prefix))


def active(plan, stage, tick, trip):
    """Stage ``stage`` runs an iteration at ``tick``: ``0 <= tick - column < N``."""
    return 0 <= tick - plan.offsets[stage] // plan.interval < trip


def liveness_slots(g, plan, buffer):
    """The fewest slots V with version i + V's write issued after every reader of version i completed."""
    flows = [e for e in g.edges if e.buffer == buffer and e.dep == "flow"]
    release = max(plan.issue(e.consumer, e.distance) + LATENCY[plan.target][g.stages[e.consumer].cls] for e in flows)
    return next(v for v in range(1, 64) if plan.issue(flows[0].producer, v) >= release)


@pytest.mark.parametrize("g", [TWO, THREE], ids=["two", "three"])
@pytest.mark.parametrize("target", ["c", "cuda"])
def test_ticks_partition_the_run_into_ramps_and_a_steady_state(g, target):
    plan = plan_modulo(g, window=0, target=target)
    cols = max(plan.offsets) // plan.interval + 1
    assert f"{cols} columns" in describe(g, derive(g, plan)).splitlines()[0]
    for trip in range(0, 7):
        ticks = line(describe(g, derive(g, plan), trip=trip), ("prologue", "no ticks"))
        if trip == 0:
            assert ticks.startswith("no ticks")
            continue
        spans = dict(re.findall(r"(prologue|steady|epilogue): (?:ticks \[(\d+, \d+)\)|none)", ticks))
        got = {k: range(*map(int, v.split(", "))) if v else range(0) for k, v in spans.items()}
        assert [t for k in ("prologue", "steady", "epilogue") for t in got[k]] == list(range(trip + cols - 1))
        for t in got["steady"]:
            assert all(active(plan, s, t, trip) for s in range(len(g.stages)))
        for t in [*got["prologue"], *got["epilogue"]]:
            assert not all(active(plan, s, t, trip) for s in range(len(g.stages)))


@pytest.mark.parametrize("target", ["c", "cuda"])
def test_two_stage_printout(target):
    plan = plan_modulo(TWO, window=3, target=target)
    text = describe(TWO, derive(TWO, plan))
    ii, (t0, t1) = plan.interval, plan.offsets
    assert text.splitlines()[0] == (f"pipeline k: II={ii}, window=3, {t1 // ii + 1} columns, target {target} "
                                    "(planned)")
    assert re.search(rf"stage 1 compute +\(mma\) +theta={t1}  column {t1 // ii}  issue i\*{ii}\+{t1}", text)
    assert line(text, "copy issue points") == "copy issue points: stage 0; compute issue points: stage 1"
    for e in TWO.edges:  # slack = Issue(c, i + d) - Issue(p, i) - latency, at any i
        lat = LATENCY[target][TWO.stages[e.producer].cls]
        slack = plan.issue(e.consumer, 5 + e.distance) - plan.issue(e.producer, 5) - lat
        assert f"{e}  latency {lat}  slack {slack}" in text
    v = liveness_slots(TWO, plan, "a")
    ring = f"{v} versions (slot i mod {v}), written by stage 0, readers {{1}}"
    assert v > 1 and line(text, "rings") == f"rings: a: {ring}; b: {ring}"
    assert line(text, "waits") == ("waits: stage 1 waits for stage 0's completion of a, b; "
                                   "stage 1 waits for stage 1's completion of acc (d=1)")
    assert line(text, "releases").startswith(f"releases: a: version i+{v} refills slot i mod {v} after stage 1 "
                                             "releases version i; b:")
    events = line(text, "barriers/events")
    if target == "c":
        assert "none" in events and "cp.async" not in events
    else:
        assert "stage 0: one cp.async commit_group per iteration, waited on (wait_group) by stage 1" in events
        assert "release a: stage 0's refill waits for the arrival of stage 1" in events


def test_three_stage_printout_planned_and_given():
    plan = plan_modulo(THREE, target="cuda")
    text = describe(THREE, derive(THREE, plan), trip=4)
    assert text.splitlines()[0].endswith("target cuda, N=4 (planned)")
    assert line(text, "copy issue points") == "copy issue points: stage 0; compute issue points: stages 1, 2"
    rings = line(text, "rings")
    for b, p, r in (("a", 0, 1), ("b", 0, 2), ("c", 1, 2)):
        v = liveness_slots(THREE, plan, b)
        assert f"{b}: {v} versions (slot i mod {v}), written by stage {p}, readers {{{r}}}" in rings
    assert line(text, "waits") == ("waits: stage 1 waits for stage 0's completion of a; stage 2 waits for stage 0's "
                                   "completion of b; stage 2 waits for stage 1's completion of c; "
                                   "stage 2 waits for stage 2's completion of acc (d=1)")
    assert "waited on (wait_group) by stages 1, 2" in line(text, "barriers/events")
    # a plan as a user wrote it, slow enough that every buffer keeps one version
    given = ModuloPlan(3, (0, 1, 2), window=0, target="c")
    text = describe(THREE, derive(THREE, given))
    assert not text.splitlines()[0].endswith("(planned)")
    assert line(text, "prologue") == "prologue: none   steady: ticks [0, N)   epilogue: none"
    assert line(text, "rings") == "rings: one version, no ring: a, b, c"
    assert line(text, "releases") == "releases: none"
    assert all(liveness_slots(THREE, given, b) == 1 for b in "abc")
    bad = ModuloPlan(1, (0, 0, 0), target="c", versions=(("b", 1),))  # stated, not judged: the slack shows it
    text = describe(THREE, derive(THREE, bad))
    assert "0 -> 2 (d=0, flow value b)  latency 1  slack -1" in text
    assert "b: 1 version (slot i mod 1), written by stage 0, readers {2}" in line(text, "rings")


def test_a_write_to_another_version_is_marked_renamed():
    g = StageGraph(1, "j", THREE.stages, THREE.edges + (Edge(1, 0, 1, "value", "a", "anti"),
                                                       Edge(2, 1, 1, "effect", "t", "anti")), THREE.materialized)
    text = describe(g, derive(g, plan_modulo(g)))
    assert line(text, "1 -> 0 (d=1, anti value a)").endswith("(renamed by slots)")
    assert not line(text, "2 -> 1 (d=1, anti effect t)").endswith("(renamed by slots)")  # t: one copy, a constraint
    assert not line(text, "0 -> 1 (d=0, flow value a)").endswith("(renamed by slots)")
