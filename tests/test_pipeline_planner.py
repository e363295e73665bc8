"""plan_modulo on hand-built stage graphs: the least II, the earliest offsets, the window, the source-order tie and
the refusals; and a brute force over every (II, theta) on small random graphs as the independent reference."""
import itertools

import numpy as np
import pytest
from hypothesis import given, strategies as st

from tilecert.semantics.pipeline.derive import constrains
from tilecert.semantics.pipeline.latency import LATENCY
from tilecert.semantics.pipeline.plan import Edge, StageGraph, StageInfo
from tilecert.semantics.pipeline.planner import columns, plan_modulo, rec_mii
from tilecert.semantics.sched.base import ScheduleError


def graph(classes, edges, materialized=()):
    """Edges ``(p, c, d)`` (a flow edge through a buffer of its own) or ``(p, c, d, dep, buffer)``."""
    stages = tuple(StageInfo(k, f"s{k}", cls) for k, cls in enumerate(classes))
    made = tuple(Edge(*e[:3], "value", e[4], e[3]) if len(e) == 5 else Edge(*e, "value", f"b{n}")
                 for n, e in enumerate(edges))
    return StageGraph(0, "k", stages, made, tuple(materialized))


COPY_COMPUTE = graph(("copy", "compute"), [(0, 1, 0)])


def legal(g, plan, trip=8):
    """Every edge that constrains the schedule holds at every iteration of a trip, by ``Issue`` itself."""
    return all(plan.issue(e.consumer, i + e.distance) >= plan.issue(e.producer, i) + LATENCY[plan.target][
        g.stages[e.producer].cls] for e in g.edges if constrains(g, e) for i in range(trip) if i + e.distance < trip)


@pytest.mark.parametrize("target,theta", [("c", (0, 1)), ("interp", (0, 1)), ("cuda", (0, 2)),
                                          ("cuda-host", (0, 2))])
def test_copy_then_compute_issues_every_slot_with_the_copy_latency_between(target, theta):
    plan = plan_modulo(COPY_COMPUTE, target=target)
    assert (plan.interval, plan.offsets, plan.planned, plan.target) == (1, theta, True, target)
    assert plan.offsets[1] - plan.offsets[0] == LATENCY[target]["copy"] and legal(COPY_COMPUTE, plan)
    assert (plan.versions, plan.waits, plan.releases) == ((), None, None)  # the derived protocol


def test_a_recurrence_of_latency_2_at_distance_1_forces_interval_2():
    g = graph(("copy", "mma"), [(0, 1, 0), (1, 1, 1)])  # the accumulator carried by the mma stage
    assert rec_mii(g, "cuda") == (2, ()) and rec_mii(g, "c") == (1, ())
    plan = plan_modulo(g, target="cuda")
    assert (plan.interval, plan.offsets) == (2, (0, 2)) and legal(g, plan)
    assert plan_modulo(g, target="c").interval == 1
    assert plan_modulo(g, target="cuda", interval=3).interval == 3  # the policy's interval is a lower bound


@pytest.mark.parametrize("target", ["c", "cuda"])
def test_window_1_forces_the_interval_past_every_offset(target):
    plan = plan_modulo(COPY_COMPUTE, window=1, target=target)
    assert plan.interval > max(plan.offsets) and columns(plan.offsets, plan.interval) == 1
    assert plan.interval == LATENCY[target]["copy"] + 1 and legal(COPY_COMPUTE, plan)
    free = plan_modulo(COPY_COMPUTE, target=target)  # window 0: II 1, latency + 1 iterations in flight
    assert columns(free.offsets, 1) == LATENCY[target]["copy"] + 1
    assert plan_modulo(COPY_COMPUTE, window=columns(free.offsets, 1), target=target).interval == 1
    assert plan_modulo(COPY_COMPUTE, window=columns(free.offsets, 1) - 1, target=target).interval == 2


# the GEMM's K loop: a and b loaded, their product accumulated; the next load overwrites what the mma read
GEMM_EDGES = [(0, 1, 0, "flow", "a"), (0, 1, 0, "flow", "b"), (1, 1, 1, "flow", "acc"), (1, 0, 1, "anti", "a"),
              (1, 0, 1, "anti", "b"), (0, 0, 1, "output", "a"), (1, 1, 1, "anti", "acc"), (1, 1, 1, "output", "acc")]


@pytest.mark.parametrize("target,ii,theta", [("c", 1, (0, 1)), ("cuda", 2, (0, 2))])
def test_writes_to_another_version_of_a_materialized_buffer_are_renamed_by_its_slots(target, ii, theta):
    g = graph(("copy", "mma"), GEMM_EDGES, materialized=("a", "acc", "b"))
    plan = plan_modulo(g, target=target)
    assert (plan.interval, plan.offsets) == (ii, theta) and columns(plan.offsets, ii) == 2  # the loads run ahead
    assert [str(e) for e in g.edges if not constrains(g, e)] == [str(e) for e in g.edges if e.dep != "flow"]
    # the same accesses to storage with one copy (not materialized: a tensor): no overlap
    shared = graph(("copy", "mma"), GEMM_EDGES)
    plan = plan_modulo(shared, target=target)
    assert columns(plan.offsets, plan.interval) == 1 and legal(shared, plan)
    assert plan.interval == LATENCY[target]["copy"] + LATENCY[target]["mma"]  # the cycle load -> mma -> next load


def test_ties_keep_source_order_where_the_edges_allow():
    g = graph(("copy", "compute", "compute"), [(0, 1, 0)])  # stage 2 depends on nothing
    assert plan_modulo(g).offsets == (0, 1, 1)  # the earliest would issue stage 2 at 0, before stage 1
    back = graph(("compute", "compute", "mma"), [(2, 0, 1)])  # stage 0 waits for stage 2 of the last iteration
    plan = plan_modulo(back, target="cuda")
    assert (plan.interval, plan.offsets) == (1, (1, 0, 0)) and legal(back, plan)  # the least II wins over order


def test_refusals_are_schedule_errors_with_a_reason_and_a_hint():
    cyclic = graph(("compute", "compute"), [(0, 1, 0), (1, 0, 0)])
    with pytest.raises(ScheduleError, match="cycle within one iteration") as err:
        plan_modulo(cyclic)
    assert "1 -> 0" in str(err.value) or "0 -> 1" in str(err.value)
    assert err.value.hint
    with pytest.raises(ScheduleError, match="RecMII 2") as err:
        plan_modulo(graph(("mma",), [(0, 0, 1)]), target="cuda", max_interval=1)
    assert "max_interval" in err.value.hint
    with pytest.raises(ScheduleError, match="window 1") as err:
        plan_modulo(COPY_COMPUTE, window=1, max_interval=1)
    assert "window" in err.value.hint
    for bad in ({"interval": 0}, {"window": -1}, {"target": "fpga"}):
        with pytest.raises(ScheduleError):
            plan_modulo(COPY_COMPUTE, **bad)


# ----------------------------------------------------------------------------- the brute force
LAT3 = {"copy": 1, "mma": 2, "compute": 3}  # a test target with latencies 1..3
MAX_II = 4


def cycle_rec_mii(g):
    """max over the simple cycles (every stage sequence, every choice of parallel edges) of ceil(L / D); None for a
    cycle at distance 0."""
    n, worst = len(g.stages), 1
    for k in range(1, n + 1):
        for seq in itertools.permutations(range(n), k):
            if seq[0] != min(seq):
                continue
            hops = [[e for e in g.edges if (e.producer, e.consumer) == (seq[j], seq[(j + 1) % k]) and constrains(g, e)]
                    for j in range(k)]
            for choice in itertools.product(*hops):
                lat = sum(LAT3[g.stages[e.producer].cls] for e in choice)
                dist = sum(e.distance for e in choice)
                if dist == 0:
                    return None
                worst = max(worst, -(-lat // dist))
    return worst


@st.composite
def graphs(draw):
    n = draw(st.integers(2, 4))
    classes = draw(st.lists(st.sampled_from(sorted(LAT3)), min_size=n, max_size=n))
    edges = []
    for _ in range(draw(st.integers(0, 6))):
        p, c = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        d = draw(st.integers(0 if p < c else 1, 2))  # distance 0 only forward (plan.Edge)
        edges.append((p, c, d, draw(st.sampled_from(["flow", "anti", "output"])), draw(st.sampled_from("xyz"))))
    return graph(classes, edges, draw(st.lists(st.sampled_from("xyz"), unique=True)))


@given(graphs(), st.integers(0, 3), st.integers(1, 3))
def test_brute_force_the_planner_finds_the_least_feasible_interval_and_earliest_offsets(g, window, interval):
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(LATENCY, "lat3", LAT3)
        plan = plan_modulo(g, window=window, interval=interval, target="lat3")
        assert rec_mii(g, "lat3")[0] == cycle_rec_mii(g)
        assert legal(g, plan) and (window == 0 or columns(plan.offsets, plan.interval) <= window)
    n = len(g.stages)
    # the earliest offsets are longest paths of at most n - 1 edges of weight <= 3: this grid holds them
    grid = np.array(list(itertools.product(range(3 * (n - 1) + 1), repeat=n)))
    ordered = np.all(np.diff(grid, axis=1) >= 0, axis=1)

    def feasible(ii):
        ok = np.ones(len(grid), dtype=bool)
        for e in filter(lambda e: constrains(g, e), g.edges):
            ok &= grid[:, e.consumer] + e.distance * ii >= grid[:, e.producer] + LAT3[g.stages[e.producer].cls]
        if window:
            ok &= grid.max(axis=1) // ii + 1 <= window
        return ok

    least = next((ii for ii in range(interval, MAX_II + 1) if feasible(ii).any()), None)
    if least is None:
        assert plan.interval > MAX_II
        return
    assert plan.interval == least
    if window == 0:
        assert plan.interval == max(interval, cycle_rec_mii(g))
    ok = feasible(least)
    pool = grid[ok & ordered] if (ok & ordered).any() else grid[ok]  # source order where the edges allow it
    assert bool(ordered[ok].any()) == all(a <= b for a, b in zip(plan.offsets, plan.offsets[1:]))
    assert np.all(pool >= np.array(plan.offsets)), "the offsets are the earliest ones of their class"
