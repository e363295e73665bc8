"""fission(loop, after) and merge(first, second): distribute a loop over its body, fuse sibling loops.

The legal forms are proved and compute what the program before computes (C and cuda-host too);
each illegal twin (a fission or a merge that reverses a dependence) is disproved by ``s.check()``
with a witness the interpreter replays; on random two-statement loops the checker's verdicts equal
brute-force enumeration; every precondition failure is a ``ScheduleError`` with a hint; and merging
the sibling row nests of a softmax leaves one loop to bind where there were nine (on the attention-like
``all_regions``, 10 tile-op nests of 29).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilecert as tc
from examples import EXAMPLES
from tilecert import i32
from tilecert.semantics import ir
from tilecert.semantics.errors import NoninterferenceError
from tilecert.semantics import loopir as L
from tilecert.semantics.mapper import subst_node
from tilecert.semantics.sched.base import ScheduleError
from tilecert.semantics.sched.fission import fission
from tilecert.semantics.sched.merge import merge

from test_checker_brute import BOUND, FULL, SETTINGS, check_transform_agrees
from test_checker_programs import (KINDS, accum, add, affine, assign, barrier, decl, ld, loop, mul, plus, program, run,
                                   tensor, times, transform, v)


@tc.kernel
def forward(X: tc.Tensor[i32, "N"], A: tc.Tensor[i32, "N"], B: tc.Tensor[i32, "N"]):
    """S2 reads A[i + 1] (written by S1 in the same iteration) and A[i] (the iteration before): fission is legal."""
    for i in tc.serial(X.shape[0] - 1):
        A.at(i.index() + 1).store(X.at(i.index()).load())
        B.at(i.index()).store(A.at(i.index() + 1).load() + A.at(i.index()).load())


@tc.kernel
def backward(X: tc.Tensor[i32, "N"], A: tc.Tensor[i32, "N"], B: tc.Tensor[i32, "N"]):
    """S2 at i reads A[i + 1] before S1 writes it at i + 1: fission would read the new value."""
    for i in tc.serial(X.shape[0] - 1):
        A.at(i.index()).store(X.at(i.index()).load())
        B.at(i.index()).store(A.at(i.index() + 1).load())


@tc.kernel
def two_passes(X: tc.Tensor[i32, "N"], A: tc.Tensor[i32, "N"], B: tc.Tensor[i32, "N"], shift: int = 0):
    """A first pass writes A[i]; a second reads A[j + shift]: merging them is legal iff shift <= 0."""
    N = X.shape[0]
    for i in tc.serial(N - 1):
        A.at(i.index() + 1).store(X.at(i.index()).load() * 2)
    for j in tc.serial(N - 1):
        B.at(j.index()).store(A.at(j.index() + 1 + shift).load() + 1)


def arrays(n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {k: rng.integers(-9, 10, n).astype(np.int32) for k in "XAB"}


def same_results(s, base, n: int) -> None:
    for seed in range(2):
        want, got = base.run(**arrays(n, seed)), s.run(**arrays(n, seed))
        for out in want:
            np.testing.assert_array_equal(got[out], want[out], err_msg=out)


def refused(fn, *args, match, **kwargs) -> ScheduleError:
    with pytest.raises(ScheduleError, match=match) as info:
        fn(*args, **kwargs)
    assert info.value.hint, "every ScheduleError carries a hint"
    return info.value


def top_loops(s) -> list[tuple[str, str, str]]:
    return [(lp.name, str(lp.extent), lp.kind) for lp in s.loops() if lp.depth == 0]


def disproved_dependence(s):
    r = s.check()
    assert not r.ok and r.status("dependence") == "disproved", r.explain()
    w = r.verdicts("dependence")[0].witness
    assert w.replay.startswith("CONFIRMED"), w.lines()
    return w


# ============================================================================ fission
def test_a_legal_fission_is_proved_and_computes_what_the_loop_computed():
    base, s = tc.schedule(forward, N=7), tc.schedule(forward, N=7)
    assert s.fission("i", after="A") == ("i.f0", "i.f1")
    assert top_loops(s) == [("i.f0", "(N - 1)", "serial"), ("i.f1", "(N - 1)", "serial")]
    first, second = (lp for lp in s.program.body.ops if isinstance(lp, L.Loop))
    assert [type(st).__name__ for st in first.body.ops] == ["Decl", "Assign", "Assign"]  # load, load[] =, A[i + 1] =
    assert {st.buf for st in second.body.ops if isinstance(st, L.Assign)} == {"load1", "load2", "add", "B"}
    r = s.check()
    assert r.ok and r.status("dependence") == "proved" and r.status("coverage") == "proved", r.explain()
    same_results(s, base, 7)


def test_a_fission_that_reverses_a_dependence_is_disproved_with_a_replayed_witness():
    s = tc.schedule(backward, N=7)
    s.fission("i", after="A")
    w = disproved_dependence(s)
    assert w.cell.startswith("A[")
    olds = [inst for inst in w.instances if inst.role == "old"]
    assert olds[0].statement.endswith("A[(i + 1)]") and dict(olds[1].coords)["i"] == dict(olds[0].coords)["i"] + 1
    base = tc.schedule(backward, N=7)
    assert not np.array_equal(s.run(**arrays(7))["B"], base.run(**arrays(7))["B"])


def test_fission_moves_a_declaration_to_the_half_that_uses_it_and_names_cuts_by_loop_or_buffer():
    s = tc.schedule(EXAMPLES["softmax"].kernel, M=8, N=8)
    for second in ("row_max.init.M", "row_max.reduce.M", "sub.sub.M"):
        s.merge("x.load.M", second)
    merged = s.program
    assert s.fission("x.load.M", after="row_max") == ("x.load.M.f0", "x.load.M.f1")  # the store row_max[m] = -inf
    half = next(lp for lp in L.loops(s.program.body) if lp.name == "x.load.M.f1")
    assert [st.name for st in half.body.ops if isinstance(st, L.Loop)] == ["row_max.reduce.N", "sub.sub.N"]
    assert s.merge("x.load.M.f0", "x.load.M.f1") == "x.load.M.f0"  # merge is fission's inverse
    assert tc.digest(s.program) == tc.digest(merged)
    assert s.check().ok
    p = program("moved", ("N",), tensors() + [tensor("T", (1,))],
                loop(0, "l", "N", decl("T", (1,)), assign("A", (v(0),), ld("X", v(0))), assign("T", (0,), ld("A", v(0))),
                     assign("B", (v(0),), ld("T", 0))))
    t = transform(p, "fission", "l", "A")
    first, second = t.program.body.ops
    assert [type(st).__name__ for st in first.body.ops] == ["Assign"]
    assert [type(st).__name__ for st in second.body.ops] == ["Decl", "Assign", "Assign"]  # T goes where it is used
    assert check_transform_agrees(p, t.program, t.tau, BOUND).ok


def test_fission_preconditions_are_schedule_errors_with_hints():
    s = tc.schedule(EXAMPLES["gemm"].kernel, M=8, N=8, K=8)
    e = refused(s.fission, "k", after="a.load.M", match="buffer 'a' is declared in loop 'k' and used on both sides")
    assert "expand_dim('a', ['k'])" in e.hint and "lift_alloc('a', 'k')" in e.hint
    refused(s.fission, "k", after="acc.mma.p1", match="nothing but declarations follows 'acc.mma.p1'")
    refused(s.fission, "k", after="nope", match="after must be a statement name.*no statement directly in loop 'k'")
    refused(tc.schedule(forward, N=7).fission, "i", after="load", match="buffer 'load' is declared in loop 'i'")
    s.bind("nest.1", "grid0")
    refused(s.fission, "nest.1", after="acc.full.p1", match="bound to grid0")
    guarded = tc.schedule(backward, N=8)
    guarded.split("i", 2)  # 2 does not divide 7: one guard holds the whole body, and answers to its stores
    refused(guarded.fission, "i.i", after="A", match="nothing but declarations follows 'A'")
    assert [op for op, _ in s.history] == ["bind"]  # refused ops leave no trace


def test_fission_refuses_a_cut_two_statements_answer_to_and_a_barrier():
    @tc.kernel
    def twice(X: tc.Tensor[i32, "N"], A: tc.Tensor[i32, "N"]):
        for i in tc.serial(X.shape[0]):
            A.at(i.index()).store(X.at(i.index()).load())
            A.at(i.index()).store(A.at(i.index()).load() + 1)

    assert refused(tc.schedule(twice, N=4).fission, "i", after="A", match="2 statements directly in loop 'i' answer to 'A'").hint
    p = program("bar", ("N",), tensors(), loop(0, "l", "N", assign("A", (v(0),), ld("X", v(0))), barrier(),
                                              assign("B", (v(0),), ld("A", v(0))), kind="parallel"))
    assert refused(fission, p, "l", "A", match="the body of loop 'l' holds a barrier").hint


def test_the_lifted_scalar_descent_gemm_distributes_into_init_accumulation_and_store_nests():
    """The form expand_dim and lift_alloc give the scalar-descent GEMM (acc[i, j] declared outside the nest):
    four fissions make three perfect nests, and the accumulation nest then reorders with k outermost."""
    shape = ("N", "N")
    p = program("sgemm", ("N",), [tensor("A", shape, written=False), tensor("B", shape, written=False),
                                  tensor("C", shape)],
                decl("acc", shape),
                loop(0, "i", "N", loop(1, "j", "N",
                                       assign("acc", (v(0), v(1)), L.Lit(0, "i32")),
                                       loop(2, "k", "N", accum("acc", (v(0), v(1)), times(ld("A", v(0), v(2)),
                                                                                          ld("B", v(2), v(1))))),
                                       assign("C", (v(0), v(1)), ld("acc", v(0), v(1))), kind="parallel"),
                     kind="parallel"))
    steps = [("fission", "j", "acc"), ("fission", "j.f1", "k"), ("fission", "i", "j.f0"),
             ("fission", "i.f1", "j.f1.f0"), ("reorder", ["k", "i.f1.f0", "j.f1.f0"])]
    sizes = {"N": 3}
    for op, *args in steps:
        t = transform(p, op, *args, sizes=sizes)
        r = check_transform_agrees(p, t.program, t.tau, sizes, t.datamaps)
        assert r.ok, (op, args, r.explain())
        p = t.program
    assert [lp.name for lp in p.body.ops if isinstance(lp, L.Loop)] == ["i.f0", "k", "i.f1.f1"]
    for seed in range(2):
        out = run(p, sizes, seed)["C"]
        rng = np.random.default_rng(seed)
        a, b = (rng.integers(-4, 5, size=(3, 3)) for _ in range(2))
        np.testing.assert_array_equal(out, a @ b)


# ============================================================================ merge
def test_a_legal_merge_is_proved_and_computes_what_the_two_loops_computed():
    base, s = tc.schedule(two_passes, N=7), tc.schedule(two_passes, N=7)
    assert s.merge("i", "j") == "i"
    assert top_loops(s) == [("i", "(N - 1)", "serial")]
    assert s.check().ok
    same_results(s, base, 7)
    back = tc.schedule(two_passes, N=7, shift=-1)
    back.merge("i", "j")
    assert back.check().ok


def test_a_merge_whose_second_loop_reads_what_a_later_first_iteration_writes_is_disproved():
    s = tc.schedule(two_passes, N=7, shift=1)
    s.merge("i", "j")
    w = disproved_dependence(s)
    assert w.cell.startswith("A[")
    base = tc.schedule(two_passes, N=7, shift=1)
    assert not np.array_equal(s.run(**arrays(7))["B"], base.run(**arrays(7))["B"])


def test_merge_preconditions_are_schedule_errors_with_hints():
    s = tc.schedule(EXAMPLES["softmax"].kernel, M=8, N=8)
    assert refused(s.merge, "row_max.init.M", "x.load.M", match="'x.load.M' comes before 'row_max.init.M'").hint
    assert refused(s.merge, "x.load.M", "x.load.M", match="first and second are both").hint
    assert refused(s.merge, "x.load.M", "x.load.N", match="not a sibling").hint
    assert refused(s.merge, "row_max.init.M", "sub.sub.M", match="loop 'row_max.reduce.M' lies between").hint
    assert refused(s.merge, "x.load.M", "Y.store.M", match="lies between").hint
    g = tc.schedule(EXAMPLES["gemm"].kernel, M=8, N=8, K=8)
    assert refused(g.merge, "acc.full.p1", "k", match="kind parallel and 'k' has kind pipeline").hint
    assert refused(g.merge, "a.load.M", "b.load.K", match="extent 3 .* not shown equal to the extent 7").hint
    u = tc.schedule(EXAMPLES["softmax"].kernel, M=8, N=8)
    u.bind("row_max.init.M", "unrolled")
    assert refused(u.merge, "x.load.M", "row_max.init.M", match="binding None and 'row_max.init.M' has binding unrolled").hint
    h = tc.schedule(EXAMPLES["softmax"].kernel, M=8, N=8)
    h.bind("x.load.M", "block0")
    assert refused(h.merge, "x.load.M", "row_max.init.M", match="bound to block0").hint


def test_merge_refuses_a_declaration_of_the_first_loop_that_the_second_names():
    p = program("cap", ("N",), tensors() + [tensor("T", (1,))],
                loop(0, "l", "N", decl("T", (1,)), assign("T", (0,), ld("X", v(0))),
                     assign("A", (v(0),), ld("T", 0))),
                loop(2, "m", "N", assign("B", (v(2),), ld("T", 0))))
    assert refused(merge, p, "l", "m", match="loop 'l' declares T, which 'm' also names").hint
    s = tc.schedule(two_passes, N=7)
    s.split("i", 2, tail="partition")
    assert refused(s.merge, "i.tail", "j", match="the extent .* of 'i.tail' is not shown equal").hint


# ============================================================================ one bind per tile op
ROW_NESTS = ("x.load.M", "row_max.init.M", "row_max.reduce.M", "sub.sub.M", "e.exp.M", "reduce.init.M",
             "reduce.reduce.M", "y.div.M", "Y.store.M")


def row_binds(s) -> int:
    """The loops of extent bm directly in the row block's body: one bind each to map rows to threads."""
    nest = next(lp for lp in s.program.body.ops if isinstance(lp, L.Loop))
    return sum(isinstance(st, L.Loop) and st.kind == "parallel" for st in nest.body.ops)


def test_merging_the_row_nests_of_softmax_leaves_one_bind_where_there_were_nine():
    sizes = dict(M=8, N=8)
    base, s = tc.schedule(EXAMPLES["softmax"].kernel, **sizes), tc.schedule(EXAMPLES["softmax"].kernel, **sizes)
    assert row_binds(s) == len(ROW_NESTS) == 9
    for second in ROW_NESTS[1:]:
        s.merge(ROW_NESTS[0], second)
    assert row_binds(s) == 1
    s.bind("nest", "grid0")
    s.bind("x.load.M", "block0")  # the one bind: every row op runs on the row's thread
    assert s.check().ok
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 8)).astype(np.float32)
    np.testing.assert_allclose(s.run(X=x, Y=np.zeros_like(x))["Y"], base.run(X=x, Y=np.zeros_like(x))["Y"],
                               rtol=1e-6)


ATTENTION_MERGES = [
    ("m.full.M", "l.full.M"), ("a.load.M", "b.load.K"), ("a.load.K", "b.load.N"),
    *(("s.select.M", n) for n in ("reduce.init.M", "reduce.reduce.M", "m_new.max.M", "sub.sub.M", "exp.exp.M",
                                  "mul.mul.M", "sub1.sub.M", "exp1.exp.M", "reduce1.init.M", "reduce1.reduce.M",
                                  "l1.add.M", "l.copy.M", "m.copy.M")),
    *(("load.load.M", f"{n}.M") for n in ("sub2.sub", "exp2.exp", "div.div", "Y.store1")),
    *(("load.load.N", f"{n}.N") for n in ("sub2.sub", "exp2.exp", "div.div", "Y.store1")),
    ("sub1.sub.N", "exp1.exp.N"),
]


def nest_heads(s, region: str) -> list[str]:
    """The outermost loop of each tile op's nest (one bind each): the parallel loops directly in the region
    loop or in a loop that is not parallel."""
    kinds = {lp.name: lp.kind for lp in s.loops()}
    return [lp.name for lp in s.loops() if lp.kind == "parallel" and lp.parent is not None and
            (lp.parent == region or kinds[lp.parent] != "parallel")]


@pytest.mark.slow
def test_merging_the_attention_kernels_sibling_nests_leaves_10_binds_of_29():
    s = tc.schedule(EXAMPLES["all_regions"].kernel, M=8, N=8, K=8)
    assert len(nest_heads(s, "rows")) == 29
    for first, second in ATTENTION_MERGES:
        s.merge(first, second)
    inner = [(a, b) for a, b in ATTENTION_MERGES if a in ("a.load.K", "sub1.sub.N", "load.load.N")]
    assert len(nest_heads(s, "rows")) == 29 - (len(ATTENTION_MERGES) - len(inner)) == 10
    r = s.check()
    assert r.ok, r.explain()


# ============================================================================ lowering
@pytest.mark.parametrize("target", ["c", "cuda-host"])
def test_fission_and_merge_match_on_the_backends(target):
    f = tc.schedule(forward, N=9)
    f.fission("i", after="A")
    m = tc.schedule(two_passes, N=9)
    m.merge("i", "j")
    for s in (f, m):
        assert s.check().ok
        assert tc.differential(s, trials=2, target=target).matched


# ============================================================================ against brute force
@st.composite
def two_statements(draw):
    """Random affine statements: S1 writes A (reading A and X), S2 writes B (reading A and X), over loop
    l (variable 0), maybe inside an outer loop o (variable 1); returns the two statements and the vars."""
    vars_ = [0, 1] if draw(st.booleans()) else [0]
    reads = [ld("A", draw(affine(vars_, 0, 2))), ld("X", v(0))]
    s1 = (assign if draw(st.booleans()) else accum)("A", (draw(affine(vars_, 0, 2)),), plus(*reads))
    s2_value = plus(ld("A", draw(affine(vars_, 0, 2))), ld("X", v(0)))
    s2 = (assign if draw(st.booleans()) else accum)("B", (draw(affine(vars_, 0, 2)),), s2_value)
    return s1, s2, vars_


def tensors():
    return [tensor("A", (add(mul(3, "N"), 3),)), tensor("B", (add(mul(3, "N"), 3),)),
            tensor("X", ("N",), written=False)]


def wrapped(body, vars_, draw):
    return [loop(1, "o", "N", *body, kind=draw(st.sampled_from(KINDS)))] if 1 in vars_ else body


def agrees_and_preserves(p, op: str, *args) -> ir.Program:
    """The checker's verdicts on ``op`` applied to ``p`` equal brute force; when all hold, the interpreter
    computes the same outputs before and after, in both instance orders (a drawn program whose concurrent
    instances race has no outputs to keep: the interpreter refuses it)."""
    t = transform(p, op, *args)
    if check_transform_agrees(p, t.program, t.tau, BOUND, t.datamaps).ok:
        for seed in range(2):
            try:
                want = run(p, BOUND, seed)
            except NoninterferenceError:
                break
            for order in ("canonical", "reverse"):
                got = run(t.program, BOUND, seed, order)
                assert all(np.array_equal(want[k], got[k]) for k in want), (op, order)
    return t.program


@settings(max_examples=200 if FULL else 40, **SETTINGS)
@given(st.data())
def test_fission_verdicts_equal_brute_force(data):
    s1, s2, vars_ = data.draw(two_statements())
    body = wrapped([loop(0, "l", "N", s1, s2, kind=data.draw(st.sampled_from(KINDS)))], vars_, data.draw)
    p = program("fis", ("N",), tensors(), *body)
    assert agrees_and_preserves(p, "fission", "l", "A").body != p.body  # the loop is distributed


@settings(max_examples=200 if FULL else 40, **SETTINGS)
@given(st.data())
def test_merge_verdicts_equal_brute_force(data):
    s1, s2, vars_ = data.draw(two_statements())
    kind = data.draw(st.sampled_from(KINDS))
    second = subst_node(s2, 0, v(2))
    body = wrapped([loop(0, "l", "N", s1, kind=kind), loop(2, "m", "N", second, kind=kind)], vars_, data.draw)
    p = program("mer", ("N",), tensors(), *body)
    assert agrees_and_preserves(p, "merge", "l", "m").body != p.body  # the loops are fused
