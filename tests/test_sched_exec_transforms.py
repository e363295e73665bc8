"""The execution-transform schedule ops of seed 004: fuse, reorder / swap, tile, insert_unit /
remove_unit, coalesce / reshape.

For each op, on the example kernels (gemm, softmax, transpose) and on small 1-D elementwise
and stencil kernels defined here: the scheduled program computes what the kernel computes
(exactly for integer kernels and data movement), the loop tree after the op has the expected
names, extents and kinds, tau maps the new iteration domain onto the old one bijectively and
in order where the op says so, every precondition failure is a ``ScheduleError`` with a
message saying what is wrong and a hint, and saved schedules replay.
"""
import dataclasses
import itertools
import sys

import numpy as np
import pytest

import tilecert as tc
from examples import EXAMPLES
from tilecert import i32
from tilecert.semantics import loopir as L
from tilecert.semantics.index import IBin, IConst, IVar, evaluate, free_vars
from tilecert.semantics.sched import OPS
from tilecert.semantics.sched.base import ScheduleError, replace_loop, the_loop, with_body
from tilecert.semantics.sched.coalesce import coalesce
from tilecert.semantics.sched.fuse import fuse
from tilecert.semantics.sched.reorder import reorder, swap
from tilecert.semantics.sched.unit import remove_unit


@tc.kernel
def scale_add(X: tc.Tensor[i32, "N"], Y: tc.Tensor[i32, "N"], Z: tc.Tensor[i32, "N"], bn: int = 4):
    N = X.shape[0]
    for nest in tc.parallel(tc.cdiv(N, bn)):
        n0 = nest.index() * bn
        x = X.tile((n0,), (bn,)).load()
        y = Y.tile((n0,), (bn,)).load()
        Z.tile((n0,), (bn,)).store(x * x + y)


@tc.kernel
def stencil3(X: tc.Tensor[i32, "N"], Y: tc.Tensor[i32, "N"], bn: int = 4):
    N = X.shape[0]
    for nest in tc.parallel(tc.cdiv(N, bn)):
        n0 = nest.index() * bn
        left = X.tile((n0 - 1,), (bn,), bounds="zero").load()
        mid = X.tile((n0,), (bn,)).load()
        right = X.tile((n0 + 1,), (bn,), bounds="zero").load()
        Y.tile((n0,), (bn,)).store(left + 2 * mid + right)


def _ints(rng, n):
    return rng.integers(-100, 100, size=n, dtype=np.int32)


def _scale_add_inputs(rng, N):
    return {"X": _ints(rng, N), "Y": _ints(rng, N), "Z": np.zeros(N, np.int32)}


def _stencil_inputs(rng, N):
    return {"X": _ints(rng, N), "Y": np.zeros(N, np.int32)}


# kernel, make_inputs(rng, **sizes), exact comparison
KERNELS = {
    "gemm_i32": (EXAMPLES["gemm_i32"].kernel, EXAMPLES["gemm_i32"].make_inputs, True),
    "gemm": (EXAMPLES["gemm"].kernel, EXAMPLES["gemm"].make_inputs, False),
    "softmax": (EXAMPLES["softmax"].kernel, EXAMPLES["softmax"].make_inputs, False),
    "transpose": (EXAMPLES["transpose"].kernel, EXAMPLES["transpose"].make_inputs, True),  # data movement only
    "scale_add": (scale_add, _scale_add_inputs, True),
    "stencil3": (stencil3, _stencil_inputs, True),
}


def make(name, sizes, config=None, seed=0):
    """A schedule of kernel ``name`` with ``sizes`` bound, and inputs of those sizes."""
    kernel, make_inputs, _ = KERNELS[name]
    inputs = make_inputs(np.random.default_rng(seed), **sizes)
    config = dict(config or {})
    config.update({k: v for k, v in inputs.items() if not isinstance(v, np.ndarray)})
    return tc.schedule(kernel, **sizes, **config), inputs, config


def assert_same_results(name, s, inputs, config, orders=("canonical",)):
    kernel, _, exact = KERNELS[name]
    ref = tc.run(kernel, **inputs, **{k: v for k, v in config.items() if k not in inputs})
    arrays = {k: v for k, v in inputs.items() if isinstance(v, np.ndarray)}
    for order in orders:
        got = s.run(order=order, **{k: v.copy() for k, v in arrays.items()})
        for out, want in ref.items():
            if exact:
                np.testing.assert_array_equal(got[out], want, err_msg=f"{name} {out} ({order})")
            else:
                np.testing.assert_allclose(got[out], want, rtol=1e-5, atol=1e-6, err_msg=f"{name} {out} ({order})")


def tree(s):
    """(depth, name, extent value, kind) of every loop whose extent reads no loop variable."""
    return [(lp.depth, lp.name, int(evaluate(lp.extent, s.sizes, {})), lp.kind)
            for lp in s.loops() if not free_vars(lp.extent)]


def subtree(s, top):
    """``tree(s)`` restricted to loop ``top`` and the loops inside it, depths relative to ``top``."""
    rows = tree(s)
    k = next(i for i, r in enumerate(rows) if r[1] == top)
    out = [rows[k]]
    for r in rows[k + 1:]:
        if r[0] <= rows[k][0]:
            break
        out.append(r)
    return [(d - rows[k][0], n, e, kind) for d, n, e, kind in out]


def cdiv(a, b):
    return -(-a // b)


def tau_image(t, new_loops, sizes):
    """The old coordinates (by variable, in the new loops' lexicographic order) tau gives each
    active point of the new box ``new_loops`` (LoopInfo rows with constant extents)."""
    extents = [int(evaluate(lp.extent, sizes, {})) for lp in new_loops]
    points = []
    for point in itertools.product(*(range(n) for n in extents)):
        coords = {(lp.var, 0): v for lp, v in zip(new_loops, point)}
        for piece in t.pieces:
            if evaluate(piece.guard, sizes, coords):
                points.append(tuple(int(evaluate(e, sizes, coords)) for _, e in piece.subst))
    return points


def loop_info(s, name):
    return next(lp for lp in s.loops() if lp.name == name)


def raises(fn, *args, match, **kwargs):
    with pytest.raises(ScheduleError, match=match) as info:
        fn(*args, **kwargs)
    assert info.value.hint, "every ScheduleError carries a hint"
    return info.value


def program_with(s, name, **changes):
    """``s``'s program with loop ``name``'s fields replaced."""
    lp = the_loop(s.program, name, "test")
    return with_body(s.program, replace_loop(s.program.body, lp, [dataclasses.replace(lp, **changes)]))


def test_ops_are_registered():
    for op in ("fuse", "reorder", "swap", "tile", "insert_unit", "remove_unit", "coalesce", "reshape"):
        assert OPS[op].doc and "Legality" in sys.modules[OPS[op].fn.__module__].__doc__


# ============================================================================= fuse
@pytest.mark.parametrize("name,sizes,outer,inner,kind", [
    ("gemm_i32", dict(M=10, N=11, K=13), "nest.0", "nest.1", "parallel"),
    ("gemm_i32", dict(M=10, N=11, K=13), "a.load.M", "a.load.K", "parallel"),
    ("gemm", dict(M=7, N=6, K=5), "C.store.M", "C.store.N", "parallel"),
    ("softmax", dict(M=9, N=13), "sub.sub.M", "sub.sub.N", "parallel"),
    ("transpose", dict(M=10, N=7), "nest.0", "nest.1", "parallel"),
    ("transpose", dict(M=10, N=7), "B.store.N", "B.store.M", "parallel"),
])
def test_fuse_preserves_results_and_shapes_the_tree(name, sizes, outer, inner, kind):
    s, inputs, config = make(name, sizes)
    n_o, n_i = (int(evaluate(loop_info(s, n).extent, s.sizes, {})) for n in (outer, inner))
    before = subtree(s, outer)
    handle = s.fuse(outer, inner)
    assert handle == f"{outer}*{inner}"
    after = subtree(s, handle)
    assert after[0] == (0, handle, n_o * n_i, kind)
    # the inner loop's body moved up one level, unchanged
    assert after[1:] == [(d - 1, n, e, k) for d, n, e, k in before[2:]]
    assert outer not in [lp.name for lp in s.loops()] and inner not in [lp.name for lp in s.loops()]
    assert_same_results(name, s, inputs, config, orders=("canonical", "reverse"))


def test_fuse_tau_is_the_mixed_radix_bijection_in_order():
    s, _, _ = make("transpose", dict(M=10, N=7))
    old = [loop_info(s, n) for n in ("nest.0", "nest.1")]
    f = s.fuse("nest.0", "nest.1", name="blocks")
    t = s.transforms[-1]
    assert [v for v, _ in t.tau.pieces[0].subst] == [lp.var for lp in old]
    image = tau_image(t.tau, [loop_info(s, f)], s.sizes)
    assert image == sorted(itertools.product(range(cdiv(10, 4)), range(cdiv(7, 3))))  # onto, once each, in order
    kinds = {ob.kind for ob in t.obligations}
    assert kinds == {"coverage", "dependence", "prefix_cut"}


def test_fuse_sinks_a_guard_between_the_loops():
    s, inputs, config = make("gemm_i32", dict(M=10, N=11, K=13))
    s.split("acc.mma.p0", 2)  # acc.mma.p0.o { acc.mma.p0.i { if guard { acc.mma.K { ... } } } }
    s.fuse("acc.mma.p1", "acc.mma.p0.o")
    s.fuse("acc.mma.p1*acc.mma.p0.o", "acc.mma.p0.i")
    (fused,) = [lp for lp in s.loops() if lp.name == "acc.mma.p1*acc.mma.p0.o*acc.mma.p0.i"]
    assert int(evaluate(fused.extent, s.sizes, {})) == 3 * 3 * 2
    assert_same_results("gemm_i32", s, inputs, config)


def test_fuse_preconditions():
    s, _, _ = make("gemm_i32", dict(M=10, N=11, K=13))
    raises(s.fuse, "nest.1", "acc.full.p1", match=r"loop 'acc.full.p1' is not perfectly nested in 'nest.1': the body also "
                                                r"contains the declaration of acc, loop 'k'")
    raises(s.fuse, "acc.mma.p0", "acc.mma.K", match=r"'acc.mma.p0' is parallel but 'acc.mma.K' is reduce")
    raises(s.fuse, "nest.1", "nest.0", match=r"nest as nest.0 > nest.1")
    raises(s.fuse, "a.load.M", "b.load.K", match=r"'a.load.M' and 'b.load.K' are not nested in one another")
    raises(s.fuse, "nest.0", "nest.0", match=r"more than once")
    raises(s.fuse, "nest.0", "nope", match=r"no loop named 'nope'")
    raises(s.fuse, "nest.0", "nest.1", name="k", match=r"a loop named 'k' exists already")
    raises(s.fuse, "nest.0", "nest.1", name=3, match=r"non-empty str")
    p = program_with(s, "nest.1", start=IConst(1))
    raises(fuse, p, "nest.0", "nest.1", match=r"'nest.1' must start at 0 \(it starts at 1\)")
    p = program_with(s, "nest.0", binding="grid1")
    raises(fuse, p, "nest.0", "nest.1", match=r"'nest.0' is bound to grid1")
    outer = the_loop(s.program, "nest.0", "test")
    p = program_with(s, "nest.1", extent=IBin("add", IVar(outer.var, 0), IConst(1)))
    raises(fuse, p, "nest.0", "nest.1", match=r"reads loop 'nest.0', so the band is not a rectangle")
    assert [h[0] for h in s.history] == []  # a failed op leaves no trace


# ============================================================================= reorder / swap
@pytest.mark.parametrize("name,sizes,band,order", [
    ("gemm_i32", dict(M=10, N=11, K=13), ["acc.mma.p1", "acc.mma.p0", "acc.mma.K"], ["acc.mma.K", "acc.mma.p0", "acc.mma.p1"]),
    ("gemm_i32", dict(M=7, N=4, K=9), ["nest.0", "nest.1"], ["nest.1", "nest.0"]),
    ("gemm", dict(M=7, N=6, K=5), ["acc.mma.p1", "acc.mma.p0", "acc.mma.K"], ["acc.mma.p0", "acc.mma.K", "acc.mma.p1"]),
    ("softmax", dict(M=9, N=13), ["row_max.reduce.M", "row_max.reduce.N"], ["row_max.reduce.N", "row_max.reduce.M"]),
    ("softmax", dict(M=9, N=13), ["reduce.reduce.M", "reduce.reduce.N"], ["reduce.reduce.N", "reduce.reduce.M"]),
    ("transpose", dict(M=10, N=7), ["B.store.N", "B.store.M"], ["B.store.M", "B.store.N"]),
])
def test_reorder_preserves_results_and_permutes_the_band(name, sizes, band, order):
    s, inputs, config = make(name, sizes)
    rows = {r[1]: r for r in subtree(s, band[0])}
    depth0 = loop_info(s, band[0]).depth
    assert s.reorder(order) == ()
    after = subtree(s, order[0])
    assert [(n, e, k) for _, n, e, k in after[:len(order)]] == [rows[n][1:] for n in order]
    assert [d for d, *_ in after[:len(order)]] == list(range(len(order)))
    assert loop_info(s, order[0]).depth == depth0
    t = s.transforms[-1]
    assert not t.tau.pieces  # a permutation keeps every coordinate
    assert {ob.kind for ob in t.obligations} == {"dependence", "prefix_cut"}
    assert_same_results(name, s, inputs, config, orders=("canonical", "reverse"))


def test_swap_is_the_two_loop_reorder():
    s, inputs, config = make("transpose", dict(M=9, N=8))
    r, _, _ = make("transpose", dict(M=9, N=8))
    s.swap("a.load.M", "a.load.N")
    r.reorder(["a.load.N", "a.load.M"])
    assert tc.digest(s.program) == tc.digest(r.program)
    assert [lp.name for lp in s.loops()][2:4] == ["a.load.N", "a.load.M"]
    assert_same_results("transpose", s, inputs, config)


def test_reorder_sinks_guards_onto_the_innermost_body():
    s, inputs, config = make("gemm_i32", dict(M=10, N=11, K=13))
    s.split("acc.mma.p1", 2)  # acc.mma.p1.o { acc.mma.p1.i { if g { acc.mma.p0 { acc.mma.K } } } }
    s.reorder(["acc.mma.p0", "acc.mma.K", "acc.mma.p1.o", "acc.mma.p1.i"])
    inner = the_loop(s.program, "acc.mma.p1.i", "test")
    (guard,) = inner.body.ops
    assert isinstance(guard, L.If) and isinstance(guard.body.ops[0], L.Accum)
    assert_same_results("gemm_i32", s, inputs, config)


def test_reorder_states_the_permutation_in_its_dependence_obligation():
    # reorder checks structure only; whether the permutation keeps every dependence is the checker's
    s, _, _ = make("gemm_i32", dict(M=4, N=4, K=4))
    s.reorder(["acc.mma.K", "acc.mma.p1", "acc.mma.p0"])
    (dep,) = [ob for ob in s.transforms[-1].obligations if ob.kind == "dependence"]
    assert "(acc.mma.p1, acc.mma.p0, acc.mma.K) -> (acc.mma.K, acc.mma.p1, acc.mma.p0)" in dep.formula


def test_reorder_preconditions():
    s, _, _ = make("gemm_i32", dict(M=10, N=11, K=13))
    raises(s.reorder, ["nest.1", "acc.full.p1"], match=r"loop 'acc.full.p1' is not perfectly nested in 'nest.1': the body "
                                                    r"also contains the declaration of acc, loop 'k', loop 'C.store.M'")
    raises(s.reorder, ["acc.mma.p1", "acc.mma.K"], match=r"loop 'acc.mma.K' is not directly nested in 'acc.mma.p1': loop "
                                                  r"'acc.mma.p0' lies between them")
    raises(s.reorder, ["nest.0"], match=r"loops must be a list of 2 or more distinct loop names, got \['nest.0'\]")
    raises(s.reorder, "nest.0", match=r"must be a list of 2 or more distinct loop names")
    raises(s.reorder, ["nest.0", "nest.0"], match=r"more than once")
    raises(s.reorder, ["a.load.M", "b.load.N"], match=r"not nested in one another")
    raises(s.swap, "nest.1", "nest.0", match=r"'nest.1' is inside 'nest.0', not around it")
    raises(s.swap, "acc.mma.p1", "acc.mma.K", match=r"not directly nested")
    outer = the_loop(s.program, "a.load.M", "test")
    p = program_with(s, "a.load.K", extent=IBin("add", IVar(outer.var, 0), IConst(1)))
    raises(swap, p, "a.load.M", "a.load.K",
           match=r"the extent \(r\d+.0 \+ 1\) of loop 'a.load.K' reads loop 'a.load.M', so 'a.load.K' cannot move outside "
                 r"'a.load.M' \(the extent would be out of scope\)")
    # a loop reading another may stay inside it while the rest of the band moves
    mma = the_loop(s.program, "acc.mma.p1", "test")
    p = program_with(s, "acc.mma.K", extent=IBin("add", IVar(mma.var, 0), IConst(1)))
    t = reorder(p, ["acc.mma.p0", "acc.mma.p1", "acc.mma.K"])
    assert [lp.name for lp in L.loops(t.program.body) if lp.name.startswith("acc.mma")] == ["acc.mma.p0", "acc.mma.p1", "acc.mma.K"]


def test_reorder_of_bound_loops_adds_a_containment_obligation():
    s, _, _ = make("transpose", dict(M=10, N=7))
    p = program_with(s, "nest.0", binding="grid1")
    t = reorder(p, ["nest.1", "nest.0"])
    (ob,) = [ob for ob in t.obligations if ob.kind == "containment"]
    assert ob.loops == ("nest.0",)
    assert the_loop(t.program, "nest.0", "test").binding == "grid1"  # bindings travel with their loops


# ============================================================================= tile
@pytest.mark.parametrize("name,sizes,band,factors", [
    ("gemm_i32", dict(M=10, N=11, K=13), ["acc.mma.p1", "acc.mma.p0"], [2, 2]),
    ("gemm_i32", dict(M=10, N=11, K=13), ["acc.mma.p1", "acc.mma.p0", "acc.mma.K"], [2, 3, 4]),
    ("gemm_i32", dict(M=24, N=20, K=9), ["nest.0", "nest.1"], [2, 4]),
    ("gemm", dict(M=7, N=6, K=5), ["b.load.K", "b.load.N"], [3, 2]),
    ("softmax", dict(M=9, N=13), ["e.exp.M", "e.exp.N"], [2, 8]),
    ("transpose", dict(M=10, N=7), ["a.load.M", "a.load.N"], [3, 2]),
    ("transpose", dict(M=10, N=7), ["B.store.M", "B.store.N"], [2, 2]),  # given in another order than they nest
])
def test_tile_preserves_results_and_orders_outers_before_inners(name, sizes, band, factors):
    s, inputs, config = make(name, sizes)
    extents = [int(evaluate(loop_info(s, n).extent, s.sizes, {})) for n in band]
    kinds = [loop_info(s, n).kind for n in band]
    top = min(loop_info(s, n).depth for n in band)
    handles = s.tile(band, factors)
    outers, inners = [f"{n}.o" for n in band], [f"{n}.i" for n in band]
    assert handles == tuple(outers + inners)
    want = ([(top + k, o, cdiv(e, f), kind) for k, (o, e, f, kind) in enumerate(zip(outers, extents, factors, kinds))]
            + [(top + len(band) + k, i, f, kind) for k, (i, f, kind) in enumerate(zip(inners, factors, kinds))])
    assert subtree(s, outers[0])[:2 * len(band)] == [(d - top, n, e, k) for d, n, e, k in want]
    assert_same_results(name, s, inputs, config)


def test_tile_tau_covers_the_old_box_once():
    s, _, _ = make("transpose", dict(M=10, N=7))
    old = [loop_info(s, n) for n in ("a.load.M", "a.load.N")]
    handles = s.tile(["a.load.M", "a.load.N"], [3, 2])
    t = s.transforms[-1]
    assert {v for v, _ in t.tau.pieces[0].subst} == {lp.var for lp in old}
    order = [v for v, _ in t.tau.pieces[0].subst]
    image = tau_image(t.tau, [loop_info(s, h) for h in handles], s.sizes)
    box = [dict(zip([lp.var for lp in old], pt)) for pt in itertools.product(range(4), range(3))]
    assert sorted(image) == sorted(tuple(pt[v] for v in order) for pt in box)  # every old point exactly once
    assert [ob.kind for ob in t.obligations].count("coverage") == 2


def test_tile_composes_with_replay(tmp_path):
    s, inputs, config = make("gemm_i32", dict(M=10, N=11, K=13))
    s.tile(["acc.mma.p1", "acc.mma.p0"], [2, 4])
    path = tmp_path / "tiled.json"
    s.save(path)
    r = tc.Schedule.load(path, KERNELS["gemm_i32"][0])
    assert r.loop_tree() == s.loop_tree() and tc.digest(r.program) == tc.digest(s.program)
    assert_same_results("gemm_i32", r, inputs, config)


def test_tile_preconditions():
    s, _, _ = make("gemm_i32", dict(M=10, N=11, K=13))
    raises(s.tile, ["acc.mma.p1", "acc.mma.p0"], [2], match=r"sizes must be a non-empty list of positive ints, one per item of loops, got \[2\]: 2 item\(s\) in loops, 1 here")
    raises(s.tile, ["acc.mma.p1", "acc.mma.p0"], [2, 0], match=r"sizes must be .*, got \[2, 0\]: item 1 \(0\) is not a positive int")
    raises(s.tile, ["acc.mma.p1", "acc.mma.K"], [2, 2], match=r"not directly nested in 'acc.mma.p1'")
    raises(s.tile, ["nest.1", "acc.full.p1"], [2, 2], match=r"not perfectly nested in 'nest.1'")
    assert s.history == []


# ============================================================================= insert_unit / remove_unit
@pytest.mark.parametrize("name,sizes,loop", [
    ("gemm_i32", dict(M=10, N=11, K=13), "k"),
    ("softmax", dict(M=9, N=13), "row_max.reduce.N"),
    ("transpose", dict(M=10, N=7), "nest.1"),
    ("scale_add", dict(N=22), "nest"),
    ("stencil3", dict(N=13), "left.load.N"),
])
def test_insert_unit_wraps_the_loop_and_remove_unit_undoes_it(name, sizes, loop):
    s, inputs, config = make(name, sizes)
    before = tc.digest(s.program)
    info = loop_info(s, loop)
    u = s.insert_unit(loop)
    assert u == f"{loop}.unit"
    rows = subtree(s, u)
    assert rows[0] == (0, u, 1, info.kind) and rows[1][:2] == (1, loop)
    assert loop_info(s, u).depth == info.depth and loop_info(s, u).parent == info.parent
    assert_same_results(name, s, inputs, config)
    assert s.remove_unit(u) == ()
    assert tc.digest(s.program) == before


def test_insert_unit_kind_and_name():
    s, inputs, config = make("stencil3", dict(N=13))
    u = s.insert_unit("nest", name="outer", kind="serial")
    assert (u, loop_info(s, u).kind) == ("outer", "serial")
    raises(s.insert_unit, "nest", kind="vector", match=r"kind must be one of 'parallel', 'serial', 'reduce', 'pipeline', got 'vector'")
    raises(s.insert_unit, "nest", name="outer", match=r"a loop named 'outer' exists already")
    assert_same_results("stencil3", s, inputs, config)


@pytest.mark.parametrize("name,sizes,config,loop", [
    ("scale_add", dict(N=3), {}, "nest"),               # extent (N + 3) // 4 is 1 for N = 3
    ("gemm_i32", dict(M=3, N=11, K=13), {}, "nest.0"),  # (M + 2) // 3
    ("gemm_i32", dict(M=10, N=11, K=5), {}, "k"),       # (K + 6) // 7
    ("stencil3", dict(N=9), {"bn": 1}, "mid.load.N"),      # a constant extent 1
])
def test_remove_unit_drops_a_loop_the_sizes_make_unit(name, sizes, config, loop):
    s, inputs, config = make(name, sizes, config)
    depth = loop_info(s, loop).depth
    inner = [lp.name for lp in s.loops() if lp.parent == loop]
    s.remove_unit(loop)
    assert loop not in [lp.name for lp in s.loops()]
    assert all(loop_info(s, n).depth == depth for n in inner)
    t = s.transforms[-1]
    ((var, value),) = t.tau.pieces[0].subst
    assert value == IConst(0) and {ob.kind for ob in t.obligations} == {"coverage", "prefix_cut"}
    assert_same_results(name, s, inputs, config)


def test_remove_unit_substitutes_a_nonzero_start():
    s, inputs, _ = make("scale_add", dict(N=22))
    p = program_with(s, "nest", start=IConst(2), extent=IConst(1))  # only block 2
    t = remove_unit(p, "nest")
    nest = the_loop(p, "nest", "test")
    assert not any((nest.var, 0) in free_vars(e) for st in tc.ir.walk(t.program.body)
                   for e in getattr(st, "index", ()))
    arrays = {k: v.copy() for k, v in inputs.items()}
    want = tc.run(p, **arrays)["Z"]
    got = tc.run(t.program, **{k: v.copy() for k, v in inputs.items()})["Z"]
    np.testing.assert_array_equal(got, want)
    assert np.count_nonzero(want) and not want[:8].any() and not want[12:].any()


def test_remove_unit_preconditions():
    s, _, _ = make("gemm_i32", dict(M=10, N=11, K=13))
    raises(s.remove_unit, "nest.0", match=r"the extent \(\(M \+ 2\) // 3\) of 'nest.0' is not provably 1")
    raises(s.remove_unit, "a.load.M", match=r"the extent 3 of 'a.load.M' is not provably 1")
    symbolic = tc.schedule(KERNELS["scale_add"][0])  # N unbound: (N + 3) // 4 is 1 only for some N
    raises(symbolic.remove_unit, "nest", match=r"not provably 1")
    t, _, _ = make("scale_add", dict(N=3))
    p = program_with(t, "nest", binding="grid0")
    raises(remove_unit, p, "nest", bound_sizes=t.sizes, match=r"'nest' is bound to grid0")
    raises(t.remove_unit, "nest", bound_sizes={"N": 3}, match=r"bound_sizes come from the schedule")


# ============================================================================= coalesce / reshape
@pytest.mark.parametrize("name,sizes,band", [
    ("gemm_i32", dict(M=10, N=11, K=13), ["acc.mma.p1", "acc.mma.p0", "acc.mma.K"][:2]),
    ("gemm_i32", dict(M=10, N=11, K=13), ["b.load.K", "b.load.N"]),
    ("softmax", dict(M=9, N=13), ["y.div.M", "y.div.N"]),
    ("transpose", dict(M=10, N=7), ["nest.0", "nest.1"]),
])
def test_coalesce_preserves_results(name, sizes, band):
    s, inputs, config = make(name, sizes)
    total = int(np.prod([int(evaluate(loop_info(s, n).extent, s.sizes, {})) for n in band]))
    f = s.coalesce(band)
    assert f == "*".join(band) and subtree(s, f)[0][1:] == (f, total, loop_info(s, f).kind)
    assert_same_results(name, s, inputs, config)


def test_coalesce_three_loops_is_one_mixed_radix_level():
    s, inputs, config = make("gemm_i32", dict(M=4, N=6, K=13), {"bm": 2, "bn": 3})
    s.reshape("nest.1", [2, 1], names=["n.a", "n.b"])
    old = [loop_info(s, n) for n in ("nest.0", "n.a", "n.b")]
    f = s.coalesce(["nest.0", "n.a", "n.b"], name="blocks")
    image = tau_image(s.transforms[-1].tau, [loop_info(s, f)], s.sizes)
    assert image == list(itertools.product(range(2), range(2), range(1)))
    assert [v for v, _ in s.transforms[-1].tau.pieces[0].subst] == [lp.var for lp in old]
    assert_same_results("gemm_i32", s, inputs, config)


@pytest.mark.parametrize("name,sizes,config,loop,extents", [
    ("scale_add", dict(N=22), {}, "nest", [2, 3]),                 # (22 + 3) // 4 = 6
    ("stencil3", dict(N=22), {"bn": 8}, "mid.load.N", [2, 2, 2]),
    ("gemm_i32", dict(M=10, N=11, K=13), {}, "nest.0", [2, 2]),   # (10 + 2) // 3 = 4
    ("gemm", dict(M=7, N=6, K=5), {}, "acc.mma.K", [7, 1]),
    ("softmax", dict(M=9, N=13), {}, "x.load.N", [4, 4]),
    ("transpose", dict(M=10, N=7), {}, "B.store.M", [2, 2]),
])
def test_reshape_preserves_results_and_builds_the_nest(name, sizes, config, loop, extents):
    s, inputs, config = make(name, sizes, config)
    info = loop_info(s, loop)
    handles = s.reshape(loop, extents)
    assert handles == tuple(f"{loop}.{k}" for k in range(len(extents)))
    rows = subtree(s, handles[0])[:len(extents)]
    assert rows == [(k, h, e, info.kind) for k, (h, e) in enumerate(zip(handles, extents))]
    assert loop_info(s, handles[0]).depth == info.depth
    image = tau_image(s.transforms[-1].tau, [loop_info(s, h) for h in handles], s.sizes)
    assert image == [(i,) for i in range(int(np.prod(extents)))]  # onto [0, N), once each, in order
    assert_same_results(name, s, inputs, config, orders=("canonical", "reverse"))


def test_reshape_then_swap_then_coalesce_on_the_1d_kernels(tmp_path):
    for name in ("scale_add", "stencil3"):
        s, inputs, config = make(name, dict(N=46))  # 12 blocks of 4
        s.reshape("nest", [3, 4], names=["hi", "lo"])
        s.swap("hi", "lo")
        s.coalesce(["lo", "hi"], name="blocks")
        assert subtree(s, "blocks")[0] == (0, "blocks", 12, "parallel")
        assert_same_results(name, s, inputs, config, orders=("canonical", "reverse"))
        path = tmp_path / f"{name}.json"
        s.save(path)
        r = tc.Schedule.load(path, KERNELS[name][0])
        assert [h[0] for h in r.history] == ["reshape", "swap", "coalesce"]
        assert tc.digest(r.program) == tc.digest(s.program)


def test_coalesce_and_reshape_preconditions():
    s, _, _ = make("gemm_i32", dict(M=10, N=11, K=13))
    raises(s.coalesce, ["nest.1", "nest.0"], match=r"nest as nest.0 > nest.1, not in the order given")
    raises(s.coalesce, ["acc.mma.p1", "acc.mma.p0", "acc.mma.K"], match=r"'acc.mma.p1' is parallel but 'acc.mma.K' is reduce")
    raises(s.coalesce, [], match=r"loops must be a list of 2 or more distinct loop names, got \[\]")
    raises(s.coalesce, ["nest.0"], match=r"loops must be a list of 2 or more")
    raises(s.reshape, "nest.0", [3, 2], match=r"cannot prove cardinality: the extent \(\(M \+ 2\) // 3\) of 'nest.0' "
                                              r"is not provably 3 \* 2 = 6")
    raises(s.reshape, "a.load.K", [7], match=r"extents must be a list of 2 or more positive ints, got \[7\]")
    raises(s.reshape, "a.load.K", [7, 0], match=r"extents must be .*: item 1 \(0\) is not a positive int")
    raises(s.reshape, "a.load.K", [7, 1], names=["a"], match=r"names must be a list of 2 or more distinct new loop names")
    raises(s.reshape, "a.load.K", [7, 1], names=["a", "k"], match=r"a loop named 'k' exists already")
    symbolic = tc.schedule(KERNELS["gemm_i32"][0])  # M unbound: (M + 2) // 3 is 4 only for some M
    raises(symbolic.reshape, "nest.0", [2, 2], match=r"cannot prove cardinality")
    p = program_with(s, "a.load.K", start=IConst(1))
    raises(coalesce, p, ["a.load.M", "a.load.K"], match=r"'a.load.K' must start at 0")
    assert s.history == []


def test_every_op_replays_from_json(tmp_path):
    s, inputs, config = make("gemm_i32", dict(M=10, N=11, K=13))
    s.fuse("nest.0", "nest.1")
    s.insert_unit("k", name="kk")
    s.tile(["a.load.M", "a.load.K"], [2, 4])
    s.reorder(["acc.mma.K", "acc.mma.p1", "acc.mma.p0"])
    s.swap("C.store.M", "C.store.N")
    s.reshape("acc.mma.K", [7, 1], names=["ka", "kb"])
    s.remove_unit("kb")
    s.coalesce(["b.load.K", "b.load.N"])
    s.remove_unit("kk")
    path = tmp_path / "all.json"
    s.save(path)
    r = tc.Schedule.load(path, KERNELS["gemm_i32"][0])
    assert r.history == s.history and r.loop_tree() == s.loop_tree()
    assert_same_results("gemm_i32", r, inputs, config)
