"""The plan obligations pipeline_schedule, versions and release (issue 13 part 5).

On hand-built stage graphs, the refused counterexamples are disproved with their witnesses and the legal forms
proved; a hypothesis campaign compares every verdict with a direct evaluation of the formulas over every trip count
N <= 12 (the formulas do not depend on the iteration, so a violation, if any, shows at a small N); Stage's depth-2
ring read as a plan agrees with its datamap; the checker discharges the three for every planned pipeline loop.
"""
import dataclasses

import pytest
from hypothesis import given, strategies as st

import tilecert as tc
from tilecert import f32
from tilecert.checker import check_program
from tilecert.checker.errors import CheckerError
from tilecert.checker.obligations import pipeline_schedule, release, versions
from tilecert.checker.ring_plan import ring_plan
from tilecert.semantics.index import ISize, ibin, IConst
from tilecert.semantics.pipeline.derive import derive, joined_readers
from tilecert.semantics.pipeline.latency import LATENCY
from tilecert.semantics.pipeline.plan import Edge, ModuloPlan, StageGraph, StageInfo
from tilecert.semantics.pipeline.stages import pipeline_loops
from tilecert.semantics.sched.base import replace_loop, with_body
from tilecert.semantics.transform import Kind, Ring

from examples.gemm import gemm
from test_datamap import _pipelined, _plain, _verdicts
from test_sched_stage import pipelined

CHECKS = (pipeline_schedule, versions, release)


def graph(classes, edges, materialized=("t",), trip=None):
    stages = tuple(StageInfo(k, f"s{k}", c) for k, c in enumerate(classes))
    return StageGraph(0, "k", stages, tuple(edges), tuple(materialized), trip)


def flow(p, c, d=0, buffer="t", most=None):
    return Edge(p, c, d, "value", buffer, "flow", d if most is None else most)


def statuses(g, plan, **kw):
    return tuple(m.check(g, plan, **kw).status for m in CHECKS)


# ============================================================================ (a) two in-flight consumers
TWO_READERS = graph(("copy", "compute", "compute"), (flow(0, 1), flow(0, 2)))


def test_the_derived_protocol_joins_exactly_the_readers_and_is_proved():
    plan = ModuloPlan(1, (0, 1, 3))
    assert joined_readers(TWO_READERS, plan, "t") == (1, 2)
    assert derive(TWO_READERS, plan).ring("t").versions == 4
    assert statuses(TWO_READERS, plan) == ("proved",) * 3
    assert release.check(TWO_READERS, plan).reason == ""


def test_reuse_waiting_for_one_of_two_readers_is_disproved_by_release_and_versions():
    plan = ModuloPlan(1, (0, 1, 3), releases=(("t", (1,)),))
    assert derive(TWO_READERS, plan).ring("t").versions == 2  # slots from the joined reader only
    r = release.check(TWO_READERS, plan)
    assert r.status == "disproved"
    w = r.witness
    assert (w.fact("buffer"), w.fact("reader"), w.fact("i"), w.fact("j"), w.fact("N")) == ("t", 2, 0, 2, 3)
    assert w.fact("hidden") is False and "waits only for stage 1 (s1)" in w.summary
    v = versions.check(TWO_READERS, plan)
    assert v.status == "disproved"
    w = v.witness
    assert (w.fact("reader"), w.fact("i"), w.fact("j"), w.fact("slot"), w.fact("N")) == (2, 0, 2, 0, 3)
    # version 2 overwrites slot 0 at 2, while stage 2 reads version 0 at 3 and releases it at 4
    assert (w.fact("write_issue"), w.fact("read_issue"), w.fact("release")) == (2, 3, 4)
    assert pipeline_schedule.check(TWO_READERS, plan).proved


def test_a_missing_join_the_timing_hides_is_still_disproved_and_says_so():
    plan = ModuloPlan(1, (0, 1, 3), versions=(("t", 4),), releases=(("t", (1,)),))
    assert versions.check(TWO_READERS, plan).proved
    r = release.check(TWO_READERS, plan)
    assert r.status == "disproved" and r.witness.fact("hidden") is True
    assert "the timing alone hides it" in r.witness.summary


def test_an_unrelated_joined_stage_is_a_note_not_a_failure():
    g = graph(("copy", "compute", "compute"), (flow(0, 1), flow(0, 2, buffer="u")), ("t", "u"))
    plan = ModuloPlan(1, (0, 2, 2), releases=(("t", (1, 2)), ("u", (2,))))
    r = release.check(g, plan)
    assert r.proved and "stage 2 (s2) joins the release of t but never reads it" in r.reason
    assert release.check(g, dataclasses.replace(plan, releases=None)).reason == ""


# ============================================================================ (b) a WAR on the back edge
def war(materialized=("t",)):
    """Stage 0 writes t, stage 2 reads it in the same iteration; stage 0 of the next iteration writes it again."""
    return graph(("copy", "compute", "compute"),
                 (flow(0, 2), flow(0, 1, buffer="x"), Edge(2, 0, 1, "value", "t", "anti", 1)), materialized)


def test_a_war_on_the_back_edge_with_too_few_slots_is_disproved_by_versions():
    plan = ModuloPlan(1, (0, 1, 2))
    assert derive(war(), plan).ring("t").versions == 3
    assert statuses(war(), plan) == ("proved",) * 3
    forged = dataclasses.replace(plan, versions=(("t", 2),))
    assert statuses(war(), forged) == ("proved", "disproved", "proved")
    w = versions.check(war(), forged).witness
    assert (w.fact("i"), w.fact("j"), w.fact("reader"), w.fact("N")) == (0, 2, 2, 3)
    assert str(w.instances[1]) == "`stage 0 s0` at (k=2)"


def test_the_war_of_a_buffer_without_slots_constrains_the_schedule():
    plan = ModuloPlan(1, (0, 1, 2))
    v = pipeline_schedule.check(war(materialized=()), plan)
    assert v.status == "disproved"
    assert v.witness.fact("edge").dep == "anti" and (v.witness.fact("i"), v.witness.fact("N")) == (0, 2)
    assert pipeline_schedule.check(war(materialized=()), ModuloPlan(3, (0, 1, 2))).proved


def test_a_rewrite_of_another_version_is_renamed_and_one_of_the_same_version_is_not():
    rewrite = graph(("copy", "compute"), (flow(0, 1), Edge(0, 0, 1, "value", "t", "output", 1)))
    plan = ModuloPlan(1, (0, 2), target="cuda")  # a copy takes 2 slots, the next version's copy issues 1 later
    assert pipeline_schedule.check(rewrite, plan).proved and versions.check(rewrite, plan).proved
    two = graph(("copy", "compute", "compute"), (flow(0, 2), Edge(0, 1, 0, "value", "t", "output", 0)))
    v = pipeline_schedule.check(two, ModuloPlan(1, (0, 1, 3), target="cuda"))
    assert v.status == "disproved" and v.witness.fact("edge").dep == "output"


def test_a_stage_whose_write_is_never_read_must_not_clobber_a_version_still_read():
    """Stage 0 writes t, stage 1 overwrites it (the flow producer), stage 2 reads it: stage 0's write of version
    i + 2 lands in the slot of version i while stage 2 still reads it (at i + 2, released at i + 3)."""
    g = graph(("compute", "copy", "compute"), (Edge(0, 1, 0, "value", "t", "output", 0), flow(1, 2),
                                               Edge(2, 0, 1, "value", "t", "anti", 1)))
    plan = ModuloPlan(1, (0, 1, 2), versions=(("t", 2),))
    v = versions.check(g, plan)
    assert v.status == "disproved" and str(v.witness.instances[1]) == "`stage 0 s0` at (k=2)"
    assert versions.check(g, dataclasses.replace(plan, versions=(("t", 3),))).proved


# ============================================================================ (c) a latency violation
MMA = graph(("copy", "mma"), (flow(0, 1), Edge(1, 1, 1, "effect", "acc", "flow", 1)))


def test_a_latency_violation_at_ii_1_is_fixed_by_ii_2():
    bad = pipeline_schedule.check(MMA, ModuloPlan(1, (0, 2), target="cuda"))
    assert bad.status == "disproved"
    w = bad.witness
    assert w.fact("edge").buffer == "acc" and (w.fact("i"), w.fact("N")) == (0, 2)
    assert (w.fact("producer_issue"), w.fact("consumer_issue"), w.fact("latency")) == (2, 3, 2)
    assert pipeline_schedule.check(MMA, ModuloPlan(2, (0, 2), target="cuda")).proved
    assert pipeline_schedule.check(MMA, ModuloPlan(1, (0, 2), target="c")).proved  # an mma completes in one slot


def test_a_missing_wait_the_window_and_the_interval():
    plan = ModuloPlan(2, (0, 2), target="cuda")
    no_wait = dataclasses.replace(plan, waits=((1, 1, "acc"),))
    w = pipeline_schedule.check(MMA, no_wait).witness
    assert w.fact("wait") is False and w.fact("edge") == flow(0, 1) and (w.fact("i"), w.fact("N")) == (0, 1)
    assert pipeline_schedule.check(MMA, dataclasses.replace(plan, waits=((0, 1, "t"), (1, 1, "acc")))).proved
    # on C only a copy's consumer waits (every statement completes before the next issues): acc needs none there,
    # and every flow edge needs one on cuda
    c_plan = dataclasses.replace(plan, target="c", waits=((0, 1, "t"),))
    assert pipeline_schedule.check(MMA, c_plan).proved
    assert pipeline_schedule.check(MMA, dataclasses.replace(c_plan, target="cuda")).witness.fact("edge").buffer == "acc"
    assert pipeline_schedule.check(MMA, dataclasses.replace(c_plan, waits=())).witness.fact("edge").buffer == "t"
    # 2 // 2 + 1 = 2 iterations in flight
    assert pipeline_schedule.check(MMA, dataclasses.replace(plan, window=1)).witness.fact("columns") == 2
    assert pipeline_schedule.check(MMA, dataclasses.replace(plan, window=2)).proved
    assert pipeline_schedule.check(MMA, dataclasses.replace(plan, interval=0)).status == "disproved"
    assert versions.check(MMA, dataclasses.replace(plan, offsets=(0,))).status == "unknown"


# ============================================================================ the trip count
def test_a_bound_trip_count_decides_at_that_count_and_a_symbolic_one_for_all():
    plan = ModuloPlan(1, (0, 1, 2), versions=(("t", 2),))
    trip = ibin("floordiv", ISize("K"), IConst(4))
    assert versions.check(war(), plan).witness.fact("N") == 3
    g = dataclasses.replace(war(), trip=trip)
    assert versions.check(g, plan).status == "disproved"  # K unbound: symbolic
    assert versions.check(g, plan, sizes={"K": 8}).proved  # N = 2: version 2 is never written
    assert versions.check(g, plan, sizes={"K": 12}).witness.fact("N") == 3


def test_an_unbounded_read_distance_is_refused():
    g = graph(("copy", "compute"), (Edge(0, 1, 0, "value", "t", "flow", None),))
    plan = ModuloPlan(1, (0, 1), versions=(("t", 3),))
    assert versions.check(g, plan).status == "disproved"  # some read far enough overlaps
    short = dataclasses.replace(g, trip=2)  # two versions, three slots: no slot is ever reused
    v = versions.check(short, plan)
    assert v.status == "unknown" and "unbounded distance" in v.reason


# ============================================================================ brute force
def violations_schedule(g, plan, n):
    """Direct evaluation of pipeline_schedule at trip count ``n``: the (i, edge) that break it."""
    waits = set(derive(g, plan).waits)
    out = []
    for e in g.edges:
        renamed = e.dep != "flow" and e.distance >= 1
        if renamed and any(f.buffer == e.buffer and f.dep == "flow" for f in g.edges) and e.buffer in g.materialized:
            continue
        lat = LATENCY[plan.target][g.stages[e.producer].cls]
        for i in range(n - e.distance):
            unwaited = (e.dep == "flow" and (g.stages[e.producer].cls == "copy" or plan.target.startswith("cuda"))
                        and (e.producer, e.consumer, e.buffer) not in waits)
            if unwaited or plan.issue(e.consumer, i + e.distance) < plan.issue(e.producer, i) + lat:
                out.append((i, e))
    return out


def reuses(g, plan, n, live):
    """Direct evaluation at trip count ``n``: every (buffer, reader, i, j) where version ``j`` is written into the
    slot of version ``i`` while (``live``: before the read completes) the reader reads ``i``."""
    derived = derive(g, plan)
    out = []
    for b in g.materialized:
        flows = [e for e in g.edges if e.buffer == b and e.dep == "flow"]
        v = derived.ring(b).versions if derived.ring(b) else 1
        for e in flows:
            lat = LATENCY[plan.target][g.stages[e.consumer].cls]
            writers = ({f.producer for f in g.edges if f.buffer == b and f.dep in ("flow", "output")}
                       | {f.consumer for f in g.edges if f.buffer == b and f.dep in ("anti", "output")})
            for p in writers:
                for i in range(n):
                    for j in range(i + v, n, v):
                        for d in range(e.distance, e.max_distance + 1):
                            if i + d < n and (not live or plan.issue(p, j) < plan.issue(e.consumer, i + d) + lat):
                                out.append((b, e.consumer, i, j))
    return out


def missing_joins(g, plan, n):
    return [x for x in reuses(g, plan, n, live=False) if x[1] not in joined_readers(g, plan, x[0])]


@st.composite
def graphs_and_plans(draw):
    s = draw(st.integers(2, 4))
    classes = draw(st.lists(st.sampled_from(("copy", "mma", "compute")), min_size=s, max_size=s))
    edges = []
    for _ in range(draw(st.integers(1, 4))):
        p, c = draw(st.integers(0, s - 1)), draw(st.integers(0, s - 1))
        d = draw(st.integers(0 if p < c else 1, 2))
        dep = draw(st.sampled_from(("flow", "flow", "anti", "output")))
        edges.append(Edge(p, c, d, "value", draw(st.sampled_from(("t", "u", "x"))), dep, d + draw(st.integers(0, 1))))
    g = graph(classes, edges, draw(st.sampled_from(((), ("t",), ("t", "u")))))
    flows = sorted({(e.producer, e.consumer, e.buffer) for e in edges if e.dep == "flow"})
    plan = ModuloPlan(draw(st.integers(1, 3)), tuple(draw(st.integers(0, 5)) for _ in range(s)),
                      draw(st.integers(0, 3)), draw(st.sampled_from(sorted(LATENCY))),
                      tuple(("t", v) for v in draw(st.lists(st.integers(1, 3), max_size=1))),
                      draw(st.one_of(st.none(), st.lists(st.sampled_from(flows), unique=True).map(tuple)))
                      if flows else None,
                      draw(st.one_of(st.none(), st.tuples(st.tuples(st.just("t"), st.lists(
                          st.integers(0, s - 1), unique=True).map(lambda r: tuple(sorted(r))))))))
    return g, plan


def agrees(verdict, found_at):
    """``verdict`` agrees with the direct evaluation ``found_at(n)`` (the violations at trip count n)."""
    first = next((n for n in range(13) if found_at(n)), None)
    if verdict.proved:
        return first is None
    return verdict.status == "disproved" and verdict.witness.trip == first


@given(graphs_and_plans())
def test_each_verdict_agrees_with_direct_evaluation_up_to_n_12(gp):
    g, plan = gp
    columns = max(plan.offsets) // plan.interval + 1
    v = pipeline_schedule.check(g, plan)
    if 0 < plan.window < columns:
        assert v.status == "disproved" and v.witness.fact("columns") == columns
    else:
        assert agrees(v, lambda n: violations_schedule(g, plan, n)), (g, plan, v)
        if not v.proved:
            w = v.witness
            assert (w.fact("i"), w.fact("edge")) in violations_schedule(g, plan, w.trip)
    v = versions.check(g, plan)
    assert agrees(v, lambda n: reuses(g, plan, n, live=True)), (g, plan, v)
    if not v.proved:
        w = v.witness
        assert (w.fact("buffer"), w.fact("reader"), w.fact("i"), w.fact("j")) in reuses(g, plan, w.trip, True)
    v = release.check(g, plan)
    assert agrees(v, lambda n: missing_joins(g, plan, n)), (g, plan, v)
    if not v.proved:
        w = v.witness
        assert (w.fact("buffer"), w.fact("reader"), w.fact("i"), w.fact("j")) in missing_joins(g, plan, w.trip)
        hidden = not any(x[:2] == (w.fact("buffer"), w.fact("reader")) for n in range(13)
                         for x in reuses(g, plan, n, live=True))
        assert w.fact("hidden") == hidden


# ============================================================================ Stage's depth-2 ring
def stage_ring():
    s = pipelined(2)
    (ring,) = [d for d in s.transforms[-1].datamaps if isinstance(d, Ring)]
    return s, ring


def test_stage_depth_2_read_as_a_plan_is_proved_and_a_forged_one_slot_ring_is_disproved():
    s, ring = stage_ring()
    g, plan = ring_plan(ring, s.program)
    assert (plan.interval, plan.offsets, plan.versions) == (1, (0, 1), ((ring.buffer, 2),))
    assert [str(e) for e in g.edges] == [f"0 -> 1 (d=0, flow effect {ring.buffer})"] and g.loop == "ko"
    assert statuses(g, plan, sizes=s.sizes) == ("proved",) * 3
    g1, plan1 = ring_plan(dataclasses.replace(ring, versions=1), s.program)
    v = versions.check(g1, plan1, sizes=s.sizes)
    assert v.status == "disproved"
    w = v.witness
    assert (w.fact("i"), w.fact("j"), w.fact("N"), w.fact("reader")) == (0, 1, 2, 1)
    assert str(w.instances[0]) == "`stage 1 compute` at (ko=0)"


@pytest.mark.parametrize("slots, ahead", [(1, 1), (2, 1), (2, 2), (3, 2), (1, 2)])
def test_a_prefetching_ring_read_as_a_plan_agrees_with_its_datamap(slots, ahead):
    """A ring prefetched ``ahead`` iterations with ``slots`` slots: its datamap is proved iff ``slots > ahead``
    (N symbolic), and so is the plan's ``versions``."""
    after, ring = _pipelined(slots, ahead)
    verdicts, _ = _verdicts(_plain(), after, (ring,))
    g, plan = ring_plan(ring, after)
    assert plan.offsets == (0, ahead)
    v = versions.check(g, plan)
    assert v.status == verdicts[Kind.DATAMAP] == ("proved" if slots > ahead else "disproved")
    assert pipeline_schedule.check(g, plan).proved and release.check(g, plan).proved


def test_a_ring_without_a_prefetch_is_no_plan():
    after, ring = _pipelined(1, 0)
    with pytest.raises(CheckerError, match="no later than its use"):
        ring_plan(ring, after)


# ============================================================================ the checker discharges them
@tc.kernel
def scale(X: tc.Tensor[f32, "K"], Y: tc.Tensor[f32, "K"]):
    for nest in tc.parallel(1):
        for k in nest.pipeline(X.shape[0]):
            k.stage("load")
            x = X.at(k.index()).load()
            k.stage("compute")
            Y.at(k.index()).store(x * 2)


def with_plan(plan, **sizes):
    """``scale`` in loop form with ``plan`` set on its pipeline loop ``k`` (as ``s.modulo`` would set it)."""
    p = tc.schedule(scale, **sizes).program
    (lp,) = pipeline_loops(p.body)
    return with_body(p, replace_loop(p.body, lp, [dataclasses.replace(
        lp, pipeline=dataclasses.replace(lp.pipeline, plan=plan))]))


def test_the_checker_discharges_the_plan_obligations_of_every_planned_loop():
    plain = check_program(tc.schedule(scale).program)
    assert not any(r.kind in (Kind.PIPELINE_SCHEDULE, Kind.VERSIONS, Kind.RELEASE) for r in plain)
    r = check_program(with_plan(ModuloPlan(1, (0, 1))))
    assert [r.status(kind) for kind in (Kind.PIPELINE_SCHEDULE, Kind.VERSIONS, Kind.RELEASE)] == ["proved"] * 3, \
        r.explain()
    assert r.ok and all("pipeline loop k" in res.formula for res in r if res.kind == Kind.VERSIONS)
    r = check_program(with_plan(ModuloPlan(1, (0, 1), waits=())))
    (v,) = r.verdicts(Kind.PIPELINE_SCHEDULE)
    assert v.status == "disproved" and v.witness.fact("wait") is False and not r.ok
    r = check_program(with_plan(ModuloPlan(1, (1, 0))))  # the compute of iteration i issues before its load
    (v,) = r.verdicts(Kind.PIPELINE_SCHEDULE)
    assert v.status == "disproved" and (v.witness.fact("i"), v.witness.trip) == (0, 1)
    assert "trip count: N = 1" in r.explain()


def test_a_modulo_plan_of_the_gemm_is_proved_and_its_forged_slots_and_releases_are_disproved():
    def plan(**kw):
        s = tc.schedule(gemm, M=3, N=5, K=28)  # 4 iterations of k
        s.modulo("k", offsets={"load": 0, "compute": 1}, **kw)
        return s.check()

    r = plan()
    assert r.ok and r.contract()[list(r.contract())[-1]] == {kind: "proved" for kind in
                                                             (Kind.PIPELINE_SCHEDULE, Kind.VERSIONS, Kind.RELEASE)}
    (v,) = plan(versions={"a": 1}).verdicts(Kind.VERSIONS)
    w = v.witness
    assert v.status == "disproved" and (w.fact("buffer"), w.fact("i"), w.fact("j"), w.trip) == ("a", 0, 1, 4)
    assert "introduced by: op 0: modulo(" in "\n".join(w.lines())
    (v,) = plan(releases={"a": [], "b": ["compute"]}).verdicts(Kind.RELEASE)
    assert v.status == "disproved" and v.witness.fact("reader") == 1 and "waits for no reader" in v.witness.summary
