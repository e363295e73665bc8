"""Attacks on the op-to-checker contract: declared datamaps (``Copy``, ``Forward``, ``Ring``) that lie about
the program, and lowerings that compute something else, each checked never to be PROVED.

Every attack is confirmed on the interpreters: where the checker disproves, its witness replays as a
wrong value or a failure of the transformed program. A test marked ``xfail(strict=True)`` is a soundness
hole: the checker (or the lowering validation) proves a program the interpreter shows to be wrong.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import tilecert as tc
import test_checker_programs as P
from examples import EXAMPLES
from tilecert.checker import check_transform
from tilecert.checker.replay import replay_transform
from tilecert.lowering import lower, validate
from tilecert.lowering.loop_form import loop_form
from tilecert.lowering.program import Alloc
from tilecert.semantics import loopir as L
from tilecert.semantics.index import IConst, IVar, ibin
from tilecert.semantics.loopinterp import interpret_loops
from tilecert.semantics.transform import Copy, Forward, Kind, Live, Ring, Tau

from test_checker_programs import add, assign, decl, guard, ld, lit, loop, lt, plus, program, tensor, times, v

TRANSFORM = (Kind.COVERAGE, Kind.PREFIX_CUT, Kind.DEPENDENCE)


def _check(before, after, datamaps):
    return check_transform(before, after, Tau(), None, datamaps=datamaps, final=False)


def _differ(before, after, sizes):
    """The interpreters show ``after`` computes something else than ``before`` (or fails) at ``sizes``."""
    return replay_transform(before, after, sizes).startswith("CONFIRMED")


def _datamap_disproved_and_replayed(r):
    (d,) = r.verdicts(Kind.DATAMAP)
    assert d.status == "disproved", r.explain()
    if d.witness.instances:  # a point of the engine (a structural refusal has none to replay)
        assert d.witness.replay.startswith("CONFIRMED"), d.witness.lines()
    assert all(r.status(k) == "unknown" for k in TRANSFORM), r.explain()
    assert not r.ok
    return d


def _every_disproved_witness_replays(r):
    for res in r:
        w = res.verdict.witness
        if res.verdict.status == "disproved" and w is not None and w.instances:
            assert w.replay.startswith("CONFIRMED"), (res.kind, w.lines())


# ============================================================================ Copy
def _staged_update(order="load,use,store", store_shift=False):
    """``for j in [0, M): a[j] = a[j] + 1`` against the same through a tile ``s`` (load, update, store-back)."""
    tensors = [tensor("a", ("M",)), tensor("out", ("M",))]
    before = program("c", ("M",), tensors, loop(1, "j", "M", assign("a", (v(1),), plus(ld("a", v(1)), lit(1)))))
    load = assign("s", (v(2),), ld("a", v(2)))
    cell = ibin("mod", add(v(3), 1), IConst(4)) if store_shift else v(3)
    store = assign("a", (cell,), ld("s", v(3)))
    parts = {"load": loop(2, "u", "M", load),
             "use": loop(1, "j", "M", assign("s", (v(1),), plus(ld("s", v(1)), lit(1)))),
             "store": loop(3, "w", "M", store)}
    after = program("c", ("M",), tensors, decl("s", ("M",)), *(parts[k] for k in order.split(",")))
    return before, after, load, store


def test_a_copy_with_store_back_is_proved():
    before, after, load, store = _staged_update()
    r = _check(before, after, (Copy("s", "a", (2,), (v(2),), Live(load, store)),))
    assert r.ok, r.explain()


def test_a_store_back_to_another_cell_is_disproved():
    before, after, load, store = _staged_update(store_shift=True)
    assert _differ(before, after, {"M": 4})
    r = _check(before, after, (Copy("s", "a", (2,), (v(2),), Live(load, store)),))
    _datamap_disproved_and_replayed(r)
    _every_disproved_witness_replays(r)


def test_a_written_copy_declared_read_only_is_refused():
    before, after, load, _ = _staged_update(order="load,use")
    assert _differ(before, after, {"M": 2})
    r = _check(before, after, (Copy("s", "a", (2,), (v(2),), Live(load)),))
    d = _datamap_disproved_and_replayed(r)
    assert "is written by" in d.witness.summary


def test_a_use_after_the_store_back_is_disproved():
    before, after, load, store = _staged_update(order="load,store,use")
    assert _differ(before, after, {"M": 2})
    r = _check(before, after, (Copy("s", "a", (2,), (v(2),), Live(load, store)),))
    d = _datamap_disproved_and_replayed(r)
    assert "outside its live range" in d.witness.summary


def test_a_declared_transfer_that_is_not_in_the_program_leaves_it_unknown():
    """An equal node that is not the program's own (statements are named by identity)."""
    before, after, load, store = _staged_update()
    twin = assign("s", (v(2),), ld("a", v(2)))
    assert twin == load and twin is not load
    r = _check(before, after, (Copy("s", "a", (2,), (v(2),), Live(twin, store)),))
    assert r.status(Kind.DATAMAP) == "unknown" and not r.ok


def _read_only():
    tensors = [tensor("a", ("M",)), tensor("out", ("M",))]
    before = program("c", ("M",), tensors, loop(1, "j", "M", assign("out", (v(1),), ld("a", v(1)))))
    load = assign("s", (v(2),), ld("a", v(2)))
    after = program("c", ("M",), tensors, decl("s", ("M",)), loop(2, "u", "M", load),
                    loop(1, "j", "M", assign("out", (v(1),), ld("s", v(1)))))
    return before, after, load


@pytest.mark.parametrize("axes,cell", [((2,), (v(7),)), ((), (v(2),))], ids=["free-variable", "no-axes"])
def test_a_cell_map_over_variables_the_load_does_not_bind_is_never_proved(axes, cell):
    before, after, load = _read_only()
    r = _check(before, after, (Copy("s", "a", axes, cell, Live(load)),))
    assert r.status(Kind.DATAMAP) in ("unknown", "disproved") and not r.ok
    assert all(r.status(k) != "proved" for k in TRANSFORM)


def test_a_cell_map_off_by_one_is_disproved():
    before, after, load = _read_only()
    r = _check(before, after, (Copy("s", "a", (2,), (add(v(2), 1),), Live(load)),))
    (d,) = r.verdicts(Kind.DATAMAP)
    assert d.status == "disproved" and not r.ok


# ============================================================================ Forward
def _forward_program(reader_first: bool):
    tensors = [tensor("X", ("N",), written=False), tensor("Y", ("N",))]
    before = program("f", ("N",), tensors, loop(0, "i", "N", assign("Y", (v(0),), ld("X", v(0)))))
    w = assign("t", (), ld("X", v(0)))
    if reader_first:  # iteration i > 0 reads t before its store: the value of iteration i - 1
        body = (guard(lt(0, v(0)), assign("Y", (v(0),), ld("t"))), w,
                guard(lt(v(0), 1), assign("Y", (v(0),), ld("t"))))
    else:
        body = (w, assign("Y", (v(0),), ld("t")))
    return before, program("f", ("N",), tensors, decl("t", ()), loop(0, "i", "N", *body))


def test_a_forward_read_before_its_store_on_some_iteration_is_disproved():
    before, after = _forward_program(reader_first=True)
    assert _differ(before, after, {"N": 3})
    r = _check(before, after, (Forward("t", ld("X", v(0))),))
    _datamap_disproved_and_replayed(r)
    _every_disproved_witness_replays(r)


def test_a_forward_declared_with_another_expression_is_refused():
    before, after = _forward_program(reader_first=False)
    r = _check(before, after, (Forward("t", ld("X", add(v(0), 1))),))
    assert r.status(Kind.DATAMAP) == "disproved" and not r.ok


def test_a_forward_whose_input_changes_between_store_and_read_is_disproved():
    tensors = [tensor("X", ("N",)), tensor("Y", ("N",))]
    before = program("f", ("N",), tensors, loop(0, "i", "N", assign("X", (v(0),), lit(5)),
                                                assign("Y", (v(0),), ld("X", v(0)))))
    w = assign("t", (), ld("X", v(0)))
    after = program("f", ("N",), tensors, decl("t", ()),
                    loop(0, "i", "N", w, assign("X", (v(0),), lit(5)), assign("Y", (v(0),), ld("t"))))
    assert _differ(before, after, {"N": 2})
    r = _check(before, after, (Forward("t", ld("X", v(0))),))
    _datamap_disproved_and_replayed(r)


def test_a_forward_shared_by_the_threads_of_a_parallel_loop_is_a_disproved_race():
    tensors = [tensor("X", ("N",), written=False), tensor("Y", ("N",))]
    before = program("f", ("N",), tensors, loop(0, "i", "N", assign("Y", (v(0),), ld("X", v(0))), kind="parallel"))
    after = program("f", ("N",), tensors, decl("t", ()),
                    loop(0, "i", "N", assign("t", (), ld("X", v(0))), assign("Y", (v(0),), ld("t")), kind="parallel"))
    r = _check(before, after, (Forward("t", ld("X", v(0))),))
    assert r.status(Kind.NONINTERFERENCE) == "disproved" and not r.ok
    _every_disproved_witness_replays(r)


# ============================================================================ Ring
def test_a_ring_whose_slot_map_leaves_the_buffer_is_a_disproved_bounds_verdict():
    """``buf[k] = a[k]`` on a 2-slot ring, declared with slot ``k`` (no wrap-around): every declaration
    condition holds, the transformed program writes past its ring."""
    K = 99
    tensors = [tensor("a", ("N",), written=False), tensor("out", ("N",))]
    plain = program("ring", ("N",), tensors, loop(0, "k", "N", assign("out", (v(0),), times(ld("a", v(0)), lit(2)))))
    fill = assign("buf", (v(0),), ld("a", v(0)))
    use = assign("out", (v(0),), times(ld("buf", v(0)), lit(2)))
    after = program("ring", ("N",), tensors, decl("buf", (2,)), loop(0, "k", "N", fill, use))
    ring = Ring("buf", "a", 2, K, IVar(K, 0), (), (IVar(K, 0),), ((fill, v(0)),), ((use, v(0)),))
    assert _differ(plain, after, {"N": 3})
    r = _check(plain, after, (ring,))
    assert r.status(Kind.BOUNDS) == "disproved" and not r.ok
    _every_disproved_witness_replays(r)


# ============================================================================ lowering
def _swap_init_and_accumulation(lp):
    """The lowering with the zero-initialisation of the accumulator moved after the accumulation loop (the
    block ``alloc t0; init; k-loop; store`` becomes ``alloc t0; k-loop; init; store``)."""
    def swap(body):
        out = [dataclasses.replace(n, body=swap(n.body)) if hasattr(n, "body") else n for n in body]
        if len(out) == 4 and isinstance(out[0], Alloc):
            out = [out[0], out[2], out[1], out[3]]
        return tuple(out)

    return dataclasses.replace(lp, body=swap(lp.body))


def test_the_reordered_lowering_computes_something_else():
    s = tc.schedule(EXAMPLES["gemm"].kernel, M=2, N=2, K=2)
    bad = _swap_init_and_accumulation(lower(s.program, s.sizes))
    assert bad != lower(s.program, s.sizes)
    want, got = (P.run(q, s.sizes, seed=3) for q in (s.program, loop_form(bad).program))
    assert not np.array_equal(want["C"], got["C"]) and not got["C"].any()  # C is all zeros


@pytest.mark.xfail(strict=True, reason="hole: lowering validation checks coverage and bounds only, never the "
                                       "order of dependent lowered statements; a reordered lowering is proved")
def test_a_lowering_that_reorders_dependent_statements_is_not_proved():
    s = tc.schedule(EXAMPLES["gemm"].kernel, M=2, N=2, K=2)
    bad = _swap_init_and_accumulation(lower(s.program, s.sizes))
    report = validate(s.program, bad, s.sizes)
    assert not report.ok, report.explain()



# ============================================================================ names resolved by scope
def test_a_forward_named_like_a_tensor_is_not_proved():
    """``Y[0] = X[0] + 1; { local X; X = 7; Y[1] = X }`` declared ``Forward(X, 7)``: inlining by name also
    rewrites the read of tensor ``X`` outside the local's scope, so another program is compared."""
    tensors = [tensor("X", (1,), written=False), tensor("Y", (2,))]
    before = program("f", (), tensors, assign("Y", (0,), plus(lit(7), lit(1))), assign("Y", (1,), lit(7)))
    after = program("f", (), tensors, assign("Y", (0,), plus(ld("X", 0), lit(1))),
                    guard(IConst(1), decl("X", ()), assign("X", (), lit(7)), assign("Y", (1,), ld("X"))))
    assert _differ(before, after, {})
    r = _check(before, after, (Forward("X", lit(7)),))
    _every_disproved_witness_replays(r)
    assert not r.ok and r.status(Kind.COVERAGE) != "proved", r.explain()


def test_a_forward_whose_operand_is_shadowed_at_the_reader_is_not_proved():
    """``t = X[0]; { local X[1]; X[0] = 5; Y[0] = t }``: inlined, ``Y[0]`` reads the local ``X`` (5), while
    the program reads tensor ``X``."""
    tensors = [tensor("X", (1,), written=False), tensor("Y", (1,))]
    shadow = (decl("X", (1,)), assign("X", (0,), lit(5)))
    before = program("f", (), tensors, guard(IConst(1), *shadow, assign("Y", (0,), ld("X", 0))))
    after = program("f", (), tensors, decl("t", ()), assign("t", (), ld("X", 0)),
                    guard(IConst(1), *shadow, assign("Y", (0,), ld("t"))))
    assert _differ(before, after, {})
    r = _check(before, after, (Forward("t", ld("X", 0)),))
    _every_disproved_witness_replays(r)
    assert not r.ok and r.status(Kind.COVERAGE) != "proved", r.explain()


def _ring_with_shadowed_source():
    """``buf[0] = a[k]`` (tensor ``a``), then ``{ local a[N]; a[k] = 5; out[k] = buf[0] * 2 }``: the restored
    use reads ``a[k]`` by name, inside the scope of the local ``a``."""
    K = 99
    tensors = [tensor("a", ("N",), written=False), tensor("out", ("N",))]
    shadow = (decl("a", ("N",)), assign("a", (v(0),), lit(5)))
    before = program("r", ("N",), tensors, loop(0, "k", "N", guard(
        IConst(1), *shadow, assign("out", (v(0),), times(ld("a", v(0)), lit(2))))))
    slot = ibin("mod", v(0), IConst(1))
    fill = assign("buf", (slot,), ld("a", v(0)))
    use = assign("out", (v(0),), times(ld("buf", slot), lit(2)))
    after = program("r", ("N",), tensors, decl("buf", (1,)),
                    loop(0, "k", "N", fill, guard(IConst(1), *shadow, use)))
    ring = Ring("buf", "a", 1, K, ibin("mod", IVar(K, 0), IConst(1)), (), (IVar(K, 0),), ((fill, v(0)),),
                ((use, v(0)),))
    return before, after, ring


def test_a_ring_whose_source_is_shadowed_at_the_use_is_not_proved():
    before, after, ring = _ring_with_shadowed_source()
    assert _differ(before, after, {"N": 2})
    r = _check(before, after, (ring,))
    _every_disproved_witness_replays(r)
    assert not r.ok and r.status(Kind.COVERAGE) != "proved", r.explain()


def test_a_copy_whose_source_is_shadowed_at_the_user_is_not_proved():
    """The same attack on a ``Copy``: ``tile_from`` refuses a source whose name is declared twice."""
    tensors = [tensor("a", ("M",), written=False), tensor("out", ("M",))]
    load = assign("s", (v(2),), ld("a", v(2)))
    shadow = (decl("a", ("M",)), loop(1, "j", "M", assign("a", (v(1),), lit(5))))
    before = program("c", ("M",), tensors, guard(IConst(1), *shadow,
                                                 loop(1, "j", "M", assign("out", (v(1),), ld("a", v(1))))))
    after = program("c", ("M",), tensors, decl("s", ("M",)), loop(2, "u", "M", load),
                    guard(IConst(1), *shadow, loop(1, "j", "M", assign("out", (v(1),), ld("s", v(1))))))
    assert _differ(before, after, {"M": 2})
    r = _check(before, after, (Copy("s", "a", (2,), (v(2),), Live(load)),))
    assert r.status(Kind.DATAMAP) == "unknown" and not r.ok
    assert all(r.status(k) != "proved" for k in TRANSFORM)


# ============================================================================ cell maps over variables rebound at the use
def test_a_ring_cell_map_over_a_variable_the_use_rebinds_is_not_proved():
    """``for p (i1): buf[p mod 2] = a[p]; for k (i0): for q (i1) in [0, 1): out[k] = buf[k mod 2] * 2`` with
    ``cell = (i1,)``: at each fill ``i1`` is ``p`` (the version), at the use ``q`` (always 0); restored,
    ``out[k]`` reads ``a[0]`` as the old program does, while the program reads ``a[k]``."""
    K = 99
    tensors = [tensor("a", (2,), written=False), tensor("out", (2,))]
    before = program("r", (), tensors,
                     loop(0, "k", 2, loop(1, "q", 1, assign("out", (v(0),), times(ld("a", v(1)), lit(2))))))

    def slot(e):
        return ibin("mod", e, IConst(2))

    fill = assign("buf", (slot(v(1)),), ld("a", v(1)))
    use = assign("out", (v(0),), times(ld("buf", slot(v(0))), lit(2)))
    after = program("r", (), tensors, decl("buf", (2,)), loop(1, "p", 2, fill), loop(0, "k", 2, loop(1, "q", 1, use)))
    ring = Ring("buf", "a", 2, K, slot(IVar(K, 0)), (), (v(1),), ((fill, v(1)),), ((use, v(0)),))
    assert _differ(before, after, {})
    r = _check(before, after, (ring,))
    _every_disproved_witness_replays(r)
    assert not r.ok and r.status(Kind.COVERAGE) != "proved", r.explain()


def test_a_copy_cell_map_over_a_variable_outside_its_axes_is_not_proved():
    """``for u (i2): s[u] = a[u]; for j (i2): out[j] = s[0]`` declared ``Copy(s, a, axes=(i5,), cell=(i2,))``:
    condition (0) reads the load ``a[u]`` as ``a[i2]``, true; restored, ``out[j]`` reads ``a[j]`` (the old
    program), while the program reads ``a[0]``."""
    tensors = [tensor("a", ("M",), written=False), tensor("out", ("M",))]
    before = program("c", ("M",), tensors, loop(2, "j", "M", assign("out", (v(2),), ld("a", v(2)))))
    load = assign("s", (v(2),), ld("a", v(2)))
    after = program("c", ("M",), tensors, decl("s", ("M",)), loop(2, "u", "M", load),
                    loop(2, "j", "M", assign("out", (v(2),), ld("s", 0))))
    assert _differ(before, after, {"M": 2})
    r = _check(before, after, (Copy("s", "a", (5,), (v(2),), Live(load)),))
    _every_disproved_witness_replays(r)
    assert not r.ok and r.status(Kind.COVERAGE) != "proved", r.explain()


# ============================================================================ narrowing stores
def _run_one(p, sizes, arrays):
    arrays = {k: a.copy() for k, a in arrays.items()}
    interpret_loops(p, sizes, arrays, checked=True)
    return {n: arrays[n] for n in p.outputs}


def _forward_into(dtype):
    tensors = [tensor("X", (1,), written=False), tensor("Y", (1,))]
    before = program("f", (), tensors, assign("Y", (0,), ld("X", 0)))
    after = program("f", (), tensors, decl("t", (), dtype=dtype), assign("t", (), ld("X", 0)),
                    assign("Y", (0,), L.Ld("t", (), dtype)))
    return before, after


def test_a_forward_into_a_narrower_dtype_is_not_proved():
    before, after = _forward_into("i8")
    arrays = {"X": np.array([1000], dtype=np.int32), "Y": np.zeros(1, dtype=np.int32)}
    assert _run_one(before, {}, arrays)["Y"][0] == 1000 and _run_one(after, {}, arrays)["Y"][0] == -24
    r = _check(before, after, (Forward("t", ld("X", 0)),))
    assert not r.ok and r.status(Kind.COVERAGE) != "proved", r.explain()


def test_a_ring_of_a_narrower_dtype_is_not_proved():
    """The same narrowing through a one-slot ring: its fill stores an i32 value into the i8 ring, which
    restoring would drop, so the declaration is unknown and nothing is compared."""
    K = 99
    tensors = [tensor("a", ("N",), written=False), tensor("out", ("N",))]
    plain = program("ring", ("N",), tensors, loop(0, "k", "N", assign("out", (v(0),), ld("a", v(0)))))
    slot = ibin("mod", v(0), IConst(1))
    fill = assign("buf", (slot,), ld("a", v(0)))
    use = assign("out", (v(0),), L.Ld("buf", (slot,), "i8"))
    after = program("ring", ("N",), tensors, decl("buf", (1,), dtype="i8"), loop(0, "k", "N", fill, use))
    ring = Ring("buf", "a", 1, K, ibin("mod", IVar(K, 0), IConst(1)), (), (IVar(K, 0),), ((fill, v(0)),),
                ((use, v(0)),))
    arrays = {"a": np.array([1000, 3], dtype=np.int32), "out": np.zeros(2, dtype=np.int32)}
    assert list(_run_one(after, {"N": 2}, arrays)["out"]) == [-24, 3]
    r = _check(plain, after, (ring,))
    assert r.status(Kind.DATAMAP) == "unknown" and "restored, the conversion would be lost" in r.explain()
    assert not r.ok and all(r.status(k) == "unknown" for k in TRANSFORM), r.explain()


# ============================================================================ a schedule whose op lies
@pytest.mark.parametrize("lie", ["other-expression", "none", "other-name"])
def test_a_schedule_op_whose_datamaps_lie_is_not_proved(lie):
    """A hand-built ``Transformed`` in a schedule's history: the CSE temporary of a materialized unroll
    declared with another expression, not declared, or declared under another name."""
    from test_sched_hw_ops import make
    s, _ = make("broadcast", N=8)
    s.unroll("add.add.N", materialize=True)
    t = s.transforms[-1]
    (fwd,) = t.datamaps
    datamaps = {"other-expression": (Forward(fwd.buffer, L.Lit(0, "i32")),), "none": (),
                "other-name": (Forward(fwd.buffer + "_x", fwd.expression),)}[lie]
    s.transforms[-1] = dataclasses.replace(t, datamaps=datamaps)
    r = s.check()
    subject = list(r.contract())[-1]
    mine = {res.kind: res.status for res in r if res.subject == subject}
    assert all(mine[k] == "unknown" for k in TRANSFORM) and not r.ok
    assert mine.get(Kind.DATAMAP, "unknown") == ("disproved" if lie == "other-expression" else "unknown")
    _every_disproved_witness_replays(r)


# ============================================================================ loop variables rebound by an inner loop
def test_nested_loops_of_one_variable_id_are_not_proved_equal_to_one_loop():
    tensors = [tensor("Y", (1,))]
    bump = assign("Y", (0,), plus(ld("Y", 0), lit(1)))
    before = program("f", ("N",), tensors, loop(0, "i", "N", loop(0, "j", "N", bump)))
    after = program("f", ("N",), tensors, loop(0, "i", "N", bump))
    assert _differ(before, after, {"N": 2})
    r = check_transform(before, after, Tau(), None, final=False)
    _every_disproved_witness_replays(r)
    assert not r.ok, r.explain()


def test_a_forward_read_under_a_loop_that_rebinds_its_variable_is_not_proved():
    """``for i (i0): t = X[i]; for j (i0): Y[j, j] = t``: inlined, ``Y[j, j]`` reads ``X[j]``."""
    tensors = [tensor("X", ("N",), written=False), tensor("Y", ("N", "N"))]
    before = program("f", ("N",), tensors,
                     loop(0, "i", "N", loop(0, "j", "N", assign("Y", (v(0), v(0)), ld("X", v(0))))))
    after = program("f", ("N",), tensors, decl("t", ()),
                    loop(0, "i", "N", assign("t", (), ld("X", v(0))),
                         loop(0, "j", "N", assign("Y", (v(0), v(0)), ld("t")))))
    assert _differ(before, after, {"N": 2})
    r = _check(before, after, (Forward("t", ld("X", v(0))),))
    _every_disproved_witness_replays(r)
    assert not r.ok and r.status(Kind.COVERAGE) != "proved", r.explain()


def test_a_copy_whose_cell_map_is_not_injective_is_disproved():
    """Two tile cells stand for ``a[0]``, each updated and stored back: the second load touches ``a[0]`` while
    the first tile cell holds it."""
    tensors = [tensor("a", (1,)), tensor("out", (1,))]
    before = program("c", (), tensors, loop(1, "j", 2, assign("a", (0,), plus(ld("a", 0), lit(1)))))
    load = assign("s", (v(2),), ld("a", 0))
    store = assign("a", (0,), ld("s", v(3)))
    after = program("c", (), tensors, decl("s", (2,)), loop(2, "u", 2, load),
                    loop(1, "j", 2, assign("s", (v(1),), plus(ld("s", v(1)), lit(1)))), loop(3, "w", 2, store))
    assert _differ(before, after, {})
    r = _check(before, after, (Copy("s", "a", (2,), (IConst(0),), Live(load, store)),))
    d = _datamap_disproved_and_replayed(r)
    assert "while s holds it" in d.witness.summary


# ============================================================================ the stated contract
def test_a_stated_datamap_nothing_decides_leaves_the_report_not_ok():
    from tilecert.semantics.transform import Obligation
    tensors = [tensor("a", ("N",), written=False), tensor("out", ("N",))]
    p = program("p", ("N",), tensors, loop(0, "k", "N", assign("out", (v(0),), times(ld("a", v(0)), lit(2)))))
    r = check_transform(p, p, Tau(), listed=(Obligation(Kind.DATAMAP, "op", "each minted buffer holds its map"),),
                        final=False)
    assert r.contract()["transform"] == {Kind.DATAMAP: "unknown"}
    assert not r.ok


# ============================================================================ the rules that close the holes
@pytest.mark.parametrize("layout,shadows", [("siblings", 0), ("nested", 1), ("redeclared", 1), ("tensor", 1)])
def test_a_declaration_shadows_only_a_name_visible_where_it_stands(layout, shadows):
    """Copies of a body (siblings) may declare one name; a declaration inside the scope of another of its
    name, a second one in the same block, or one named like a tensor is recorded."""
    from tilecert.checker.model import Model
    body = (decl("t", ()), assign("t", (), lit(1)), assign("Y", (0,), ld("t")))
    name = "Y" if layout == "tensor" else "t"
    blocks = {"siblings": (guard(IConst(1), *body), guard(IConst(1), *body)),
              "nested": (guard(IConst(1), *body, guard(IConst(1), *body)),),
              "redeclared": body + body,
              "tensor": (guard(IConst(1), decl(name, ()), assign(name, (), lit(1))),)}[layout]
    m = Model(program("s", (), [tensor("Y", (1,))], *blocks))
    assert len(m.shadows) == shadows and not m.problems
    assert all(f"declares {name}" in why for why in m.shadows)


def test_a_program_with_nested_loops_of_one_variable_id_is_refused_as_ill_formed():
    from tilecert.checker import CheckerError, check_program
    bump = assign("Y", (0,), plus(ld("Y", 0), lit(1)))
    p = program("f", ("N",), [tensor("Y", (1,))], loop(0, "i", "N", loop(0, "j", "N", bump)))
    with pytest.raises(CheckerError, match="rebinds loop variable r0"):
        check_program(p)


def test_a_ring_slot_map_over_a_variable_outside_its_declaration_is_unknown():
    """The slot map reads ``i1`` (neither the version variable nor a loop owning the ring): unknown."""
    K = 99
    tensors = [tensor("a", ("N",), written=False), tensor("out", ("N",))]
    plain = program("ring", ("N",), tensors, loop(0, "k", "N", assign("out", (v(0),), ld("a", v(0)))))
    slot = ibin("mod", v(0), IConst(1))
    fill = assign("buf", (slot,), ld("a", v(0)))
    use = assign("out", (v(0),), ld("buf", slot))
    after = program("ring", ("N",), tensors, decl("buf", (1,)), loop(0, "k", "N", fill, use))
    ring = Ring("buf", "a", 1, K, ibin("mod", IVar(1, 0), IConst(1)), (), (IVar(K, 0),), ((fill, v(0)),),
                ((use, v(0)),))
    r = _check(plain, after, (ring,))
    (d,) = r.verdicts(Kind.DATAMAP)
    assert d.status == "unknown" and "reads loop variable(s) r1, neither" in d.reason and not r.ok
    legal = dataclasses.replace(ring, slot=ibin("mod", IVar(K, 0), IConst(1)))
    assert _check(plain, after, (legal,)).ok
