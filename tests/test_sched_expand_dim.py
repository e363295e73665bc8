"""expand_dim(buffer, loops) and lift_alloc(buffer, loop): a per-instance buffer made one shared buffer.

On the scalar-descent GEMM (``examples/gemm_scalar.py``): the loop tree and declarations after each
op are the ones the op docs predict, the checker proves both ops (symbolically and at bound sizes),
the scheduled program computes bit for bit what the kernel computes (interpreter, C and cuda-host),
and the ops plus split and reorder reach the band the fission op then distributes. Illegal twins:
lifting a buffer whose cells carry a value across iterations (serial or parallel) is disproved with
a witness that replays; a forged ``Expanded`` declaration is disproved; every precondition failure is
a ``ScheduleError`` with a hint. Brute force: on a family of small programs, the checker's verdict on
lift_alloc agrees with running both programs in every instance order at every size up to 4.
"""
import dataclasses

import numpy as np
import pytest

import tilecert as tc
from examples import EXAMPLES
from tilecert import i32
from tilecert.checker import check_transform
from tilecert.checker.replay import replay_transform
from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.index import IConst, IVar, ibin
from tilecert.semantics.sched.base import ScheduleError
from tilecert.semantics.transform import Expanded, Kind, Lifted

from test_checker_programs import accum, assign, decl, ld, loop, program, tensor, times, transform, v

GEMM = EXAMPLES["gemm_scalar"].kernel


def declared(s, name):
    return next(st.buf for st in ir.walk(s.program.body) if isinstance(st, L.Decl) and st.buf.name == name)


def top(s):
    """The statements of the routine's body, by kind and name."""
    return [(type(st).__name__, st.buf.name if isinstance(st, L.Decl) else st.name) for st in s.program.body.ops]


def arrays(**sizes):
    made = EXAMPLES["gemm_scalar"].make_inputs(np.random.default_rng(5), **sizes)
    return {k: v for k, v in made.items() if isinstance(v, np.ndarray)}


def lifted(**sizes):
    s = tc.schedule(GEMM, **sizes)
    s.expand_dim("acc", ["nest.0", "nest.1"])
    s.lift_alloc("acc", "nest.0")
    return s


def raises(fn, *args, match):
    with pytest.raises(ScheduleError, match=match) as info:
        fn(*args)
    assert info.value.hint, "every ScheduleError carries a hint"


# ============================================================================ the legal forms
def test_expand_dim_adds_one_leading_axis_per_loop_indexed_by_its_variable():
    s = tc.schedule(GEMM, M=4, N=3, K=5)
    s.expand_dim("acc", ["nest.1", "nest.0"])
    assert [str(n) for n in declared(s, "acc").shape] == ["N", "M"]
    stores = [st for st in ir.walk(s.program.body) if isinstance(st, L.Assign) and st.buf == "acc"]
    assert stores and all(st.index == (IVar(1, 0), IVar(0, 0)) for st in stores)
    (d,) = s.transforms[-1].datamaps
    assert d == Expanded("acc", (1, 0))
    assert s.check().ok


def test_expand_dim_indexes_by_the_variable_minus_the_loop_start():
    s = tc.schedule(GEMM, M=5, N=3, K=2)
    s.partition("nest.0", [2])
    s.expand_dim("acc_s1", ["nest.0.s1"])
    (seg,) = [lp for lp in L.loops(s.program.body) if lp.name == "nest.0.s1"]
    buf = declared(s, "acc_s1")
    assert buf.shape == (seg.extent,)
    ld_ = next(e for st in ir.walk(seg.body) if isinstance(st, L.Assign)
               for e in L.loads(st.value) if e.buf == buf.name)
    assert ld_.index == (ibin("sub", IVar(seg.var, 0), seg.start),)
    r = s.check()
    assert r.ok, r.explain()


def test_lift_alloc_moves_the_declaration_before_the_loop_and_both_ops_are_proved_symbolically():
    s = lifted()
    assert top(s) == [("Decl", "acc"), ("Loop", "nest.0")]
    assert [str(n) for n in declared(s, "acc").shape] == ["M", "N"]
    assert s.transforms[-1].datamaps == (Lifted("acc", (0, 1)),)
    r = s.check()
    assert r.ok and not r.sizes, r.explain()
    assert [c for c in r.contract().values() if c] == [{Kind.DATAMAP: "proved"}] * 2


def test_lifting_out_of_a_serial_loop_whose_iterations_write_before_reading_is_proved():
    @tc.kernel
    def rows(X: tc.Tensor[i32, "M", "K"], Y: tc.Tensor[i32, "M"]):
        M, K = X.shape
        for r in tc.serial(M):
            acc = tc.zeros(i32, ())
            for k in r.serial(K):
                acc = acc + X.at(r.index(), k.index()).load()
            Y.at(r.index()).store(acc)

    s = tc.schedule(rows, M=3, K=4)
    s.lift_alloc("acc", "r")  # acc = 0 opens every iteration: nothing flows across them
    r = s.check()
    assert r.ok, r.explain()
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    np.testing.assert_array_equal(s.run(X=x, Y=np.zeros(3, np.int32))["Y"], x.sum(axis=1))


@pytest.mark.parametrize("sizes", [dict(M=4, N=3, K=5), dict(M=1, N=2, K=1), dict(M=3, N=3, K=0)])
def test_the_lifted_schedule_computes_bit_for_bit_what_the_kernel_computes(sizes):
    s, base = lifted(**sizes), tc.schedule(GEMM, **sizes)
    data = arrays(**sizes)
    got, want = s.run(**{k: a.copy() for k, a in data.items()}), base.run(**{k: a.copy() for k, a in data.items()})
    np.testing.assert_array_equal(got["C"], want["C"])


@pytest.mark.parametrize("target", ["c", "cuda-host"])
def test_differential_on_the_backends(target):
    s = lifted(M=8, N=6, K=5)
    report = tc.differential(s, target=target, trials=1)
    assert report.ok, report


def test_with_split_and_reorder_the_gemm_reaches_the_band_fission_distributes():
    """The tiled form io, jo, ii, ji around the K loop, the accumulator one M x N buffer: reorder of the
    K loop into the band is what fission (the loop's other statements distributed out) enables next."""
    s = lifted(M=8, N=6, K=6)
    s.split("nest.0", 4, outer="io", inner="ii")
    s.split("nest.1", 3, outer="jo", inner="ji")
    s.split("k", 2, outer="ko", inner="ki")
    s.reorder(["io", "jo", "ii", "ji"])
    assert [lp.name for lp in s.loops()] == ["io", "jo", "ii", "ji", "ko", "ki"]
    r = s.check()
    assert r.ok, r.explain()
    with pytest.raises(ScheduleError, match="not perfectly nested"):
        s.reorder(["ji", "ko"])
    data = arrays(M=8, N=6, K=6)
    want = tc.schedule(GEMM, M=8, N=6, K=6).run(**{k: a.copy() for k, a in data.items()})["C"]
    np.testing.assert_array_equal(s.run(**{k: a.copy() for k, a in data.items()})["C"], want)


# ============================================================================ illegal twins
def _carry(kind):
    """for i in [0, N) (kind): local t; t += X[i]; Y[i] = t -- t relies on its fresh zero per iteration."""
    return program("carry", ("N",), [tensor("X", ("N",), written=False), tensor("Y", ("N",))],
                   loop(0, "i", "N", decl("t", ()), accum("t", (), ld("X", v(0))), assign("Y", (v(0),), ld("t")),
                        kind=kind))


@pytest.mark.parametrize("kind", ["serial", "parallel"])
def test_lifting_a_buffer_that_carries_a_value_across_iterations_is_disproved_with_a_replaying_witness(kind):
    p = _carry(kind)
    t = transform(p, "lift_alloc", "t", "i")
    r = check_transform(p, t.program, t.tau, datamaps=t.datamaps, listed=t.obligations)
    (d,) = r.verdicts(Kind.DATAMAP)
    assert d.status == "disproved" and len(d.witness.instances) == 2, r.explain()
    assert d.witness.replay.startswith("CONFIRMED"), d.witness.lines()
    assert all(r.status(k) == "unknown" for k in (Kind.COVERAGE, Kind.DEPENDENCE))
    assert not r.ok


def test_lifting_the_scalar_accumulator_of_the_parallel_gemm_is_disproved():
    s = tc.schedule(GEMM, M=3, N=2, K=2)
    s.lift_alloc("acc", "nest.1")
    r = s.check()
    assert r.status(Kind.DATAMAP) == "disproved" and r.status(Kind.NONINTERFERENCE) == "disproved"
    (d,) = r.verdicts(Kind.DATAMAP)
    assert d.witness.replay.startswith("CONFIRMED"), d.witness.lines()


def test_a_forged_expanded_declaration_is_disproved():
    """The leading index one past the owning iteration: the declaration's rule fails, and so does bounds."""
    s = tc.schedule(GEMM, M=3, N=2, K=2)
    s.expand_dim("acc", ["nest.0"])
    t = s.transforms[-1]

    def shift(node):
        if isinstance(node, ir.Block):
            return dataclasses.replace(node, ops=tuple(shift(st) for st in node.ops))
        if isinstance(node, (L.Loop, L.If)):
            return dataclasses.replace(node, body=shift(node.body))
        if isinstance(node, L.Assign) and node.buf == "acc":
            return dataclasses.replace(node, index=(ibin("add", node.index[0], IConst(1)),) + node.index[1:])
        return node

    forged = dataclasses.replace(s.programs[1], body=shift(s.programs[1].body))
    r = check_transform(s.programs[0], forged, t.tau, s.sizes, datamaps=t.datamaps, listed=t.obligations)
    (d,) = r.verdicts(Kind.DATAMAP)
    assert d.status == "disproved" and "leading axes" in d.witness.summary, r.explain()
    assert r.status(Kind.BOUNDS) == "disproved"
    wrong = check_transform(s.programs[0], s.programs[1], t.tau, s.sizes, datamaps=(Expanded("acc", (1,)),),
                            listed=t.obligations)
    assert wrong.status(Kind.DATAMAP) == "disproved" and not wrong.ok  # nest.1 owns acc, but is not its axis


# ============================================================================ preconditions
def test_preconditions_are_typed_errors_with_hints():
    s = tc.schedule(GEMM, M=3, N=2, K=2)
    raises(s.expand_dim, "acc", ["k"], match="does not enclose the declaration")
    raises(s.expand_dim, "C", ["nest.0"], match="is a tensor")
    raises(s.expand_dim, "nope", ["nest.0"], match="no buffer named")
    raises(s.expand_dim, "acc", ["nope"], match="no loop named")
    raises(s.expand_dim, "acc", [], match="non-empty list")
    raises(s.lift_alloc, "acc", "k", match="does not enclose the declaration")
    raises(s.lift_alloc, "C", "nest.0", match="is a tensor")
    assert len(s.history) == 0  # a refused op records nothing


def test_lift_alloc_refuses_a_shape_that_reads_the_loop_and_a_declaration_under_a_guard():
    sized = program("sized", ("N",), [tensor("Y", ("N",))],
                    loop(0, "i", "N", decl("t", (v(0),)), assign("Y", (v(0),), times(ld("Y", v(0)), ld("Y", v(0))))))
    raises(lambda: transform(sized, "lift_alloc", "t", "i"), match="reads loop i")
    guarded = program("guarded", ("N",), [tensor("Y", ("N",))],
                      loop(0, "i", "N", L.If(ibin("lt", IVar(0, 0), IConst(2)), ir.Block((), (decl("t", ()),)))))
    raises(lambda: transform(guarded, "lift_alloc", "t", "i"), match="under the guard")
    twice = program("twice", ("N",), [tensor("Y", ("N",))], loop(0, "i", "N", decl("t", ())),
                    loop(1, "j", "N", decl("t", ())))
    raises(lambda: transform(twice, "expand_dim", "t", ["i"]), match="declared 2 times")


# ============================================================================ brute force
def _family(kind, shape, first):
    """for i (kind): local t[shape]; ``first``: t[c] = X[i] (write first) or t[c] += X[i] (read first); Y[i] = t[c]
    with c = i for a one-cell-per-iteration buffer, 0 for a shared cell."""
    cell = (v(0),) if shape else ()
    opening = assign("t", cell, ld("X", v(0))) if first == "write" else accum("t", cell, ld("X", v(0)))
    return program("fam", ("N",), [tensor("X", ("N",), written=False), tensor("Y", ("N",))],
                   loop(0, "i", "N", decl("t", ("N",) if shape else ()), opening,
                        accum("t", cell, ld("X", v(0))), assign("Y", (v(0),), ld("t", *cell)), kind=kind))


@pytest.mark.parametrize("kind", ["serial", "parallel"])
@pytest.mark.parametrize("shape", [True, False])
@pytest.mark.parametrize("first", ["write", "update"])
def test_lift_alloc_verdicts_agree_with_running_both_programs(kind, shape, first):
    p = _family(kind, shape, first)
    t = transform(p, "lift_alloc", "t", "i")
    r = check_transform(p, t.program, t.tau, datamaps=t.datamaps, listed=t.obligations, replay=False)
    differs = [n for n in range(5) if replay_transform(p, t.program, {"N": n}).startswith("CONFIRMED")]
    if r.ok:
        assert not differs, (differs, r.explain())
    else:
        assert r.status(Kind.DATAMAP) == "disproved" and differs, r.explain()
    assert r.ok == (shape or (kind == "serial" and first == "write"))
