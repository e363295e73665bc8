"""The stage graph of a pipeline loop (semantics/pipeline/graph.py), held against brute-force enumeration."""
from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings, strategies as st

import tilecert as tc
from tilecert import f32
from tilecert.checker.brute import BInst, Enumeration
from tilecert.checker.model import Model
from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.index import IBin, IConst, ISize, IVar
from tilecert.semantics.pipeline.graph import stage_graph
from tilecert.semantics.sched.base import ScheduleError

from examples.gemm import gemm


@tc.kernel
def three(A: tc.Tensor[f32, "K"], B: tc.Tensor[f32, "K"], C: tc.Tensor[f32, "K"]):
    K = A.shape[0]
    for k in tc.pipeline(K, window=3, interval=1):
        k.stage("load")
        a = A.tile((k.index(),), (1,)).load()
        k.stage("scale")
        b = B.tile((k.index(),), (1,)).load() * 2.0
        k.stage("use")
        C.tile((k.index(),), (1,)).store(a + b)


@tc.kernel
def alias(A: tc.Tensor[f32, "N"]):
    N = A.shape[0]
    for k in tc.pipeline(N - 2, window=2, interval=1):
        k.stage("read")
        x = A.at(k.index()).load()
        k.stage("write")
        A.at(k.index() + 2).store(x + 1.0)


@tc.kernel
def nested(A: tc.Tensor[f32, "K"], C: tc.Tensor[f32, "K"]):
    K = A.shape[0]
    for k in tc.pipeline(K, window=2, interval=1):
        k.stage("load")
        a = A.tile((k.index(),), (1,)).load()
        k.stage("use")
        s = a
        for _ in k.serial(2):  # temporaries declared per iteration of an inner loop
            s = s * 2.0 + a
        C.tile((k.index(),), (1,)).store(s)


@tc.kernel
def inferred(A: tc.Tensor[f32, "K"], C: tc.Tensor[f32, "K"]):
    K = A.shape[0]
    acc = tc.zeros(f32, ())
    for k in tc.pipeline(K, window=2, interval=1):  # no cut: stages load / compute inferred
        acc = acc + A.at(k.index()).load()
    C.at(0).store(acc)


def loop_form(kernel) -> ir.Program:
    small = {"bm": 2, "bn": 2, "bk": 2} if kernel is gemm else {}
    return tc.expand(kernel.capture(**small))


def edges(g):
    return {(e.producer, e.consumer, e.buffer, e.dep): (e.distance, e.max_distance) for e in g.edges}


def test_gemm_stages_edges_and_materialized():
    g = stage_graph(loop_form(gemm), "k")
    assert [(s.name, s.cls) for s in g.stages] == [("load", "copy"), ("compute", "mma")]
    got = edges(g)
    # the loads feed the mma in the same iteration; their values live one iteration only
    assert got[(0, 1, "a", "flow")] == (0, 0) and got[(0, 1, "b", "flow")] == (0, 0)
    # the accumulator is carried: the mma at i + 1 reads what the mma at i wrote, and nothing older
    assert got[(1, 1, "acc", "flow")] == (1, 1)
    # reusing a's and b's storage: the next iteration's load overwrites what this iteration's mma reads
    assert got[(1, 0, "a", "anti")][0] == 1 and got[(1, 0, "b", "anti")][0] == 1
    assert (1, 0, "a", "flow") not in got and (0, 1, "a", "anti") not in got
    assert {e.payload for e in g.edges} == {"value"}
    assert g.materialized == ("a", "acc", "b") and g.notes == ()
    assert str(g.trip) == "((K + 1) // 2)"


def test_bound_sizes_bound_the_distances():
    g = stage_graph(loop_form(gemm), "k", {"M": 2, "N": 2, "K": 6})  # 3 iterations
    got = edges(g)
    assert got[(1, 0, "a", "anti")] == (1, 2)  # unbounded (None) with K symbolic
    assert edges(stage_graph(loop_form(gemm), "k"))[(1, 0, "a", "anti")] == (1, None)


def test_an_edge_skips_a_stage():
    g = stage_graph(loop_form(three), "k")
    got = edges(g)
    assert got[(0, 2, "a", "flow")] == (0, 0) and got[(1, 2, "b", "flow")] == (0, 0)
    assert not any(p == 0 and c == 1 for p, c, _, _ in got)  # stage 1 reads nothing of stage 0
    assert [s.cls for s in g.stages] == ["copy", "compute", "compute"]
    assert g.materialized == ("a", "b")  # the temporaries private to one stage get no versions


def test_aliasing_tensor_gives_an_effect_edge_at_its_distance():
    g = stage_graph(loop_form(alias), "k")
    got = edges(g)
    # stage 1 writes A[i + 2] at iteration i; stage 0 reads it at iteration i + 2
    assert got[(1, 0, "A", "flow")] == (2, 2)
    assert [e.payload for e in g.edges if e.buffer == "A"] == ["effect"]
    assert "A" not in g.materialized


def test_an_inferred_accumulation_is_carried_at_distance_one():
    g = stage_graph(loop_form(inferred), "k")
    assert [(st.name, st.cls, st.inferred) for st in g.stages] == [("load", "copy", True), ("compute", "compute", True)]
    got = edges(g)
    assert got[(0, 1, "load", "flow")] == (0, 0) and got[(1, 1, "acc", "flow")] == (1, 1)
    assert edges(stage_graph(loop_form(nested), "k"))[(0, 1, "a", "flow")] == (0, 0)
    assert stage_graph(loop_form(nested), "k").materialized == ("a",)  # s lives inside one iteration


def test_not_a_pipeline_loop_is_refused():
    p = loop_form(gemm)
    with pytest.raises(ScheduleError) as err:
        stage_graph(p, "nest.0")
    assert "not a pipeline loop" in str(err.value) and "k" in err.value.hint
    with pytest.raises(ScheduleError):
        stage_graph(p, "nope")


def test_a_non_affine_access_is_taken_to_touch_everything():
    p = loop_form(alias)
    k = next(lp for lp in L.loops(p.body) if lp.name == "k")
    i = IVar(k.var, 0)

    def square(st):  # the store goes to A[i * i] instead of A[i + 2]
        if isinstance(st, L.Assign) and st.buf == "A":
            return L.Assign("A", (IBin("mul", i, i),), st.value, st.loc)
        if isinstance(st, (L.Loop, L.If)):
            return dataclasses.replace(st, body=ir.Block((), tuple(square(x) for x in st.body.ops)))
        return st

    p = ir.Program(p.name, p.sizes, p.tensors, ir.Block((), tuple(square(x) for x in p.body.ops)), p.config)
    g = stage_graph(p, "k")
    assert g.notes and "not quasi-affine" in g.notes[0]
    got = edges(g)
    assert got[(1, 0, "A", "flow")] == (1, None) and got[(0, 1, "A", "anti")] == (0, None)


# ----------------------------------------------------------------------------- brute force
def brute_edges(p: ir.Program, loop: str, sizes: dict[str, int]) -> dict:
    """Every statement instance of the pipeline at ``sizes``, run in the sequential order: flow edges from each
    read's last writer, anti / output edges from every earlier read / write of the cell (the storage of a buffer
    declared in the pipeline body is one per instance: its cells leave out the pipeline coordinate)."""
    m = Model(p, sizes)
    e = Enumeration(m, sizes)
    lp = next(q for q in L.loops(p.body) if q.name == loop)
    head = next(h for h in m.headers if h.node is lp)
    depth = len(head.loops)  # the pipeline coordinate's position in an instance
    inside = [s for s in m.statements if len(s.loops) > depth and s.loops[depth].node is lp]

    def stage_of(s):
        return getattr(lp.body.ops[s.path[len(head.path)]], "ordinal", None)

    first = {}
    for s in inside:
        if stage_of(s) is not None:
            for a in s.accesses:
                first[id(a.buffer)] = min(first.get(id(a.buffer), 99), stage_of(s))
    stage = {s.id: stage_of(s) if stage_of(s) is not None else first.get(id(s.target)) for s in inside}

    def key(x: BInst):
        out, k = [], 0
        for n, pos in enumerate(x.stmt.path):
            out.append(pos)
            if n < len(x.stmt.path) - 1 and x.stmt.containers[n] == "loop":
                out.append(x.coords[k])
                k += 1
        return out

    def cell(x, a, c):
        buf, owner, idx = c
        if len(a.buffer.owner_loops) > depth:  # declared in the pipeline body: one storage for every iteration
            owner = owner[:depth] + owner[depth + 1:]
        return buf, owner, idx, x.coords[:depth]  # compared inside one pipeline instance

    found: dict = {}

    def note(x, a, y, b, dep):
        d, sp, sc = y.coords[depth] - x.coords[depth], stage[x.stmt.id], stage[y.stmt.id]
        if d > 0 or (d == 0 and sp < sc):
            lo, hi = found.get((sp, sc, a.buffer.name, dep), (d, d))
            found[(sp, sc, a.buffer.name, dep)] = (min(lo, d), max(hi, d))

    instances = sorted((x for s in inside if stage[s.id] is not None for x in e.instances(s)), key=key)
    last: dict = {}
    reads: dict = {}
    writes: dict = {}
    for y in instances:
        touched = [(b, cell(y, b, c)) for b in y.stmt.accesses for c in e.cells(y, b)]
        for b, c in touched:
            if not b.writes or b.mode == "update":
                if c in last:
                    note(*last[c], y, b, "flow")
        for b, c in touched:
            if b.writes:
                for x, a in reads.get(c, []):
                    note(x, a, y, b, "anti")
                for x, a in writes.get(c, []):
                    note(x, a, y, b, "output")
        for b, c in touched:
            if not b.writes or b.mode == "update":
                reads.setdefault(c, []).append((y, b))
            if b.writes:
                writes.setdefault(c, []).append((y, b))
                last[c] = (y, b)
    return found


@pytest.mark.parametrize("kernel, sizes", [(gemm, {"M": 3, "N": 2, "K": 6}), (three, {"K": 4}), (alias, {"N": 6}),
                                           (nested, {"K": 3}), (inferred, {"K": 3}), (inferred, {"K": 0})])
def test_the_graph_agrees_with_brute_force(kernel, sizes):
    p = loop_form(kernel)
    assert edges(stage_graph(p, "k", sizes)) == brute_edges(p, "k", sizes)


# drawn pipelines: stages of scalar stores and updates, some guarded, over two tensors and a declared buffer, at
# shifted indices
def _drawn(draw) -> ir.Program:
    n_stages = draw(st.integers(2, 3))
    k = IVar(0, 0)
    blocks = []
    for s in range(n_stages):
        stmts = []
        for _ in range(draw(st.integers(1, 2))):
            dst = draw(st.sampled_from(["A", "B", "t"]))
            src = draw(st.sampled_from(["A", "B", "t"]))
            shift = [draw(st.integers(0, 2)) for _ in range(2)]
            ix = [IBin("add", k, IConst(c)) for c in shift]
            idx_src = (ix[0],) if src != "t" else (IConst(shift[0] % 2),)
            idx_dst = (ix[1],) if dst != "t" else (IConst(shift[1] % 2),)
            value = L.Bin("add", L.Ld(src, idx_src, "i32"), L.Lit(1, "i32"), "i32")
            stmt = L.Accum(dst, idx_dst, "add", value) if draw(st.booleans()) else L.Assign(dst, idx_dst, value)
            if draw(st.booleans()):  # only on some iterations
                stmt = L.If(IBin("lt", k, IConst(draw(st.integers(0, 3)))), ir.Block((), (stmt,)))
            stmts.append(stmt)
        blocks.append(L.StageBlock(IConst(1), ir.Block((), tuple(stmts)), pipeline=7, ordinal=s, name=f"s{s}"))
    body = (L.Decl(L.Buffer("t", "i32", (IConst(2),))),) + tuple(blocks)
    lp = L.Loop(0, "k", ISize("N"), "pipeline", ir.Block((), body), pipeline=L.Pipelining(7))
    tensors = tuple(ir.TensorDecl(n, "i32", (), (IBin("add", ISize("N"), IConst(2)),), True) for n in ("A", "B"))
    return ir.Program("drawn", ("N",), tensors, ir.Block((), (lp,)))


@settings(deadline=None)
@given(st.data())
def test_drawn_pipelines_agree_with_brute_force(data):
    p = _drawn(data.draw)
    for n in (0, 1, 4):
        assert edges(stage_graph(p, "k", {"N": n})) == brute_edges(p, "k", {"N": n})
    symbolic = edges(stage_graph(p, "k"))
    bound = edges(stage_graph(p, "k", {"N": 4}))
    for key, (lo, _) in bound.items():  # the symbolic graph holds every bound one: no edge, no smaller distance lost
        assert key in symbolic and symbolic[key][0] <= lo


def test_brute_force_sees_what_it_should():
    # the reference itself: a carried accumulator shows at distance 1 only from iteration 1 on
    p = loop_form(gemm)
    assert brute_edges(p, "k", {"M": 2, "N": 2, "K": 2}).get((1, 1, "acc", "flow")) is None
    assert brute_edges(p, "k", {"M": 2, "N": 2, "K": 4})[(1, 1, "acc", "flow")] == (1, 1)
    assert brute_edges(p, "k", {"M": 0, "N": 2, "K": 4}) == {}
