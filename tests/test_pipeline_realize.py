"""The realization of modulo plans and the overlapped interpreter (seed 003, issue 13 parts 6 and 8).

Every admissible plan (brute-force legal: every edge's latency met for every iteration, the window respected)
realized and run by the loop interpreter gives bitwise the outputs of the sequential meaning, for trip counts 0..9,
intervals 1..3, windows 0..4, 2 to 4 stages, aliasing and non-aliasing operands; a bad plan (a missing wait, too
few slots, a latency violation at II = 1) gives different outputs on a random input. The stage graphs are built
here from the programs (a buffer the body declares flows from its first stage to every later one that touches it),
with the tensor edges of the aliasing kernel listed by hand.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tilecert as tc
from tilecert import f32
from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.index import evaluate
from tilecert.semantics.loopinterp import interpret_loops
from tilecert.lowering.program import LoweringError
from tilecert.semantics.pipeline.derive import derive
from tilecert.semantics.pipeline.graph import stage_graph
from tilecert.semantics.pipeline.latency import edge_latency, stage_latency
from tilecert.semantics.pipeline.plan import Edge, ModuloPlan, StageGraph, StageInfo
from tilecert.semantics.pipeline.realize import ordering_violations, overwrites, realization, realize, run_overlapped
from tilecert.semantics.pipeline.stages import stage_blocks
from tilecert.semantics.sched.base import ScheduleError, the_loop, touched

from test_pipeline_graph import alias

@tc.kernel
def two(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"]):
    N = X.shape[0]
    for k in tc.pipeline(N, window=2, interval=1):
        k.stage("load")
        a = X.at(k.index()).load()
        k.stage("compute")
        Y.at(k.index()).store(a * 2.0 + 1.0)


@tc.kernel
def three(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"]):
    """Tiles of one element: every buffer is written by a loop nest."""
    for k in tc.pipeline(X.shape[0], window=3, interval=1):
        k.stage("load")
        a = X.tile((k.index(),), (1,)).load()
        k.stage("scale")
        b = a * 3.0
        k.stage("store")
        Y.tile((k.index(),), (1,)).store(b - a)


@tc.kernel
def four(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"]):
    """A running sum: the carried ``acc`` is read by stage 2 and written back by stage 3 (edges that force II)."""
    N = X.shape[0]
    acc = tc.zeros(f32, ())
    for k in tc.pipeline(N, window=2, interval=1):
        k.stage("load")
        a = X.at(k.index()).load()
        k.stage("square")
        b = a * a
        k.stage("sum")
        acc = acc + b
        k.stage("store")
        Y.at(k.index()).store(acc)


@tc.kernel
def tiles(A: tc.Tensor[f32, "M", "K"], B: tc.Tensor[f32, "K", "N"], C: tc.Tensor[f32, "M", "N"]):
    """A GEMM with tile loads (copy) and an mma stage, as examples/gemm.py, at small tiles."""
    M, K = A.shape
    N = B.shape[1]
    acc = tc.zeros(f32, (2, 3))
    for k in tc.pipeline(tc.cdiv(K, 2), window=2, interval=1):
        k.stage("load")
        a = A.tile((0, k.index() * 2), (2, 2)).load()
        b = B.tile((k.index() * 2, 0), (2, 3)).load()
        k.stage("compute")
        acc = tc.mma(a, b, acc)
    C.tile((0, 0), (2, 3)).store(acc)


def graph_of(program, classes, extra=(), loop="k", target_edges=True) -> StageGraph:
    """The stage graph of ``loop``: every buffer its body declares flows (distance 0) from its first stage to every
    later stage that touches it; ``extra`` adds the edges of carried state and tensors."""
    lp = the_loop(program, loop, "test")
    blocks = stage_blocks(lp)
    edges, materialized = list(extra), []
    for d in (st for st in lp.body.ops if isinstance(st, L.Decl)):
        users = [s.ordinal for s in blocks if d.buf.name in touched(s)]
        if len(users) > 1:
            materialized.append(d.buf.name)
            edges += [Edge(users[0], c, 0, "value", d.buf.name, max_distance=0) for c in users[1:]]
    stages = tuple(StageInfo(s.ordinal, s.name, cls) for s, cls in zip(blocks, classes))
    return StageGraph(lp.pipeline.pipeline, loop, stages, tuple(edges), tuple(materialized))


CARRY = "acc"


def carried_edges(program) -> tuple[Edge, ...]:
    """``four``'s carry: stage 2 reads ``acc`` written back by stage 3 one iteration earlier; stage 3 overwrites what
    stage 2 read."""
    return (Edge(3, 2, 1, "effect", CARRY, "flow", 1), Edge(2, 3, 0, "effect", CARRY, "anti", 0),
            Edge(3, 3, 1, "effect", CARRY, "output", 1))


ALIAS_EDGES = (Edge(1, 0, 2, "effect", "A", "flow", 2),)  # stage 1 writes A[k + 2], which stage 0 reads at k + 2
LONGER = {"alias": 2}  # a kernel's tensors are this much longer than its trip count
GEMM_EDGES = (Edge(1, 1, 1, "effect", "acc", "flow", 1),)

CASES = {
    "two": (two, ("copy", "compute"), ()),
    "three": (three, ("copy", "compute", "compute"), ()),
    "four": (four, ("copy", "compute", "compute", "compute"), "carry"),
    "alias": (alias, ("copy", "compute"), ALIAS_EDGES),
}


def case(name: str):
    kernel, classes, extra = CASES[name]
    program = tc.schedule(kernel).program
    if extra == "carry":
        extra = carried_edges(program)
    return program, graph_of(program, classes, extra)


def legal(graph: StageGraph, plan: ModuloPlan, n: int = 12, slotted: frozenset = frozenset()) -> bool:
    """Brute force: ``Issue(c, i + d) >= Issue(p, i) + latency(e)`` for every edge and ``0 <= i``, ``i + d < n`` (but
    the anti and output edges of the ``slotted`` buffers: a version per iteration, their reuse is the versions
    rule); at most ``window`` iterations in flight when it is set."""
    for e in graph.edges:
        if e.producer == e.consumer and e.distance == 0 or (e.dep != "flow" and e.buffer in slotted):
            continue
        for i in range(max(0, n - e.distance)):
            if plan.issue(e.consumer, i + e.distance) < plan.issue(e.producer, i) + edge_latency(graph, e, plan.target):
                return False
    return not plan.window or max(plan.offsets) // plan.interval + 1 <= plan.window


def inputs(program, n: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for t in program.tensors:
        shape = tuple(n + LONGER.get(program.name, 0) for _ in t.shape)
        out[t.name] = rng.standard_normal(shape).astype(np.float32)
    return out


def sequential(program, arrays: dict) -> dict:
    return tc.run(program, **arrays)


def overlapped(realized, arrays: dict) -> dict:
    return run_overlapped(realized, {}, arrays)


def declared(program, loop: str = "k") -> frozenset:
    """The buffers pipeline loop ``loop`` declares: one version per iteration."""
    return frozenset(st.buf.name for st in the_loop(program, loop, "test").body.ops if isinstance(st, L.Decl))


def plans_for(graph: StageGraph, target: str = "c", slotted: frozenset = frozenset()):
    """For each interval 1..3 and window 0..4: the admissible plan with the most columns and, among those, the least
    offsets (offsets of stage 0 fixed at 0, others in [0, 3 * II + 2))."""
    s = len(graph.stages)
    chosen = {}
    for ii, window in itertools.product((1, 2, 3), range(5)):
        best = None
        for rest in itertools.product(range(3 * ii + 2), repeat=s - 1):
            plan = ModuloPlan(ii, (0,) + rest, window, target)
            if not legal(graph, plan, slotted=slotted):
                continue
            rank = (-(max(plan.offsets) // ii), sum(plan.offsets))
            if best is None or rank < best[0]:
                best = (rank, plan)
        if best is not None:
            chosen.setdefault((ii, best[1].offsets), best[1])
    return list(chosen.values())


@pytest.mark.parametrize("source", ["by hand", "stage_graph"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_admissible_plans_match_the_sequential_meaning(name, source):
    """On the graphs built here and on ``stage_graph``'s (isl on memory effects: the reuse of a body buffer by the
    next iteration shows as anti and output edges, which the slots realize)."""
    program, graph = case(name)
    slotted = declared(program)
    if source == "stage_graph":
        graph = stage_graph(program, "k", {})
    plans = plans_for(graph, slotted=slotted)
    assert any(max(p.offsets) // p.interval > 0 for p in plans), "some plan overlaps iterations"
    for plan in plans:
        realized = realize(program, "k", graph, plan)
        for n in range(10):
            arrays = inputs(program, n, seed=n)
            want, got = sequential(program, arrays), overlapped(realized, arrays)
            assert all(np.array_equal(want[t], got[t]) for t in want), (name, plan, n)


def test_a_modulo_schedule_runs_overlapped_and_its_unproved_plan_is_refused_by_the_c_lowering():
    from examples.gemm import gemm
    s = tc.schedule(gemm)
    s.modulo("k", interval=1, offsets={"load": 0, "compute": 1})
    rng = np.random.default_rng(2)
    a = rng.standard_normal((7, 16)).astype(np.float32)
    b = rng.standard_normal((16, 9)).astype(np.float32)
    c = np.zeros((7, 9), np.float32)
    want = tc.run(tc.schedule(gemm).program, A=a, B=b, C=c)["C"]
    planned = tc.schedule(gemm)
    planned.modulo("k")  # the planner's plan
    for sched in (s, planned):
        for model in ("sync", "async"):
            assert np.array_equal(run_overlapped(sched, None, {"A": a, "B": b, "C": c}, model=model)["C"], want)
    bad = tc.schedule(gemm)
    bad.modulo("k", interval=1, offsets={"load": 0, "compute": 0})  # the mma issues with the loads it reads
    with pytest.raises(LoweringError, match="not proved"):
        tc.compile(bad, allow_unproved=True)


def test_the_rings_have_the_derived_slots_and_the_ticks_the_columns():
    program, graph = case("two")
    plan = ModuloPlan(1, (0, 2), 0, "c")
    r = realization(program, "k", graph, plan)
    assert r.columns == 3 and derive(graph, plan).ring("a").versions == 3
    ring = next(d for d in r.decls if d.buf.name == "a")
    assert ring.buf.shape == (L.IConst(3),)
    text = tc.format_program(realize(program, "k", graph, plan))
    assert "serial k.ticks" in text and "- 2) % 3)]" in text


def test_trip_count_is_symbolic_and_the_ticks_cover_n_plus_c_minus_1():
    program, graph = case("three")
    plan = ModuloPlan(1, (0, 1, 2), 0, "c")
    r = realization(program, "k", graph, plan)
    tick = r.statements()[-1]
    assert [evaluate(tick.extent, {"N": n}, {}) for n in range(4)] == [2, 3, 4, 5]


def test_async_copies_land_at_a_wait_late_enough():
    program, graph = case("two")
    good = ModuloPlan(1, (0, 2), 0, "cuda-host")
    assert legal(graph, good)
    realized = realize(program, "k", graph, good, model="async")
    assert "a.inflight" in tc.format_program(realized)
    for n in range(6):
        arrays = inputs(program, n, n)
        want, got = sequential(program, arrays), overlapped(realized, arrays)
        assert np.array_equal(want["Y"], got["Y"])


def differs(program, realized, n: int = 7, seed: int = 3) -> bool:
    arrays = inputs(program, n, seed)
    want, got = sequential(program, arrays), overlapped(realized, arrays)
    return any(not np.array_equal(want[t], got[t]) for t in want)


def test_a_missing_wait_shows_a_wrong_value():
    program, graph = case("two")
    plan = ModuloPlan(1, (0, 2), 0, "cuda-host", waits=())
    assert differs(program, realize(program, "k", graph, plan, model="async"))
    assert not differs(program, realize(program, "k", graph, plan, model="sync"))  # on C a copy lands at once


def test_too_few_slots_show_a_wrong_value():
    program, graph = case("two")
    for model, target, theta in (("sync", "c", (0, 1)), ("async", "cuda-host", (0, 2))):
        enough = ModuloPlan(1, theta, 0, target)
        v = derive(graph, enough).ring("a").versions
        assert not differs(program, realize(program, "k", graph, enough, model))
        short = ModuloPlan(1, theta, 0, target, versions=(("a", v - 1),))
        assert differs(program, realize(program, "k", graph, short, model)), (model, v)


def test_an_mma_reads_its_ring_at_completion():
    """On async an mma holds its operands for its latency: one slot less than ``derive`` asks is wrong there, and
    enough for the same plan on sync (where reads complete at issue)."""
    program = tc.schedule(tiles).program
    graph = graph_of(program, ("copy", "mma"), GEMM_EDGES)
    plan = ModuloPlan(2, (0, 3), 0, "cuda-host")
    assert legal(graph, plan)
    v = derive(graph, plan).ring("a").versions

    def run(p, k):
        rng = np.random.default_rng(k)
        arrays = {"A": rng.standard_normal((2, 2 * k)).astype(np.float32),
                  "B": rng.standard_normal((2 * k, 3)).astype(np.float32), "C": np.zeros((2, 3), np.float32)}
        return sequential(program, arrays)["C"], overlapped(p, arrays)["C"]

    for k in (0, 1, 4):
        want, got = run(realize(program, "k", graph, plan, "async"), k)
        assert np.array_equal(want, got)
    short = ModuloPlan(2, (0, 3), 0, "cuda-host", versions=(("a", v - 1), ("b", v - 1)))
    want, got = run(realize(program, "k", graph, short, "async"), 4)
    assert not np.array_equal(want, got)
    want, got = run(realize(program, "k", graph, short, "sync"), 4)
    assert np.array_equal(want, got)


def test_a_latency_violation_at_ii_1_shows_and_ii_2_fixes_it():
    program, graph = case("alias")
    bad, fixed = ModuloPlan(1, (0, 2), 0, "c"), ModuloPlan(2, (0, 2), 0, "c")
    assert not legal(graph, bad) and legal(graph, fixed)
    assert differs(program, realize(program, "k", graph, bad))
    assert not differs(program, realize(program, "k", graph, fixed))
    # a copy whose wait comes before its latency (cuda: 2 slots) never lands
    program, graph = case("two")
    early = ModuloPlan(1, (0, 1), 0, "cuda-host")
    assert not legal(graph, early)
    assert differs(program, realize(program, "k", graph, early, "async"))


def test_a_slot_written_whole_first_gets_no_zero_fill():
    program, graph = case("two")
    text = tc.format_program(realize(program, "k", graph, ModuloPlan(1, (0, 1), 0, "c")))
    assert "a.zero" not in text  # stage 0 writes a[] first
    gemm = tc.schedule(tiles).program
    lp = the_loop(gemm, "k", "t")
    a = next(d.buf for d in lp.body.ops if isinstance(d, L.Decl) and d.buf.name == "a")
    load = stage_blocks(lp)[0]
    assert overwrites(load.body.ops, a)
    assert not overwrites(stage_blocks(lp)[1].body.ops, a)  # the mma reads a first


def test_refusals_are_typed():
    program, graph = case("two")
    with pytest.raises(ScheduleError, match="offsets"):
        realize(program, "k", graph, ModuloPlan(1, (0,), 0, "c"))
    with pytest.raises(ScheduleError, match="model"):
        realize(program, "k", graph, ModuloPlan(1, (0, 1), 0, "c"), model="eventual")


def test_carried_state_keeps_one_copy_and_the_edges_it_needs_are_named():
    program, graph = case("four")
    bad = ModuloPlan(1, (0, 1, 2, 3), 0, "c")  # stage 2 reads acc as the previous iteration's stage 3 writes it
    assert ordering_violations(program, "k", graph, bad) == (Edge(3, 2, 1, "effect", CARRY, "flow", 1),)
    assert differs(program, realize(program, "k", graph, bad))
    good = ModuloPlan(2, (0, 1, 2, 3), 0, "c")
    assert ordering_violations(program, "k", graph, good) == () and legal(graph, good)
    for d in realization(program, "k", graph, good).decls:
        assert d.buf.name != CARRY  # declared before the loop, as it was


def violation(graph: StageGraph, plan: ModuloPlan, model: str, n: int, slotted: frozenset = frozenset()):
    """Brute force over ``n`` iterations: the first rule ``plan`` breaks under ``model`` (None: none) as ``(rule,
    buffer)``: an edge's latency, a slot overwritten before the release of every actual reader of its version, or a
    flow edge from a copy stage without a wait (async)."""
    if not legal(graph, plan, n, slotted):
        return "edges", None
    d = derive(graph, plan)
    flows = [e for e in graph.edges if e.dep == "flow"]
    for b in graph.materialized if not slotted else set(graph.materialized) & slotted:
        ring = d.ring(b)
        v = ring.versions if ring else 1
        readers = [e for e in flows if e.buffer == b]
        for i in range(n - v):
            release = max(plan.issue(e.consumer, i + e.distance) + stage_latency(graph, e.consumer, plan.target)
                          for e in readers)
            if plan.issue(readers[0].producer, i + v) < release:
                return "versions", b
    if model == "async":
        for e in flows:
            if graph.stages[e.producer].cls == "copy" and (e.producer, e.consumer, e.buffer) not in d.waits:
                return "waits", e.buffer
    return None


@st.composite
def drawn_plans(draw):
    name = draw(st.sampled_from(["two", "three"]))
    program, graph = case(name)
    if draw(st.booleans()):
        graph = stage_graph(program, "k", {})
    model, target = draw(st.sampled_from([("sync", "c"), ("async", "cuda-host")]))
    theta = (0,) + tuple(draw(st.integers(0, 6)) for _ in graph.stages[1:])
    versions = tuple((b, draw(st.integers(1, 4))) for b in graph.materialized if draw(st.booleans()))
    flows = [(e.producer, e.consumer, e.buffer) for e in graph.edges if e.dep == "flow"]
    waits = draw(st.one_of(st.none(), st.lists(st.sampled_from(flows), unique=True).map(tuple)))
    plan = ModuloPlan(draw(st.integers(1, 3)), theta, 0, target, versions, waits)
    return name, program, graph, plan, model


@given(drawn_plans(), st.integers(0, 2 ** 16))
def test_drawn_plans_match_when_legal_and_differ_when_not(drawn, seed):
    """Every plan legal under its model matches the sequential meaning; every one that breaks a rule within the trip
    count shows a different output, except a missing wait on a buffer another consumer waits for (that wait
    completes the copy for every reader)."""
    name, program, graph, plan, model = drawn
    n = 7
    arrays = inputs(program, n, seed)
    want, got = sequential(program, arrays), overlapped(realize(program, "k", graph, plan, model), arrays)
    same = all(np.array_equal(want[t], got[t]) for t in want)
    broken = violation(graph, plan, model, n, declared(program))
    if broken is None:
        assert same, (name, plan, model)
    elif broken[0] != "waits" or not any(w[2] == broken[1] for w in derive(graph, plan).waits):
        assert not same, (name, plan, model, broken)


def test_run_overlapped_takes_a_schedule_a_kernel_or_a_program():
    program, graph = case("two")
    plan = ModuloPlan(1, (0, 2), 0, "c")
    arrays = inputs(program, 6, 1)
    want = sequential(program, arrays)["Y"]
    for subject in (two, tc.schedule(two), program):
        got = run_overlapped(subject, {"k": (graph, plan)}, arrays, model="sync")["Y"]
        assert np.array_equal(want, got)
    assert np.array_equal(run_overlapped(program, None, arrays)["Y"], want)  # no plan set: the sequential order
    with pytest.raises(ScheduleError, match="expected"):
        run_overlapped(tc.capture(two), None, arrays)


def test_an_async_realization_names_its_pending_copies_and_waits():
    program, graph = case("three")
    r = realization(program, "k", graph, ModuloPlan(1, (0, 2, 3), 0, "cuda-host"), "async")
    assert r.pending == (("a", "a.inflight"),)
    text = tc.format_program(realize(program, "k", graph, ModuloPlan(1, (0, 2, 3), 0, "cuda-host"), "async"))
    assert "local a.inflight: f32[4, 1]" in text
    assert text.count("a.inflight[") == 3  # written by the copy, moved by the waits of stages 1 and 2
    gemm = tc.schedule(tiles).program
    graph = graph_of(gemm, ("copy", "mma"), GEMM_EDGES)
    r = realization(gemm, "k", graph, ModuloPlan(2, (0, 2), 0, "cuda-host"), "async")
    names = {lp.name for pc in r.pieces for lp in L.loops(ir.Block((), pc.stmts))}
    assert {"a.poison.0", "a.wait.1", "b.poison.1", "b.wait.0"} <= names
    # in one tick: the mma's completion (iteration j - 2), then the issues, newest iteration first: the copy (j),
    # the mma's waits (j - 1)
    assert [(pc.column, pc.key[1]) for pc in r.pieces] == [(2, 0), (0, 1), (1, 1)]
