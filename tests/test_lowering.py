"""Lowering to the explicit loop program, and its translation validation on the checker's engine."""
import dataclasses

import numpy as np
import pytest

import test_checker_programs as P
import tilecert as tc
from examples import EXAMPLES
from tilecert.checker.model import Model
from tilecert.checker.verdict import DISPROVED, PROVED, Report
from tilecert.lowering import LoweringError, ValidationError, format_lowered, lower, validate
from tilecert.lowering.loop_form import loop_form
from tilecert.lowering.program import Alloc, For, Guard, Seq, Store, walk
from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.index import IBin, IConst, ISize, IVar


def lowered_of(s: tc.Schedule):
    lp = lower(s.program, s.sizes)
    return lp, validate(s.program, lp, s.sizes)


def disproved(report: Report, kind: str):
    """The witness of ``report``'s disproved ``kind`` verdict (the test fails when it is not disproved)."""
    v = report.verdicts(kind)[0]
    assert v.status == DISPROVED, report.explain()
    return v.witness


def coords(witness, role: str = "") -> dict[str, int]:
    """The loop coordinates of the witness's first instance with ``role``."""
    return dict(next(i for i in witness.instances if i.role == role).coords)


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
    assert v.ok, v.explain()
    assert [r.kind for r in v] == ["coverage", "bounds"] and {r.subject for r in v} == {f"lowering of {lp.name}"}
    assert v.symbolic == tuple(lp.sizes) and v.sizes == {}


def test_split_tail_guard_becomes_a_loop_bound():
    s = tc.schedule(EXAMPLES["gemm"].kernel, M=24, N=21, K=21)
    s.split("nest.0", 5)
    lp, v = lowered_of(s)
    assert v.ok, v.explain()
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
    assert v.ok, v.explain()
    assert fors(lp)["nest.0"].mode == "threads"
    assert fors(lp)["C.store.N"].mode == "simd"
    assert "acc.full.p0" not in fors(lp)
    copies = [n for n in walk(lp.body) if isinstance(n, Seq)]
    assert [c.label for c in copies] == [f"acc.full.p0 = {k}" for k in range(4)]
    # every copy is the same scheduled statement with its own tau
    stores = [n for c in copies for n in walk(c.body) if isinstance(n, Store)]
    (sid,) = {st.sid for st in stores}
    assert len({st.origin for st in stores}) == 4
    spec = Model(s.program, s.sizes).statements[sid]  # the checker's numbering of the scheduled statements
    assert spec.kind == "assign" and spec.node.buf == stores[0].buf and [lp.name for lp in spec.loops][-1] == "acc.full.p0"


def test_unrolling_a_symbolic_loop_keeps_a_serial_loop_and_huge_unrolls_are_refused():
    s = tc.schedule(EXAMPLES["transpose"].kernel)
    loop = next(lp.name for lp in L.loops(s.program.body) if not isinstance(lp.extent, IConst))
    s.bind(loop, "unrolled")
    lp, v = lowered_of(s)
    assert fors(lp)[loop].mode == "serial" and v.ok
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
    w = disproved(v, "coverage")
    assert "performs no old instance" in w.summary
    at = coords(w, "new")
    assert (at["nest.0.o"], at["nest.0.i"]) == (0, 5)  # the least extra instance: one row past the first tile
    assert v.status("bounds") == DISPROVED  # the extra rows also leave the tensors
    assert w.replay.startswith("CONFIRMED")  # the lowered program, run on the loop interpreter, goes wrong


def test_validation_catches_a_wrong_index_a_dropped_and_a_doubled_statement():
    s = tc.schedule(EXAMPLES["transpose"].kernel, M=6, N=5)
    p = s.program
    lp = lower(p, s.sizes)
    shifted = dataclasses.replace(lp, body=replace_nodes(lp.body, lambda n: [
        dataclasses.replace(n, index=n.index[:1] + tuple(IBin("mod", i, IConst(3)) for i in n.index[1:]))
        if isinstance(n, Store) else n]))
    w = disproved(validate(p, shifted, s.sizes), "coverage")
    at = coords(w, "new")
    assert "performs no old instance" in w.summary and at["nest.0"] * 4 + at["B.store.M"] >= 3  # where mod 3 differs
    dropped = dataclasses.replace(lp, body=replace_nodes(lp.body, lambda n: [] if isinstance(n, Store) else [n]))
    w = disproved(validate(p, dropped, s.sizes), "coverage")
    assert "performed by no new instance" in w.summary and set(coords(w, "old").values()) == {0}
    doubled = dataclasses.replace(lp, body=replace_nodes(lp.body, lambda n: [n, n] if isinstance(n, Store) else [n]))
    w = disproved(validate(p, doubled, s.sizes), "coverage")
    assert "two new instances perform one old instance" in w.summary
    assert set(coords(w, "old").values()) == {0}


def test_a_dropped_guard_is_disproved_with_the_instance_it_lets_run():
    s = tc.schedule(EXAMPLES["gemm"].kernel, M=7, N=6, K=5)  # 3 row tiles of 3: a split by 4 has a tail
    s.split("nest.0", 4)
    lp = lower(s.program, s.sizes)
    assert fors(lp)["nest.0.i"].hi != IConst(4)  # the tail guard became the bound min(4, 3 - 4*o)
    unguarded = dataclasses.replace(lp, body=replace_nodes(lp.body, lambda n: [
        dataclasses.replace(n, hi=IConst(4)) if isinstance(n, For) and n.name == "nest.0.i" else n]))
    w = disproved(validate(s.program, unguarded, s.sizes), "coverage")
    at = coords(w, "new")
    assert at["nest.0.o"] * 4 + at["nest.0.i"] == 3  # a fourth row tile runs (its stores are guarded off:
    assert w.replay.startswith("not confirmed")  # the outputs agree, but the work is not the schedule's)


def test_an_allocation_that_moves_out_of_its_loop_or_changes_shape_is_disproved():
    s = tc.schedule(EXAMPLES["gemm"].kernel, M=4, N=4, K=4)
    p = s.program
    lp = lower(p, s.sizes)
    alloc = next(n for n in walk(lp.body) if isinstance(n, Alloc))
    wider = dataclasses.replace(lp, body=replace_nodes(lp.body, lambda n: [
        dataclasses.replace(n, shape=tuple(IBin("add", e, IConst(1)) for e in n.shape)) if n is alloc else n]))
    w = disproved(validate(p, wider, s.sizes), "coverage")
    assert alloc.buf in w.instances[0].statement
    renamed = dataclasses.replace(lp, body=replace_nodes(lp.body, lambda n: [
        dataclasses.replace(n, sid=n.sid + 1) if n is alloc else n]))
    assert validate(p, renamed, s.sizes).status("coverage") == DISPROVED


def test_the_lowering_read_back_as_loop_form_computes_what_the_schedule_does():
    s = tc.schedule(EXAMPLES["gemm"].kernel, M=6, N=5, K=4)
    s.split("nest.0", 4)
    s.bind("acc.full.p0", "unrolled")
    lp = lower(s.program, s.sizes)
    form = loop_form(lp)
    want, got = (P.run(q, s.sizes, seed=3) for q in (s.program, form.program))
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    leaves = [n for n in walk(lp.body) if isinstance(n, (Alloc, Store))]
    assert sorted(map(id, leaves)) == sorted(map(id, form.source.values()))


def test_a_refused_lowering_is_a_typed_error_naming_the_obligation():
    s = tc.schedule(EXAMPLES["transpose"].kernel, M=3, N=2)
    p = s.program
    lp = lower(p, s.sizes)
    doubled = dataclasses.replace(lp, body=replace_nodes(lp.body, lambda n: [n, n] if isinstance(n, Store) else [n]))
    err = ValidationError(validate(p, doubled, s.sizes), "lowering of transpose")
    assert isinstance(err, tc.TilecertError) and "NOT PROVED: coverage disproved at lowering of transpose" in str(err)
    with pytest.raises(LoweringError, match="contradict"):
        validate(p, lp, {"M": 4})


def test_out_of_bounds_access_is_a_disproved_bounds_verdict():
    s = tc.schedule(EXAMPLES["transpose"].kernel, M=6, N=5)
    p = s.program
    lp = lower(p, s.sizes)
    oob = dataclasses.replace(lp, body=replace_nodes(lp.body, lambda n: [
        dataclasses.replace(n, index=(IBin("add", n.index[0], IConst(1)),) + n.index[1:])
        if isinstance(n, Store) else n]))
    v = validate(p, oob, s.sizes)
    w = disproved(v, "bounds")
    assert "outside its shape [4, 3]" in w.summary and w.cell == "a[4, 0]"  # the first store, one row past
    assert w.replay.startswith("CONFIRMED")


@pytest.mark.parametrize("name, sizes", [("gemm_i32", dict(M=7, N=6, K=5)), ("transpose", dict(M=5, N=7))])
@pytest.mark.parametrize("op", ["fuse", "coalesce"])
def test_fused_and_coalesced_schedules_with_bound_sizes_are_proved_emitted_and_run(name, sizes, op):
    # the fused extent cdiv(M, bm) * cdiv(N, bn) is quasi-affine only once the bound sizes are substituted
    s = tc.schedule(EXAMPLES[name].kernel, **sizes)
    outer, inner = [lp.name for lp in s.loops()][:2]
    s.fuse(outer, inner) if op == "fuse" else s.coalesce([outer, inner])
    assert s.check().ok
    _, v = lowered_of(s)
    assert v.ok, v.explain()
    assert f"checker: lowering of {name}: 2 proved, 0 disproved, 0 unknown" in tc.emit(s)
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
    assert v.ok, v.explain()


def test_reduce_loop_bound_to_threads_updates_atomically():
    s = tc.schedule(EXAMPLES["rowreduce"].kernel, M=5, N=9)
    red = next(lp for lp in L.loops(s.program.body) if lp.kind == "reduce")
    program = dataclasses.replace(s.program, body=_rebind(s.program.body, red.name, "grid0"))
    lp = lower(program, s.sizes)
    atomics = [n for n in walk(lp.body) if isinstance(n, Store) and n.atomic]
    assert atomics and all(n.accum for n in atomics)
    assert validate(program, lp, s.sizes).ok


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


def test_two_unrolled_copies_performing_one_instance_are_disproved():
    s = tc.schedule(EXAMPLES["transpose"].kernel, M=12, N=3)
    outer = next(x.name for x in s.loops() if x.depth == 0)
    s.bind(outer, "unrolled")
    p = s.program
    lp = lower(p, s.sizes)
    assert validate(p, lp, s.sizes).ok
    first = iter([n for n in walk(next(n for n in walk(lp.body) if isinstance(n, Seq)).body) if isinstance(n, Store)])
    last = next(n for n in walk(lp.body) if isinstance(n, Seq) and n.label == f"{outer} = 2")
    repeated = dataclasses.replace(lp, body=replace_nodes(lp.body, lambda n: [  # the last copy stores as the first
        dataclasses.replace(last, body=replace_nodes(last.body, lambda m: [next(first) if isinstance(m, Store) else m]))
        if n == last else n]))
    w = disproved(validate(p, repeated, s.sizes), "coverage")
    assert "two new instances perform one old instance" in w.summary and coords(w, "old")[outer] == 0
