"""Lowering to the explicit loop program, and its translation validation with isl."""
import dataclasses

import numpy as np
import pytest

import test_checker_programs as P
import tilecert as tc
from examples import EXAMPLES
from tilecert.lowering import LoweringError, format_lowered, lower, validate
from tilecert.lowering.program import For, Guard, Seq, Store, walk
from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.index import IBin, IConst, ISize, IVar


def lowered_of(s: tc.Schedule):
    lp = lower(s.program, s.sizes)
    return lp, validate(s.program, lp, s.sizes)


def fors(lp) -> dict[str, For]:
    return {n.name: n for n in walk(lp.body) if isinstance(n, For)}


def replace_nodes(body, fn):
    """``body`` with ``fn`` applied bottom-up to every node."""
    out = []
    for node in body:
        if hasattr(node, "body"):
            node = dataclasses.replace(node, body=tuple(replace_nodes(node.body, fn)))
        out.extend(fn(node))
    return tuple(out)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_example_lowers_and_validates_for_symbolic_sizes(name):
    lp, v = lowered_of(tc.schedule(EXAMPLES[name].kernel))
    assert v.proved, str(v)
    kinds = {x.kind for x in v.verdicts}
    assert kinds == {"coverage", "bounds"}
    assert sum(isinstance(n, Store) for n in walk(lp.body)) == sum(x.kind == "coverage" for x in v.verdicts)


def test_split_tail_guard_becomes_a_loop_bound():
    s = tc.schedule(EXAMPLES["gemm"].kernel, M=24, N=21, K=21)
    s.split("nest.0", 5)
    lp, v = lowered_of(s)
    assert v.proved, str(v)
    inner = fors(lp)["nest.0.i"]
    assert inner.hi == IBin("min", IConst(5), IBin("sub", IConst(8), IBin("mul", IConst(5), IVar(inner.var - 1, 0))))
    assert not any(isinstance(n, Guard) for n in walk(lp.body)), format_lowered(lp)


def test_bound_sizes_become_constants_and_symbolic_ones_stay():
    lp, _ = lowered_of(tc.schedule(EXAMPLES["gemm"].kernel, M=24, N=20, K=21, bm=4, bn=4, bk=7))
    assert fors(lp)["nest.0"].hi == IConst(6) and fors(lp)["k"].hi == IConst(3)
    lp, _ = lowered_of(tc.schedule(EXAMPLES["gemm"].kernel, bm=4))
    assert ISize("M") in _leaves(fors(lp)["nest.0"].hi)


def _leaves(e):
    if isinstance(e, IBin):
        return _leaves(e.a) | _leaves(e.b)
    return {e}


def test_bindings_become_threads_simd_and_unrolled_copies():
    s = tc.schedule(EXAMPLES["gemm"].kernel, M=16, N=16, K=14, bm=4, bn=4, bk=7)
    s.bind("nest.0", "grid0")
    s.bind("C.store.N", "vector")
    s.bind("acc.full.p0", "unrolled")
    lp, v = lowered_of(s)
    assert v.proved, str(v)
    assert fors(lp)["nest.0"].mode == "threads"
    assert fors(lp)["C.store.N"].mode == "simd"
    assert "acc.full.p0" not in fors(lp)
    copies = [n for n in walk(lp.body) if isinstance(n, Seq)]
    assert [c.label for c in copies] == [f"acc.full.p0 = {k}" for k in range(4)]
    # every copy is the same scheduled statement with its own tau
    stores = [n for c in copies for n in walk(c.body) if isinstance(n, Store)]
    assert {st.sid for st in stores} == {0} and len({st.origin for st in stores}) == 4


def test_unrolling_a_symbolic_loop_keeps_a_serial_loop_and_huge_unrolls_are_refused():
    s = tc.schedule(EXAMPLES["transpose"].kernel)
    loop = next(lp.name for lp in L.loops(s.program.body) if not isinstance(lp.extent, IConst))
    s.bind(loop, "unrolled")
    lp, v = lowered_of(s)
    assert fors(lp)[loop].mode == "serial" and v.proved
    s = tc.schedule(EXAMPLES["transpose"].kernel, M=100000, N=3)
    s.bind(next(x.name for x in s.loops() if x.depth == 0), "unrolled")
    with pytest.raises(LoweringError, match="limit"):
        lower(s.program, s.sizes)


def test_validation_catches_an_off_by_one_bound_with_a_witness():
    s = tc.schedule(EXAMPLES["gemm"].kernel, M=24, N=21, K=21)
    s.split("nest.0", 5)
    p = s.program
    lp = lower(p, s.sizes)
    bad = dataclasses.replace(lp, body=replace_nodes(lp.body, lambda n: [
        dataclasses.replace(n, hi=IBin("add", n.hi, IConst(1))) if isinstance(n, For) and n.name == "nest.0.i"
        else n]))
    v = validate(p, bad, s.sizes)
    wrong = [x for x in v.failures("coverage") if x.status == "disproved"]
    assert wrong and "not specified" in wrong[0].detail
    assert wrong[0].witness["nest.0.o"] * 5 + wrong[0].witness["nest.0.i"] == 8  # the first row block too many


def test_validation_catches_a_wrong_index_a_dropped_and_a_doubled_statement():
    s = tc.schedule(EXAMPLES["transpose"].kernel, M=6, N=5)
    p = s.program
    lp = lower(p, s.sizes)
    shifted = dataclasses.replace(lp, body=replace_nodes(lp.body, lambda n: [
        dataclasses.replace(n, index=tuple(IBin("add", i, IConst(0)) if k else IBin("sub", i, IConst(0))
                                           for k, i in enumerate(n.index[:1])) + tuple(
            IBin("mod", i, IConst(3)) for i in n.index[1:])) if isinstance(n, Store) else n]))
    assert any("index" in x.detail for x in validate(p, shifted, s.sizes).failures("coverage"))
    dropped = dataclasses.replace(lp, body=replace_nodes(lp.body, lambda n: [] if isinstance(n, Store) else [n]))
    assert any("dropped" in x.detail for x in validate(p, dropped, s.sizes).failures("coverage"))
    doubled = dataclasses.replace(lp, body=replace_nodes(lp.body, lambda n: [n, n] if isinstance(n, Store) else [n]))
    assert any("same instance" in x.detail for x in validate(p, doubled, s.sizes).failures("coverage"))


def test_out_of_bounds_access_is_a_disproved_bounds_verdict():
    s = tc.schedule(EXAMPLES["transpose"].kernel, M=6, N=5)
    p = s.program
    lp = lower(p, s.sizes)
    oob = dataclasses.replace(lp, body=replace_nodes(lp.body, lambda n: [
        dataclasses.replace(n, index=(IBin("add", n.index[0], IConst(1)),) + n.index[1:])
        if isinstance(n, Store) else n]))
    bounds = [x for x in validate(p, oob, s.sizes).failures("bounds") if x.status == "disproved"]
    assert bounds and bounds[0].witness


@pytest.mark.parametrize("name, sizes", [("gemm_i32", dict(M=7, N=6, K=5)), ("transpose", dict(M=5, N=7))])
@pytest.mark.parametrize("op", ["fuse", "coalesce"])
def test_fused_and_coalesced_schedules_with_bound_sizes_are_proved_emitted_and_run(name, sizes, op):
    # the fused extent cdiv(M, bm) * cdiv(N, bn) is quasi-affine only once the bound sizes are substituted
    s = tc.schedule(EXAMPLES[name].kernel, **sizes)
    outer, inner = [lp.name for lp in s.loops()][:2]
    s.fuse(outer, inner) if op == "fuse" else s.coalesce([outer, inner])
    assert s.check().ok
    _, v = lowered_of(s)
    assert v.proved, str(v)
    assert "translation validation of the lowering: all obligations proved" in tc.emit(s)
    arrays = EXAMPLES[name].make_inputs(np.random.default_rng(1), **sizes)
    arrays = {k: a for k, a in arrays.items() if isinstance(a, np.ndarray)}
    got = tc.compile(s)(**{k: a.copy() for k, a in arrays.items()})
    want = s.run(**{k: a.copy() for k, a in arrays.items()})
    for out in want:
        np.testing.assert_array_equal(got[out], want[out], err_msg=out)


def _size_guarded(sizes):
    """``for i in [0, N): if 2 < N: Y[i] = (2 < N ? X[i] : 0)``: conditions that bound sizes make constants."""
    c = P.lt(2, "N")
    value = L.Sel(L.Ix(c, "bool"), P.ld("X", P.v(0)), P.lit(0), "i32")
    p = P.program("cnd", ("N",), [P.tensor("X", ("N",), written=False), P.tensor("Y", ("N",))],
                  P.loop(0, "i", "N", P.guard(c, P.assign("Y", (P.v(0),), value)), kind="parallel"))
    return validate(p, lower(p, sizes), sizes)


@pytest.mark.parametrize("n", [None, 2, 3, 5])
def test_conditions_on_sizes_validate_as_truth_values_once_the_sizes_are_bound(n):
    v = _size_guarded({} if n is None else {"N": n})
    assert v.proved, str(v)


def test_reduce_loop_bound_to_threads_updates_atomically():
    s = tc.schedule(EXAMPLES["rowreduce"].kernel, M=5, N=9)
    red = next(lp for lp in L.loops(s.program.body) if lp.kind == "reduce")
    program = dataclasses.replace(s.program, body=_rebind(s.program.body, red.name, "grid0"))
    lp = lower(program, s.sizes)
    atomics = [n for n in walk(lp.body) if isinstance(n, Store) and n.atomic]
    assert atomics and all(n.accum for n in atomics)
    assert validate(program, lp, s.sizes).proved


def _rebind(block: ir.Block, name: str, binding: str) -> ir.Block:
    ops = []
    for st in block.ops:
        if isinstance(st, (L.Loop, L.If)):
            st = dataclasses.replace(st, body=_rebind(st.body, name, binding))
            if isinstance(st, L.Loop) and st.name == name:
                st = dataclasses.replace(st, binding=binding)
        ops.append(st)
    return ir.Block(block.args, tuple(ops), block.yields)


def test_barrier_inside_a_thread_loop_is_refused():
    s = tc.schedule(EXAMPLES["transpose"].kernel, M=4, N=4)
    outer = s.program.body.ops[0]
    body = ir.Block((), outer.body.ops + (L.Barrier("block"),))
    program = dataclasses.replace(s.program, body=ir.Block((), (dataclasses.replace(
        outer, binding="block0", body=body),)))
    with pytest.raises(LoweringError, match="barrier"):
        lower(program, s.sizes)
