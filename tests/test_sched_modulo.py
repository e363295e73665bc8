"""The modulo schedule op (semantics/sched/modulo.py): it sets a plan on a pipeline loop, refuses bad arguments,
and the plan survives later ops and the schedule file."""
from __future__ import annotations

import dataclasses
import itertools

import pytest

import tilecert as tc
from tilecert.checker.check import DISCHARGED
from tilecert.semantics import loopir as L
from tilecert.semantics.pipeline.derive import constrains
from tilecert.semantics.pipeline.graph import stage_graph
from tilecert.semantics.pipeline.latency import LATENCY
from tilecert.semantics.pipeline.plan import ModuloPlan
from tilecert.semantics.sched.base import ScheduleError
from tilecert.semantics.sched.schedule import Schedule
from tilecert.semantics.transform import Kind

from examples.gemm import gemm

SIZES = {"M": 3, "N": 5, "K": 14}
PLAN_KINDS = {Kind.PIPELINE_SCHEDULE, Kind.VERSIONS, Kind.RELEASE}


def pipeline_loop(s: Schedule) -> L.Loop:
    return next(lp for lp in L.loops(s.program.body) if lp.name == "k")


def fresh() -> Schedule:
    return tc.schedule(gemm, **SIZES)


def test_the_op_sets_the_plan_and_changes_nothing_else():
    s = fresh()
    assert pipeline_loop(s).pipeline.plan is None
    s.modulo("k", interval=2, offsets={"load": 0, "compute": 1}, versions={"a": 2}, waits=[["load", 1, "a"]],
             releases={"a": ["compute"], "b": []})
    got = pipeline_loop(s).pipeline
    assert got.plan == ModuloPlan(2, (0, 1), 2, versions=(("a", 2),), waits=((0, 1, "a"),),
                                  releases=(("a", (1,)), ("b", ())))
    assert (got.window, got.interval) == (2, 1)  # the policy stays as written; the plan is what realizes it
    assert "pipeline k [2] window=2 interval=1 plan II=2 theta=(0, 1)" in s.loop_tree()
    t = s.transforms[-1]
    assert {ob.kind for ob in t.obligations} == PLAN_KINDS and str(t.tau) == "identity"
    unplanned = dataclasses.replace(pipeline_loop(s), pipeline=dataclasses.replace(got, plan=None))
    assert unplanned == pipeline_loop(fresh())  # the statements are untouched
    assert tc.digest(s.program) != tc.digest(fresh().program)


def test_show_prints_the_plan(capsys):
    s = fresh()
    s.modulo("k", offsets={0: 0, 1: 2}, window=3)
    s.show()
    assert "window=2 interval=1 plan II=1 theta=(0, 2)" in capsys.readouterr().out
    assert pipeline_loop(s).pipeline.plan.window == 3  # given; else the policy's
    assert s.history[-1][1]["offsets"] == {"0": 0, "1": 2}  # int keys recorded as a file holds them


def legal(graph, plan) -> bool:
    """Every constraining edge's difference constraint at the plan's interval (the latency table, one iteration apart
    per d) and the window."""
    return all(plan.offsets[e.consumer] + e.distance * plan.interval >= plan.offsets[e.producer]
               + LATENCY[plan.target][graph.stages[e.producer].cls] for e in graph.edges if constrains(graph, e)) and (
        plan.window == 0 or max(plan.offsets) // plan.interval + 1 <= plan.window)


@pytest.mark.parametrize("kwargs", [{}, {"interval": 3}, {"window": 1}, {"versions": {"a": 2}}])
def test_without_offsets_the_planner_chooses(kwargs):
    s = fresh()
    s.modulo("k", **kwargs)
    plan = pipeline_loop(s).pipeline.plan
    graph = stage_graph(s.programs[-2], "k", SIZES)
    assert plan.planned and legal(graph, plan) and plan.window == kwargs.get("window", 2)
    assert plan.versions == tuple(kwargs.get("versions", {}).items()) and "(planned)" in s.loop_tree()
    if "interval" in kwargs:
        assert plan.interval == kwargs["interval"]
    else:  # the least interval: no offsets (up to a few intervals) are legal at a smaller one
        assert not any(legal(graph, dataclasses.replace(plan, interval=ii, offsets=theta))
                       for ii in range(1, plan.interval) for theta in itertools.product(range(8), repeat=2))


def test_an_interval_the_graph_cannot_meet_is_refused():
    s = fresh()
    s.modulo("k", window=1)
    least = pipeline_loop(s).pipeline.plan.interval
    assert least > 1  # no overlap: the mma issues a copy latency after the load, within one interval
    with pytest.raises(ScheduleError) as err:
        fresh().modulo("k", interval=least - 1, window=1)
    assert f"interval={least - 1} was given" in err.value.message and "leave interval out" in err.value.hint


def test_a_later_op_keeps_the_plan_and_a_second_modulo_replaces_it():
    s = fresh()
    s.modulo("k", offsets={"load": 0, "compute": 1})
    s.split("a.load.K", 2)
    assert pipeline_loop(s).pipeline.plan.offsets == (0, 1)
    s.modulo("k", interval=3, offsets={"load": 0, "compute": 0})
    assert (pipeline_loop(s).pipeline.plan.interval, pipeline_loop(s).pipeline.plan.offsets) == (3, (0, 0))


def test_the_plan_replays_from_a_schedule_file(tmp_path):
    s = fresh()
    s.modulo("k", interval=1, offsets={"compute": 1, "load": 0}, versions={"a": 2, "b": 3},
             waits=[[0, "compute", "b"]], releases={"b": [1]})
    path = tmp_path / "gemm.schedule.json"
    s.save(path)
    back = Schedule.load(path, gemm)
    assert pipeline_loop(back).pipeline.plan == pipeline_loop(s).pipeline.plan
    assert tc.digest(back.program) == tc.digest(s.program)


@pytest.mark.parametrize("kwargs, words", [
    ({"loop": "nest.0", "offsets": {"load": 0}}, "not a pipeline loop"),
    ({"loop": "k", "interval": 0, "offsets": {"load": 0, "compute": 1}}, "interval must be a positive int"),
    ({"loop": "k", "offsets": {"load": 0}}, "no offset for stage 1 (compute)"),
    ({"loop": "k", "offsets": {"load": 0, "compute": -1}}, "the value of 'compute' (-1) is not a non-negative int"),
    ({"loop": "k", "offsets": {"load": 0, "store": 1}}, "no single stage of loop 'k' is 'store'"),
    ({"loop": "k", "offsets": {"load": 0, "0": 1, "compute": 1}}, "stage 0 (load) has two offsets"),
    ({"loop": "k", "offsets": {"load": 0, 5: 1}}, "no single stage of loop 'k' is '5'"),
    ({"loop": "k", "offsets": {"load": 0, "compute": 1}, "versions": {"a": 0}}, "is not a positive int"),
    ({"loop": "k", "offsets": {"load": 0, "compute": 1}, "versions": {"z": 2}}, "no buffer named 'z'"),
    ({"loop": "k", "offsets": {"load": 0, "compute": 1}, "waits": [[0, 1]]}, "3 items, 2 here"),
    ({"loop": "k", "offsets": {"load": 0, "compute": 1}, "waits": [[0, 2, "a"]]}, "no single stage of loop 'k' is 2"),
    ({"loop": "k", "offsets": {"load": 0, "compute": 1}, "releases": {"a": "compute"}}, "('compute') is not a list"),
    ({"loop": "k", "offsets": ["load"]}, "must be a dict"),
])
def test_bad_arguments_are_refused_with_a_hint(kwargs, words):
    s = fresh()
    with pytest.raises(ScheduleError) as err:
        s.modulo(**kwargs)
    assert words in str(err.value) and err.value.hint
    assert s.history == []


def test_the_stated_kinds_are_unknown_until_the_checker_decides_them():
    s = tc.schedule(gemm, M=3, N=5, K=7)
    s.modulo("k", offsets={"load": 0, "compute": 1})
    r = s.check()
    stated = r.contract()[list(r.contract())[-1]]
    assert set(stated) == PLAN_KINDS
    for kind in PLAN_KINDS - DISCHARGED:
        assert stated[kind] == "unknown"
    assert not PLAN_KINDS - DISCHARGED or not r.ok
