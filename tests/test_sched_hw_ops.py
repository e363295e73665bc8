"""The hardware and index-set schedule ops of seed 000: bind, unroll (with the load CSE pass),
partition (with partition_breakpoints), pad, expand_zero.

For each op, on the example kernels (gemm, softmax, transpose) and on a ragged 1-D
elementwise kernel and a stencil defined here: the scheduled program computes exactly what
the kernel computes, the loop tree after the op has the expected names, extents, kinds and
bindings, the simplifier leaves the guards the op's formula predicts (census), tau and the
obligations are the ones the op's docstring states, every precondition failure is a
``ScheduleError`` with a hint, and saved schedules replay.
"""
import numpy as np
import pytest

import tilecert as tc
from tilecert.checker import check_transform
from examples import EXAMPLES
from tilecert import i32
from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.index import IConst, ISize, IVar, evaluate, free_vars
from tilecert import Schedule
from tilecert.semantics.sched.base import ScheduleError
from tilecert.semantics.sched.bind import bind
from tilecert.semantics.sched.cse import cse_loads
from tilecert.semantics.transform import Forward, Renamed
from tilecert.semantics.sched.expand_zero import expand_zero
from tilecert.semantics.sched.pad import pad
from tilecert.semantics.sched.simplify import census


@tc.kernel
def scale1d(X: tc.Tensor[i32, "N"], Y: tc.Tensor[i32, "N"]):
    N = X.shape[0]
    for i in tc.parallel(N):
        Y.at(i.index()).store(X.at(i.index()).load() * 3 + 1)


@tc.kernel
def broadcast(X: tc.Tensor[i32, "N"], Y: tc.Tensor[i32, "N"]):
    for nest in tc.parallel(tc.cdiv(X.shape[0], 4)):
        first = X.at(nest.index() * 4).load()  # a scalar t0, broadcast over the row
        Y.tile((nest.index() * 4,), (4,)).store(X.tile((nest.index() * 4,), (4,)).load() + first)


@tc.kernel
def stencil(X: tc.Tensor[i32, "N"], Y: tc.Tensor[i32, "N"], b: int = 4):
    N = X.shape[0]
    for nest in tc.parallel(tc.cdiv(N, b)):
        i0 = nest.index() * b
        left = X.tile((i0 - 1,), (b,), bounds="zero").load()
        mid = X.tile((i0,), (b,), bounds="zero").load()
        right = X.tile((i0 + 1,), (b,), bounds="zero").load()
        Y.tile((i0,), (b,)).store(left + 2 * mid + right)


def _ints(rng, *shape):
    return rng.integers(-50, 50, size=shape, dtype=np.int32)


def _one_d(rng, N):
    return {"X": _ints(rng, N), "Y": np.zeros(N, np.int32)}


KERNELS = {  # kernel, make_inputs(rng, **sizes)
    "scale1d": (scale1d, _one_d),
    "stencil": (stencil, _one_d),
    "broadcast": (broadcast, _one_d),
    "gemm": (EXAMPLES["gemm"].kernel, EXAMPLES["gemm"].make_inputs),
    "gemm_i32": (EXAMPLES["gemm_i32"].kernel, EXAMPLES["gemm_i32"].make_inputs),
    "softmax": (EXAMPLES["softmax"].kernel, EXAMPLES["softmax"].make_inputs),
    "transpose": (EXAMPLES["transpose"].kernel, EXAMPLES["transpose"].make_inputs),
}


def make(name, config=None, **sizes):
    """A schedule of kernel ``name`` with ``sizes`` bound, and a checker of its results."""
    kernel, make_inputs = KERNELS[name]
    inputs = make_inputs(np.random.default_rng(7), **sizes)
    config = {**(config or {}), **{k: v for k, v in inputs.items() if not isinstance(v, np.ndarray)}}
    arrays = {k: v for k, v in inputs.items() if isinstance(v, np.ndarray)}
    s = tc.schedule(kernel, **sizes, **config)
    want = tc.run(kernel, **{k: v.copy() for k, v in arrays.items()}, **config)

    def check(sched=None):
        """The schedule computes what the kernel computes: exactly on integers; on floats up to the
        reassociation the kernel's reduce policies admit."""
        got = (sched or s).run(**{k: v.copy() for k, v in arrays.items()})
        for out, ref in want.items():
            if ref.dtype.kind == "f":
                np.testing.assert_allclose(got[out], ref, rtol=1e-5, atol=1e-5, err_msg=f"{name} {out}")
            else:
                np.testing.assert_array_equal(got[out], ref, err_msg=f"{name} {out}")

    check()
    return s, check


def tree(s):
    """(depth, name, extent, kind, binding) of every loop; extents evaluated when they read no loop variable."""
    return [(lp.depth, lp.name, int(evaluate(lp.extent, s.sizes, {})) if not free_vars(lp.extent) else str(lp.extent),
             lp.kind, lp.binding) for lp in s.loops()]


def loop(s, name):
    return next(lp for lp in L.loops(s.program.body) if lp.name == name)


def raises(fn, *args, match, **kwargs):
    with pytest.raises(ScheduleError, match=match) as info:
        fn(*args, **kwargs)
    assert info.value.hint, "every ScheduleError carries a hint"
    return info.value


def kinds(s):
    """The obligation kinds of the last op."""
    return [ob.kind for ob in s.transforms[-1].obligations]


def guards_in(s, name):
    """The census of the statements inside loop ``name``."""
    p = s.program
    return census(ir.Program(p.name, p.sizes, p.tensors, ir.Block((), (loop(s, name),))))


def _program(body, *tensors):
    """A hand-built loop-form program over size N with i32 tensors of shape [N]."""
    decls = tuple(ir.TensorDecl(t, "i32", (ir.Dim(1, "N"),), (ISize("N"),), True) for t in tensors)
    return ir.Program("hand", ("N",), decls, ir.Block((), tuple(body)))


def _loop(var, name, body, extent=ISize("N"), kind="parallel", binding=None):
    return L.Loop(var, name, extent, kind, ir.Block((), tuple(body)), binding)


ZERO = L.Lit(0, "i32")


# ============================================================================ bind
def test_bind_gemm_to_grid_and_block_slots():
    s, check = make("gemm", M=7, N=6, K=15)
    s.bind("nest.0", "grid0")
    assert kinds(s) == ["noninterference", "containment", "hardware_limits"]
    s.bind("nest.1", "grid1")
    s.bind("acc.mma.p1", "block1")
    s.bind("acc.mma.p0", "block0")
    s.bind("C.store.M", "block1")
    s.bind("C.store.N", "block0")
    assert s.transforms[-1].tau.pieces == ()  # bind is the identity on coordinates
    assert [r for r in tree(s) if r[4]] == [
        (0, "nest.0", 3, "parallel", "grid0"), (1, "nest.1", 2, "parallel", "grid1"),
        (3, "acc.mma.p1", 3, "parallel", "block1"), (4, "acc.mma.p0", 5, "parallel", "block0"),
        (2, "C.store.M", 3, "parallel", "block1"), (3, "C.store.N", 5, "parallel", "block0")]
    containment = s.transforms[4].obligations[1]
    assert "nest.0=grid0, nest.1=grid1" in containment.formula
    check()


def test_bind_rendering_kinds_and_serial_removes_the_binding():
    s, check = make("transpose", M=10, N=7)
    for name, kind in [("nest.0", "core"), ("a.load.N", "vector"), ("B.store.M", "unrolled"), ("a.load.M", "warp"),
                       ("nest.1", "lane")]:
        s.bind(name, kind)
        assert loop(s, name).binding == kind
        if kind in ("core", "vector"):
            assert kinds(s) == ["noninterference", "containment"]  # no hardware limit to fit
    assert kinds(s) == ["noninterference", "containment", "hardware_limits"]
    check()
    s.bind("B.store.M", "unrolled")
    assert kinds(s) == []  # running each iteration once, in order, is always admitted
    s.bind("nest.0", "serial")
    assert kinds(s) == [] and loop(s, "nest.0").binding is None
    check()


def test_bind_ordered_loops_list_dependence_and_reduce_loops_list_noninterference():
    s, _ = make("gemm", M=7, N=6, K=15)
    s.bind("k", "block0")  # a pipeline loop: allowed structurally, its order becomes an obligation
    assert kinds(s)[:2] == ["noninterference", "dependence"]
    assert "pipeline" in s.transforms[-1].obligations[1].formula
    s, check = make("softmax", M=9, N=13)
    s.bind("reduce.reduce.N", "lane")  # the checker disproves this one: updates of one cell never commute in parallel
    ob = s.transforms[-1].obligations[0]
    assert ob.kind == "noninterference" and "a reduce loop" in ob.formula and ob.loops == ("reduce.reduce.N",)
    assert "dependence" not in kinds(s)
    with pytest.raises(tc.NoninterferenceError, match=r"reduce\.reduce\.N: instances \(0, 0, 0\) and \(0, 0, \d+\)"):
        check()  # the lanes' updates of one cell race in the scheduled program too


def test_bind_over_a_barrier_lists_barrier_uniformity_and_unbinding_lists_dependence():
    body = [L.Assign("Y", (IVar(0, 0),), ZERO), L.Barrier("block"), L.Assign("Y", (IVar(0, 0),), ZERO)]
    p = _program([_loop(0, "t", body)], "Y")
    bound = bind(p, "t", "block0")
    assert [ob.kind for ob in bound.obligations] == ["noninterference", "containment", "hardware_limits",
                                                    "barrier_uniform"]
    unbound = bind(bound.program, "t", "serial")
    assert [ob.kind for ob in unbound.obligations] == ["dependence"]
    assert "barriers" in unbound.obligations[0].formula


def test_bind_preconditions():
    s, _ = make("scale1d", N=13)
    raises(s.bind, "i", "grid", match="kind must be one of 'grid0', .*, got 'grid'")
    assert "slot" in raises(s.bind, "i", "block", match="got 'block'").hint
    assert "vector" in raises(s.bind, "i", "gpu", match="got 'gpu'").hint
    raises(s.bind, "nope", "grid0", match="no loop named 'nope'")
    s.partition("i", [8])
    raises(s.bind, "i.s1", "grid0", match="hardware-bound loop 'i.s1' must start at 0")
    raises(s.bind, "i.s1", "lane", match="must start at 0")
    s.bind("i.s1", "vector")  # rendering kinds do not index hardware: any start
    s.bind("i.s0", "grid0")
    assert [r[4] for r in tree(s)] == ["grid0", "vector"]


# ============================================================================ unroll
def test_unroll_marks_the_loop():
    s, check = make("stencil", N=13)
    before = tree(s)
    assert s.unroll("add.add.N") == ()
    assert tree(s) == [r[:4] + ("unrolled",) if r[1] == "add.add.N" else r for r in before]
    assert s.transforms[-1].tau.pieces == () and kinds(s) == []
    check()


def test_unroll_materialize_register_blocks_gemm_with_shared_loads():
    for name in ("gemm_i32", "gemm"):
        s, check = make(name, {"bm": 3, "bn": 2, "bk": 4}, M=7, N=6, K=15)
        s.unroll("acc.mma.K", materialize=True)
        assert [r[1] for r in tree(s) if r[1].startswith("acc.mma")] == ["acc.mma.p1", "acc.mma.p0"]
        assert kinds(s) == ["coverage", "dependence"]
        assert [dict(p.subst)[11] for p in s.transforms[-1].tau.pieces] == [IConst(k) for k in range(4)]
        assert s.unroll("acc.mma.p0", materialize=True) == ()
        body = loop(s, "acc.mma.p1").body.ops
        accums = [st for st in body if isinstance(st, L.Accum)]
        assert len(accums) == 8 and [st.index[1] for st in accums] == [IConst(0)] * 4 + [IConst(1)] * 4
        # each row element a[i, k] is loaded once into a scalar temporary and reused by both j copies
        temps = [st for st in body if isinstance(st, L.Decl)]
        assert [d.buf.shape for d in temps] == [()] * 4 and all(d.buf.name.startswith("a_cse") for d in temps)
        loads = [ld for st in body if isinstance(st, (L.Assign, L.Accum)) for ld in L.loads(st.value)]
        assert sorted(str(ld.index) for ld in loads if ld.buf == "a") == sorted(
            str((IVar(loop(s, "acc.mma.p1").var, 0), IConst(k))) for k in range(4))
        check()


def test_unroll_materialize_of_a_broadcast_scalar_declares_its_temporary_and_is_proved():
    # every copy reads t0[]: CSE shares it through t0_cse, which only its declaration (a Forward of
    # t0[]) tells apart from a copy of t0's declaration
    s, check = make("broadcast", N=8)
    s.unroll("add.add.N", materialize=True)
    assert s.transforms[-1].datamaps == (Forward("first_cse", L.Ld("first", (), "i32")),)
    r = s.check()
    assert r.ok and r.counts()["proved"] == len(list(r)), r.explain()
    check()


def test_buffers_an_op_mints_without_declaring_them_are_never_matched():
    s, _ = make("broadcast", N=8)
    s.unroll("add.add.N", materialize=True)
    t = s.transforms[-1]
    r = check_transform(s.programs[0], s.programs[1], t.tau, s.sizes, replay=False)  # no datamaps given
    for kind in ("coverage", "prefix_cut", "dependence"):
        (v,) = r.verdicts(kind)
        assert v.status == "unknown" and "(first_cse) without declaring what they hold" in v.reason, v


def test_unroll_materialize_copies_inner_loops_and_buffers_under_fresh_names():
    s, check = make("gemm_i32", M=7, N=6, K=15)  # bk = 7: the pipeline runs ceil(15 / 7) = 3 steps
    handles = s.unroll("k", materialize=True)
    assert handles == tuple(f"{n}.u{k}" for k in range(3) for n in
                            ("a.load.M", "a.load.K", "b.load.K", "b.load.N", "acc.mma.p1", "acc.mma.p0", "acc.mma.K"))
    assert "k" not in [r[1] for r in tree(s)]
    decls = [st.buf.name for st in ir.walk(s.program.body) if isinstance(st, L.Decl)]
    assert {"a_u0", "a_u1", "a_u2", "b_u2"} <= set(decls) and len(decls) == len(set(decls))
    renamed = {d.buffer: d.original for d in s.transforms[-1].datamaps if isinstance(d, Renamed)}
    assert renamed == {f"{b}_u{k}": b for b in ("a", "b") for k in range(3)}
    assert len(s.transforms[-1].tau.pieces) == 3
    check()
    s.split("a.load.K.u2", 2)  # the copies are separately schedulable
    check()


def test_unroll_materialize_lets_the_simplifier_decide_the_copies_guards():
    s, check = make("stencil", N=13)
    s.partition("nest", [1])
    before = guards_in(s, "nest.s0")["selects"]
    s.unroll("left.load.N.s0", materialize=True)
    body = loop(s, "nest.s0").body.ops
    copies = [st for st in body if isinstance(st, L.Assign) and st.buf == "left_s0"]
    assert [st.value for st in copies[:1]] == [ZERO]  # X[-1] is out of bounds: the select folds to its fallback
    assert all(isinstance(st.value, L.Ld) for st in copies[1:])
    assert guards_in(s, "nest.s0")["selects"] == before - 1
    check()


def test_cse_side_condition():
    a0 = L.Ld("A", (IConst(0),), "i32")
    a1 = L.Ld("A", (IConst(1),), "i32")

    def st(buf, value, k=0):
        return L.Assign(buf, (IConst(k),), value)

    def temps(result):
        out, forwards = result
        names = [s.buf.name for s in out if isinstance(s, L.Decl)]
        assert [f.buffer for f in forwards] == names  # every temporary is declared, with the load it forwards
        assert all(f.expression == next(s.value for s in out if isinstance(s, L.Assign) and s.buf == f.buffer)
                   for f in forwards)
        return names

    add = lambda x, y: L.Bin("add", x, y, "i32")  # noqa: E731
    result = cse_loads((st("Y", a0), st("Z", add(a0, a1)), st("Y", a0, 1)), {"A", "Y", "Z"})
    out = result[0]
    assert temps(result) == ["A_cse"] and out[1] == L.Assign("A_cse", (), a0)
    assert out[2].value == L.Ld("A_cse", (), "i32") and out[4].value == L.Ld("A_cse", (), "i32")
    # a write of A in between (at any index) ends the group; the writing statement's own load still belongs to it
    result = cse_loads((st("Y", a0), st("A", add(a0, a0), 5), st("Z", a0)), {"A", "Y", "Z"})
    out = result[0]
    assert temps(result) == ["A_cse"] and out[-1] == st("Z", a0)
    assert out[3].value == add(L.Ld("A_cse", (), "i32"), L.Ld("A_cse", (), "i32"))
    # a barrier in between ends the group too
    assert temps(cse_loads((st("Y", a0), L.Barrier("block"), st("Z", a0)), set())) == []
    # a first occurrence under a select's branch runs only where chosen: it cannot be hoisted
    guarded = L.Sel(L.Ix(IConst(1), "bool"), a0, ZERO, "i32")
    assert temps(cse_loads((st("Y", guarded), st("Z", a0)), set())) == []
    # ... but a later conditional occurrence reuses an unconditional first one
    out, _ = cse_loads((st("Y", a0), st("Z", guarded)), set())
    assert out[3].value == L.Sel(L.Ix(IConst(1), "bool"), L.Ld("A_cse", (), "i32"), ZERO, "i32")
    # loads inside nested statements are never counted
    inner = _loop(9, "l", [st("Y", a0)], IConst(2))
    assert temps(cse_loads((inner, inner), set())) == []


def test_unroll_preconditions():
    s, _ = make("gemm", M=7, N=6, K=15)
    raises(s.unroll, "k", materialize=1, match="materialize must be a bool")
    raises(s.unroll, "nope", match="no loop named")
    s.bind("acc.mma.p1", "block0")
    raises(s.unroll, "acc.mma.p1", materialize=True, match="bound to block0")
    symbolic = tc.schedule(EXAMPLES["gemm"].kernel, M=7, N=6)  # K is not bound: the pipeline's extent is symbolic
    err = raises(symbolic.unroll, "k", materialize=True, match="not a constant range")
    assert "split" in err.hint
    symbolic.split("k", 2)
    symbolic.unroll("k.i", materialize=True)


# ============================================================================ partition
def test_partition_segments_have_absolute_ranges():
    s, check = make("scale1d", N=13)
    assert s.partition("i", [5, 12]) == ("i.s0", "i.s1", "i.s2")
    assert tree(s) == [(0, "i.s0", 5, "parallel", None), (0, "i.s1", 7, "parallel", None),
                       (0, "i.s2", 1, "parallel", None)]
    assert [loop(s, n).start for n in ("i.s0", "i.s1", "i.s2")] == [IConst(0), IConst(5), IConst(12)]
    assert str(loop(s, "i.s2").extent) == "(N - 12)"
    assert kinds(s) == ["coverage", "dependence"]
    assert "0 < 5 < 12 < N" in s.transforms[-1].obligations[0].formula
    segs = [loop(s, n) for n in ("i.s0", "i.s1", "i.s2")]
    assert [p.subst[0][1] for p in s.transforms[-1].tau.pieces] == [IVar(lp.var, 0) for lp in segs]
    check()


def test_split_census_divides_ragged_and_partitioned():
    s, check = make("scale1d", N=12)
    s.split("i", 4)
    assert census(s.program)["ifs"] == 0  # 4 divides 12: the remainder guard folds
    check()
    s, check = make("scale1d", N=13)
    s.split("i", 4)
    assert census(s.program)["ifs"] == 1  # it does not divide 13: one guard stays
    assert s.partition_breakpoints("i.o") == [3]
    s, check = make("scale1d", N=13)
    s.partition("i", [12])  # the last full tile
    s.split("i.s0", 4)
    assert census(s.program)["ifs"] == 0  # main nest and epilogue, no guard
    assert tree(s) == [(0, "i.s0.o", 3, "parallel", None), (1, "i.s0.i", 4, "parallel", None),
                       (0, "i.s1", 1, "parallel", None)]
    check()


def test_partition_breakpoints_specialize_the_guards_away():
    s, check = make("stencil", N=13)
    bps = s.partition_breakpoints("nest")  # left halo guard flips at 1, right edge guards at 3
    assert bps == [1, 3]
    s.partition("nest", bps)
    assert guards_in(s, "nest.s1") == {"loops": 8, "ifs": 0, "selects": 0}  # the interior: guard free
    assert guards_in(s, "nest.s0")["selects"] == 1 and guards_in(s, "nest.s2")["ifs"] == 1
    assert s.partition_breakpoints("nest.s1") == []
    check()


def test_partition_gemm_at_the_last_full_block():
    s, check = make("gemm_i32", {"bm": 3}, M=7, N=6, K=15)
    bps = s.partition_breakpoints("nest.0")  # rows 0..5 are full blocks, row block 2 is ragged (M = 7)
    assert bps == [2]
    s.partition("nest.0", bps)

    def conds(name):
        return [str(st.cond) for st in ir.walk(loop(s, name).body)
                if isinstance(st, L.If) and not isinstance(st, L.StageBlock)]

    assert len(conds("nest.0.s0")) == 1 and "M" not in conds("nest.0.s0")[0]  # only the column guard is left
    assert "M" in conds("nest.0.s1")[0]
    assert [r[1] for r in tree(s) if r[0] == 0] == ["nest.0.s0", "nest.0.s1"]
    assert "nest.1.s0" in [r[1] for r in tree(s)] and "acc.mma.K.s1" in [r[1] for r in tree(s)]
    check()


def test_softmax_partition_pad_unroll():
    s, check = make("softmax", M=9, N=13)  # bc = 16 columns per row block, 13 of them valid
    assert s.partition_breakpoints("nest") == [2] and s.partition_breakpoints("Y.store.N") == [13]
    s.partition("Y.store.N", [13])
    assert loop(s, "Y.store.N.s1").body.ops == ()  # columns 13..15 store nothing: the guard folded to false
    (guard,) = [st for st in ir.walk(loop(s, "Y.store.N.s0").body) if isinstance(st, L.If)]
    assert "N" not in str(guard.cond)  # only the row guard is left
    check()
    s.pad("nest", 2)
    assert [r[2] for r in tree(s) if r[1] == "nest"] == [4]
    check()
    s.unroll("row_max.reduce.N", materialize=True)
    assert "row_max.reduce.N" not in [r[1] for r in tree(s)]
    check()


def test_partition_preconditions():
    s, _ = make("scale1d", N=13)
    for bad in ([], 3, ["4"], [True], [2.0]):
        raises(s.partition, "i", bad, match="non-empty list of ints")
    for bad in ([0], [13], [20], [5, 5], [7, 3], [-1, 4]):
        raises(s.partition, "i", bad, match="strictly increasing and strictly inside the range")
    raises(s.partition, "nope", [3], match="no loop named")
    s.bind("i", "grid0")
    raises(s.partition, "i", [3], match="bound to grid0")
    symbolic = tc.schedule(scale1d)
    symbolic.partition("i", [12])  # undecidable without N: accepted, the coverage obligation says 12 < N
    assert "0 < 12 < N" in symbolic.transforms[-1].obligations[0].formula
    raises(symbolic.partition_breakpoints, "i.s1", match="not a constant")


# ============================================================================ pad
def test_pad_extends_the_loop_and_guards_each_leaf():
    s, check = make("scale1d", N=13)
    s.pad("i", 4)
    assert tree(s) == [(0, "i", 16, "parallel", None)]
    body = loop(s, "i").body.ops
    leaves = [st for st in body if not isinstance(st, L.Decl)]
    assert len(leaves) == 6 and all(isinstance(st, L.If) and len(st.body.ops) == 1 for st in leaves)
    assert {str(st.cond) for st in leaves} == {f"(r{loop(s, 'i').var}.0 < N)"}
    assert census(s.program)["ifs"] == 6
    assert kinds(s) == ["coverage"]
    assert s.transforms[-1].tau.pieces[0].guard == leaves[0].cond
    check()
    s.split("i", 4)  # the padded extent divides: no remainder guard on top of the pad guards
    assert census(s.program)["ifs"] == 6
    assert s.partition_breakpoints("i.o") == [3]
    s.partition("i.o", [3])
    assert guards_in(s, "i.o.s0")["ifs"] == 0 and guards_in(s, "i.o.s1")["ifs"] == 6
    check()


def test_pad_is_the_identity_when_it_divides():
    s, check = make("scale1d", N=12)
    before = s.program
    s.pad("i", 4)
    assert s.program == before and s.transforms[-1].tau.pieces == () and kinds(s) == []
    s, _ = make("gemm", {"bk": 7}, M=7, N=6, K=15)
    before = s.program
    s.pad("acc.mma.K", 7)
    assert s.program == before


def test_pad_reduce_and_data_movement_loops():
    s, check = make("gemm_i32", {"bk": 4}, M=7, N=6, K=15)
    s.pad("acc.mma.K", 3)  # 4 -> 6: the two pad iterations add nothing
    assert [r for r in tree(s) if r[1] == "acc.mma.K"] == [(5, "acc.mma.K", 6, "reduce", None)]
    accum = next(st for st in ir.walk(loop(s, "acc.mma.K").body) if isinstance(st, L.If))
    assert isinstance(accum.body.ops[0], L.Accum)
    check()
    s, check = make("transpose", M=10, N=7)
    s.pad("nest.1", 2)
    s.pad("B.store.M", 8)
    assert [r[2] for r in tree(s) if r[1] in ("nest.1", "B.store.M")] == [4, 8]
    check()


def test_pad_never_guards_a_barrier():
    body = [L.Decl(L.Buffer("s", "i32", (IConst(8),), "shared")), L.Assign("Y", (IVar(0, 0),), ZERO),
            L.Barrier("block"), _loop(1, "in", [L.Accum("Y", (IVar(0, 0),), "add", ZERO)], IConst(2))]
    p = _program([_loop(0, "t", body, IConst(6), binding="block0")], "Y")
    out = pad(p, "t", 4).program.body.ops[0]
    assert out.extent == IConst(8)
    ops = out.body.ops
    assert isinstance(ops[0], L.Decl) and isinstance(ops[1], L.If) and isinstance(ops[2], L.Barrier)
    assert isinstance(ops[3], L.Loop) and isinstance(ops[3].body.ops[0], L.If)
    assert [ob.kind for ob in pad(p, "t", 4).obligations] == ["coverage", "hardware_limits"]


def test_pad_preconditions():
    s, _ = make("scale1d", N=13)
    for bad in (0, -4, "4", True, 2.5):
        raises(s.pad, "i", bad, match="to_multiple_of must be a positive int")
    raises(s.pad, "nope", 4, match="no loop named")
    s.partition("i", [4])
    raises(s.pad, "i.s1", 4, match="must start at 0")


# ============================================================================ expand_zero
def test_expand_zero_gemm_accumulator():
    s, check = make("gemm", M=7, N=6, K=15)
    assert s.expand_zero("acc") == ("acc.zero0", "acc.zero1")
    assert tree(s)[2:4] == [(2, "acc.zero0", 3, "parallel", None), (3, "acc.zero1", 5, "parallel", None)]
    assert "acc.full.p1" not in [r[1] for r in tree(s)]
    assert kinds(s) == ["coverage", "noninterference"]
    check()
    s.split("acc.zero1", 2)  # now schedulable like the computation that follows it
    s.bind("acc.zero0", "block1")
    s.bind("acc.zero1.i", "block0")
    check()


def test_expand_zero_restores_the_axis_order():
    s, check = make("gemm", M=7, N=6, K=15)
    s.swap("acc.full.p1", "acc.full.p0")
    assert [r[1:3] for r in tree(s)[2:4]] == [("acc.full.p0", 5), ("acc.full.p1", 3)]
    rows, cols = loop(s, "acc.full.p1").var, loop(s, "acc.full.p0").var  # acc[rows, cols] = 0, cols outermost
    s.expand_zero("acc")
    assert [r[1:3] for r in tree(s)[2:4]] == [("acc.zero0", 3), ("acc.zero1", 5)]
    (piece,) = s.transforms[-1].tau.pieces
    assert dict(piece.subst) == {rows: IVar(loop(s, "acc.zero0").var, 0), cols: IVar(loop(s, "acc.zero1").var, 0)}
    check()


def test_expand_zero_of_an_add_reduction_init():
    s, check = make("softmax", M=9, N=13)
    assert s.expand_zero("reduce") == "reduce.zero0"  # one handle comes back as a str
    raises(s.expand_zero, "row_max", match="no whole-buffer zeroing of 'row_max'")  # the max reduction starts at -inf
    check()


def test_expand_zero_preconditions():
    s, _ = make("transpose", M=10, N=7)
    raises(s.expand_zero, "a", match="no whole-buffer zeroing")
    raises(s.expand_zero, "nope", match="no buffer named 'nope'")
    s, _ = make("softmax", M=9, N=13)
    raises(s.expand_zero, "full", match="scalar")
    s, _ = make("gemm", M=7, N=6, K=15)
    s.partition("acc.full.p1", [1])  # two partial zeroings: neither covers the whole buffer
    raises(s.expand_zero, "acc", match="no whole-buffer zeroing")
    zero = lambda v: _loop(v, f"z{v}", [L.Assign("Y", (IVar(v, 0),), ZERO)])  # noqa: E731
    p = _program([zero(0), zero(1)], "Y")
    raises(expand_zero, p, "Y", match="2 statements zero the whole of 'Y'")
    assert expand_zero(_program([zero(0)], "Y"), "Y").handles == ("Y.zero0",)
    partial = _program([_loop(0, "z", [L.Assign("Y", (IVar(0, 0),), ZERO)], IConst(3))], "Y")
    raises(expand_zero, partial, "Y", match="no whole-buffer zeroing")
    twice = _program([L.Decl(L.Buffer("t", "i32", (IConst(2),))), L.Decl(L.Buffer("t", "i32", (IConst(3),)))], "Y")
    raises(expand_zero, twice, "t", match="declared with 2 different shapes")


# ============================================================================ replay
def test_save_and_load_replay_every_op(tmp_path):
    s, check = make("gemm_i32", {"bm": 3, "bn": 2, "bk": 4}, M=7, N=6, K=15)
    s.expand_zero("acc")
    s.pad("nest.1", 2)
    s.partition("nest.0", s.partition_breakpoints("nest.0"))
    s.unroll("acc.mma.K.s0", materialize=True)
    s.unroll("acc.mma.p0.s0")
    s.bind("nest.0.s0", "grid0")
    s.bind("nest.1.s0", "grid1")
    check()
    path = tmp_path / "schedule.json"
    s.save(path)
    t = Schedule.load(path, s.kernel)
    assert t.program == s.program and [op for op, _ in t.history] == [op for op, _ in s.history]
    assert dict(t.history[2][1]) == {"loop": "nest.0", "breakpoints": [2]}
    check(t)
