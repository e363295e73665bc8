"""privatize(target, over): the accumulation of ``target`` across ``over`` in a fresh local tile.

On GEMM (f32 and i32) and the row reductions: the scheduled program computes bit for bit what
the same schedule without the privatization computes (the updates keep their order), the
loop tree and the tile after the op are the ones the formula predicts, the register-block
schedule of the C benchmark compiles and matches the interpreter, every precondition failure
is a ``ScheduleError`` with a hint, and the checker proves the op (through the restored program,
which computes what the privatized one computes) while it leaves broken variants unproved.
"""
import dataclasses

import numpy as np
import pytest

import tilecert as tc
from examples import EXAMPLES
from tilecert.checker import check_transform, forwarding
from tilecert.checker.model import Model
from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.index import IConst, ISize, IVar, evaluate, ibin
from tilecert.semantics.loopinterp import interpret_loops
from tilecert.semantics.sched.base import ScheduleError
from tilecert.semantics.transform import Copy, Kind, Live, Tau
from tilecert.semantics.sched.privatize import privatize


def inputs(name, **sizes):
    made = EXAMPLES[name].make_inputs(np.random.default_rng(3), **sizes)
    return {k: v for k, v in made.items() if isinstance(v, np.ndarray)}


def results(s, arrays):
    return s.run(**{k: v.copy() for k, v in arrays.items()})


def assert_same(s, base, arrays):
    """``s`` computes bit for bit what ``base`` computes."""
    got, want = results(s, arrays), results(base, arrays)
    for out in want:
        np.testing.assert_array_equal(got[out], want[out], err_msg=out)


def decl(s, name):
    return next(st.buf for st in ir.walk(s.program.body) if isinstance(st, L.Decl) and st.buf.name == name)


def tree(s):
    return [(lp.depth, lp.name, str(lp.extent), lp.kind, lp.binding) for lp in s.loops()]


def raises(fn, *args, match):
    with pytest.raises(ScheduleError, match=match) as info:
        fn(*args)
    assert info.value.hint, "every ScheduleError carries a hint"


def register_block(name, rows, **sizes):
    """The C benchmark's schedule: rows x bn register blocks of the tile product, privatized across K."""
    s = tc.schedule(EXAMPLES[name].kernel, **sizes)
    s.split("acc.mma.p1", rows, outer="mo", inner="mi")
    s.reorder(["mo", "acc.mma.K", "mi", "acc.mma.p0"])
    segments = s.partition("mo", s.partition_breakpoints("mo"))
    vector = []
    for seg in (segment.split(".")[-1] for segment in segments):
        _, init_cols, _, store_cols = s.privatize("acc", f"acc.mma.K.{seg}")
        vector += [init_cols, store_cols, *s.unroll(f"mi.{seg}", materialize=True)]
    for loop in vector:
        s.bind(loop, "vector")
    return s


# ============================================================================ results and loop tree
@pytest.mark.parametrize("name", ["gemm", "gemm_i32"])
def test_privatize_across_the_reduction_loop_is_a_scalar_accumulator(name):
    sizes = dict(M=7, N=9, K=11)
    arrays = inputs(name, **sizes)
    base = tc.schedule(EXAMPLES[name].kernel, **sizes)
    s = tc.schedule(EXAMPLES[name].kernel, **sizes)
    assert s.privatize("acc", "acc.mma.K") == ()  # no tile axis: no transfer loops
    assert decl(s, "acc.acc").shape == ()
    p0 = next(lp for lp in L.loops(s.program.body) if lp.name == "acc.mma.p0")
    init, k, store = p0.body.ops[1:]
    assert (init.buf, init.index, init.value.buf, init.value.index) == ("acc.acc", (), "acc", (IVar(9, 0), IVar(10, 0)))
    assert k.name == "acc.mma.K" and k.body.ops[0].buf == "acc.acc" and k.body.ops[0].index == ()
    assert (store.buf, store.value.buf) == ("acc", "acc.acc")
    assert tree(s) == tree(base)
    assert_same(s, base, arrays)
    if EXAMPLES[name].exact:
        np.testing.assert_array_equal(results(s, arrays)["C"], arrays["A"] @ arrays["B"])


@pytest.mark.parametrize("name", ["gemm", "gemm_i32"])
def test_privatize_across_the_pipeline_is_a_tile_of_the_accumulator(name):
    sizes = dict(M=7, N=9, K=11)
    arrays = inputs(name, **sizes)
    base = tc.schedule(EXAMPLES[name].kernel, **sizes)
    s = tc.schedule(EXAMPLES[name].kernel, **sizes)
    assert s.privatize("acc", "k") == ("acc.acc.init0", "acc.acc.init1", "acc.acc.store0", "acc.acc.store1")
    assert decl(s, "acc.acc").shape == (IConst(3), IConst(5))
    names = [name for _, name, *_ in tree(s)]
    assert names.index("acc.acc.init1") < names.index("k") < names.index("acc.acc.store0") < names.index("C.store.M")
    assert ("parallel", None) == tree(s)[names.index("acc.acc.init0")][3:]
    accesses = {st.buf for st in ir.walk(s.program.body) if isinstance(st, L.Accum)}
    assert accesses == {"acc.acc"}
    assert_same(s, base, arrays)
    if EXAMPLES[name].exact:
        np.testing.assert_array_equal(results(s, arrays)["C"], arrays["A"] @ arrays["B"])


def test_privatize_the_row_sums_across_the_column_tiles():
    sizes = dict(M=10, N=13)
    arrays = inputs("rowreduce", **sizes)
    base = tc.schedule(EXAMPLES["rowreduce"].kernel, **sizes)
    s = tc.schedule(EXAMPLES["rowreduce"].kernel, **sizes)
    # t0 is read by the add (index r10) and written by the copy (index r23): one outer part, 0
    assert s.privatize("total", "j") == ("total.acc.init0", "total.acc.store0")
    assert decl(s, "total.acc").shape == (IConst(4),)
    j = next(lp for lp in L.loops(s.program.body) if lp.name == "j")
    inside = {st.buf for st in ir.walk(j.body) if isinstance(st, L.Assign)}
    assert "total.acc" in inside and "total" not in inside
    # the per-column-tile reduction, privatized across its own reduce loop: a scalar per row
    assert s.privatize("reduce", "reduce.reduce.N") == ()
    assert decl(s, "reduce.acc").shape == ()
    assert_same(s, base, arrays)
    want = EXAMPLES["rowreduce"].reference(arrays)
    np.testing.assert_allclose(results(s, arrays)["S"], want[0], rtol=1e-5)


def test_register_block_schedule_matches_in_the_interpreter_and_in_c():
    sizes = dict(M=13, N=10, K=9, bm=8, bn=8, bk=4)
    arrays = inputs("gemm_i32", M=13, N=10, K=9)
    s = register_block("gemm_i32", 3, **sizes)
    mo = next(lp for lp in L.loops(s.program.body) if lp.name == "mo.s0")
    k = next(lp for lp in L.loops(mo.body) if lp.name == "acc.mma.K.s0")
    # rows materialized: three vector loops whose tile indices are constants
    assert [lp.name for lp in k.body.ops] == ["acc.mma.p0.s0.u0", "acc.mma.p0.s0.u1", "acc.mma.p0.s0.u2"]
    assert [lp.body.ops[0].index[0] for lp in k.body.ops] == [IConst(0), IConst(1), IConst(2)]
    assert decl(s, "acc.acc").shape == (IConst(3), IConst(8))
    want = arrays["A"] @ arrays["B"]
    np.testing.assert_array_equal(results(s, arrays)["C"], want)
    c = {k: v.copy() for k, v in arrays.items()}
    tc.compile(s).run_in_place(**c)
    np.testing.assert_array_equal(c["C"], want)


# ============================================================================ the checker
TRANSFORM = ("coverage", "prefix_cut", "dependence")


def op_verdicts(report, k):
    return {r.kind: r.verdict for r in report if r.subject.startswith(f"op {k}:")}


@pytest.mark.parametrize("name", ["gemm", "gemm_i32"])
@pytest.mark.parametrize("over", ["acc.mma.K", "k"])
def test_checker_proves_privatize_on_gemm(name, over):
    s = tc.schedule(EXAMPLES[name].kernel, M=5, N=6, K=7)
    s.privatize("acc", over)
    report = s.check()
    assert all(r.verdict.proved for r in report), [r for r in report if not r.verdict.proved]
    assert set(TRANSFORM) <= set(op_verdicts(report, 0))


def test_checker_proves_privatize_on_the_row_reduction():
    s = tc.schedule(EXAMPLES["rowreduce"].kernel, M=10, N=13)
    s.privatize("total", "j")
    s.privatize("reduce", "reduce.reduce.N")
    report = s.check()
    assert all(r.verdict.proved for r in report), [r for r in report if not r.verdict.proved]


def test_checker_proves_the_register_block_schedule():
    report = register_block("gemm_i32", 3, M=13, N=10, K=9, bm=8, bn=8, bk=4).check()
    assert [r.kind for r in report if "privatize" in r.subject and r.kind in TRANSFORM] == list(TRANSFORM) * 2
    assert all(r.verdict.proved for r in report), [r for r in report if not r.verdict.proved]


def test_restored_program_computes_what_the_privatized_one_computes():
    """The checker compares the privatized program through its restored form: the two agree."""
    s = tc.schedule(EXAMPLES["gemm_i32"].kernel, M=5, N=6, K=7)
    s.privatize("acc", "k")
    m = Model(s.program, s.sizes)
    (d,) = s.transforms[-1].datamaps
    assert isinstance(d, Copy) and (d.buffer, d.source) == ("acc.acc", "acc")
    restored, _ = forwarding.restore_copies(m, [(b, d) for b in m.buffers if b.name == "acc.acc"], 2000)
    assert not any(isinstance(st, L.Decl) and st.buf.name == "acc.acc" for st in ir.walk(restored.body))
    arrays = inputs("gemm_i32", M=5, N=6, K=7)
    got = {k: v.copy() for k, v in arrays.items()}
    interpret_loops(restored, s.sizes, got)
    np.testing.assert_array_equal(got["C"], results(s, arrays)["C"])


def _accumulate(extent):
    """``for i in [0, N): for j in [0, extent) (parallel): X[j] += 1`` with X an input (nonzero initially)."""
    j = IVar(1, 0)
    return _program([_loop(0, "i", [_loop(1, "j", [_add((j,))], "parallel", extent=extent)])], "X")


def _with_ops(p, ops):
    return dataclasses.replace(p, body=ir.Block((), tuple(ops)))


def _tile_index(node, index):
    """``node`` with every update of the tile given ``index``."""
    if isinstance(node, ir.Block):
        return ir.Block(node.args, tuple(_tile_index(st, index) for st in node.ops), node.yields)
    if isinstance(node, (L.Loop, L.If)):
        return dataclasses.replace(node, body=_tile_index(node.body, index))
    return dataclasses.replace(node, index=index) if isinstance(node, L.Accum) else node


def _shift_store(node):
    """The store-back nest writing ``X[u + 1]`` instead of ``X[u]``."""
    if isinstance(node, (L.Loop, L.If)):
        return dataclasses.replace(node, body=ir.Block((), tuple(_shift_store(st) for st in node.body.ops)))
    return dataclasses.replace(node, index=(ibin("add", node.index[0], IConst(1)),))


def _transform_verdicts(before, after, datamaps):
    """The transform verdicts (the declaration's among them) under the declarations ``datamaps``."""
    report = check_transform(before, after, Tau(), datamaps=datamaps)
    return {r.kind: r.verdict for r in report if r.kind in TRANSFORM or r.kind == Kind.DATAMAP}


@pytest.mark.parametrize("extent", [IConst(4), ISize("N")])
def test_checker_proves_the_hand_made_privatization(extent):
    before = _accumulate(extent)
    t = privatize(before, "X", "i")
    verdicts = _transform_verdicts(before, t.program, t.datamaps)
    assert set(verdicts) == set(TRANSFORM) | {Kind.DATAMAP}
    assert all(v.proved for v in verdicts.values()), verdicts


def _strided(extent=ISize("N")):
    """``for i in [0, N): for j in [0, extent) (parallel): X[2j] += 1``: the tile spans 1 + 2 (extent - 1) cells."""
    j = IVar(1, 0)
    return _program([_loop(0, "i", [_loop(1, "j", [_add((ibin("mul", IConst(2), j),))], "parallel",
                                          extent=extent)])], "X")


def test_a_strided_tile_over_an_empty_loop_has_extent_zero_and_is_proved():
    before = _strided()
    t = privatize(before, "X", "i")
    (tile,) = [st.buf for st in ir.walk(t.program.body) if isinstance(st, L.Decl)]
    extents = [int(evaluate(tile.shape[0], {"N": n}, {})) for n in range(5)]
    assert extents == [max(0, 2 * n - 1) for n in range(5)]  # not -1 at N = 0
    verdicts = _transform_verdicts(before, t.program, t.datamaps)
    assert all(v.proved for v in verdicts.values()), verdicts


def test_a_tile_of_negative_extent_is_disproved_with_the_sizes():
    # the range 1 + 2 (N - 1) without its clamp: an allocation of extent -1 at N = 0, every access in bounds
    before = _strided()
    t = privatize(before, "X", "i")
    unclamped = ibin("add", IConst(1), ibin("mul", IConst(2), ibin("sub", ISize("N"), IConst(1))))

    def unclamp(node):
        return dataclasses.replace(node, buf=dataclasses.replace(node.buf, shape=(unclamped,))) \
            if isinstance(node, L.Decl) else node

    after = _with_ops(t.program, [unclamp(st) for st in t.program.body.ops])
    r = check_transform(before, after, Tau(), datamaps=t.datamaps)
    (v,) = r.verdicts("bounds")
    assert v.status == "disproved" and "negative extent" in v.witness.summary and dict(v.witness.sizes)["N"] == 0


def _disproved_declaration(before, after, datamaps, summary):
    """The declaration is disproved with a witness saying ``summary``, and nothing is compared through it."""
    verdicts = _transform_verdicts(before, after, datamaps)
    v = verdicts.pop(Kind.DATAMAP)
    assert v.status == "disproved" and summary in v.witness.summary, v
    assert all(w.status == "unknown" and "declaration" in w.reason for w in verdicts.values()), verdicts
    return v


def test_checker_does_not_prove_broken_privatizations():
    before = _accumulate(ISize("N"))
    t = privatize(before, "X", "i")
    after, (d,) = t.program, t.datamaps
    decl_, init, loop, store = after.body.ops
    # a live range too short (the store-back before the loop): a use outside it, at an instance, replayed
    v = _disproved_declaration(before, _with_ops(after, [decl_, init, store, loop]), t.datamaps, "outside its live")
    assert v.witness.instances and v.witness.replay.startswith("CONFIRMED")
    # the store-back to the next cell
    shifted = _shift_store(store)
    moved = dataclasses.replace(d, live=Live(d.live.load, next(st for st in ir.walk(shifted.body)
                                                               if isinstance(st, L.Assign))))
    _disproved_declaration(before, _with_ops(after, [decl_, init, loop, shifted]), (moved,), "not stored back to it")
    # a wrong cell map: cell u stands for X[u + 1], which the load does not read
    wrong_cell = dataclasses.replace(d, cell=(ibin("add", d.cell[0], IConst(1)),))
    _disproved_declaration(before, after, (wrong_cell,), "other than the declared one")
    # a write to the source inside the live range
    poke = L.Assign("X", (IConst(0),), L.Lit(5, "i32"))
    poked = dataclasses.replace(loop, body=ir.Block((), loop.body.ops + (poke,)))
    v = _disproved_declaration(before, _with_ops(after, [decl_, init, poked, store]), t.datamaps,
                               "while X.acc holds it")
    assert any("X[0] = 5" in i.statement for i in v.witness.instances)
    # declared a copy of another buffer: the declared load contradicts it
    _disproved_declaration(before, after, (dataclasses.replace(d, source="Y"),), "does not copy Y into it")
    # a declared transfer missing from the program, or the tile undeclared: unknown, never proved
    for ops, datamaps, reason in (([decl_, init, loop], t.datamaps, "not in the transformed program"),
                                  ([decl_, init, loop, store], (), "(X.acc) without declaring what they hold")):
        for kind, v in _transform_verdicts(before, _with_ops(after, ops), datamaps).items():
            assert v.status == "unknown" and reason in v.reason, (kind, v)
    # every update to tile cell 0: the declaration holds, but the restored program updates X[0] for every j
    wrong = _transform_verdicts(before, _with_ops(after, [decl_, init, _tile_index(loop, (IConst(0),)), store]),
                                t.datamaps)
    assert wrong[Kind.DATAMAP].proved
    assert wrong["coverage"].status == "disproved"
    assert wrong["coverage"].witness.replay.startswith("CONFIRMED")


# ============================================================================ preconditions
def _program(body, *tensors):
    decls = tuple(ir.TensorDecl(t, "i32", (ir.Dim(1, "N"),), (ISize("N"),), True) for t in tensors)
    return ir.Program("hand", ("N",), decls, ir.Block((), tuple(body)))


def _loop(var, name, body, kind="serial", binding=None, extent=ISize("N")):
    return L.Loop(var, name, extent, kind, ir.Block((), tuple(body)), binding)


def _add(index, guard=None):
    st = L.Accum("X", index, "add", L.Lit(1, "i32"))
    return L.If(guard, ir.Block((), (st,))) if guard is not None else st


def test_preconditions():
    s = tc.schedule(EXAMPLES["gemm"].kernel, M=7, N=9, K=11)
    raises(s.privatize, "acc", "acc.mma.p0", match="loop 'acc.mma.p0' is parallel")
    raises(s.privatize, "nope", "k", match="no buffer named 'nope'")
    raises(s.privatize, "C", "k", match="no accesses of 'C' under loop 'k'")
    raises(s.privatize, "A", "k", match=r"'A' is not written under loop 'k' \(no accumulation\)")
    raises(s.privatize, "a", "k", match="'a' is declared inside the loop")
    raises(s.privatize, "acc", "nope", match="no loop named 'nope'")
    s.reorder(["acc.mma.K", "acc.mma.p1", "acc.mma.p0"])
    s.bind("acc.mma.p0", "lane")
    raises(s.privatize, "acc", "acc.mma.K", match="loop 'acc.mma.p0' inside 'acc.mma.K' is bound to lane")

    i, j = IVar(0, 0), IVar(1, 0)
    reads_over = _program([_loop(0, "i", [_add((i,))])], "X")
    raises(privatize, reads_over, "X", "i", match="reads loop 'i': nothing to carry the accumulator across")
    two_cells = _program([_loop(0, "i", [_add((IConst(0),)), _add((IConst(1),))])], "X")
    raises(privatize, two_cells, "X", "i", match="do not share one index vector")
    guards = _program([_loop(0, "i", [_add((IConst(0),), ibin("lt", i, IConst(3))), _add((IConst(0),))])], "X")
    raises(privatize, guards, "X", "i", match="sit under differing If guards")
    backwards = _program([_loop(0, "i", [_loop(1, "j", [_add((ibin("sub", ISize("N"), j),))], "parallel")])], "X")
    raises(privatize, backwards, "X", "i", match="not an increasing affine function of loop 'j'")
    ok = _program([_loop(0, "i", [_loop(1, "j", [_add((j,))], "parallel", extent=IConst(4))])], "X")
    assert privatize(ok, "X", "i").handles == ("X.acc.init0", "X.acc.store0")
