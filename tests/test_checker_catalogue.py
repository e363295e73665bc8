"""A catalogue of illegal transforms and programs, each disproved with a witness, and their legal twins.

Each illegal case asserts the obligation that fails, the witness it gives, and (where the
interpreter can show it) that the witness replays: the outputs before and after differ, or
the interpreter raises the error. Each legal twin differs from its illegal case in one
detail and is proved in every obligation.
"""
from __future__ import annotations

import pytest

import examples
import tilecert as tc
from tilecert.checker import check_program, check_transform
from tilecert.semantics.errors import TilecertError
from tilecert.semantics.index import IConst, ibin
from tilecert.semantics.transform import Piece, Tau

from test_checker_programs import (accum, add, assign, barrier, decl, guard, ld, lit, loop, lt, mul, plus, program,
                                   retyped, sub, tensor, transform, v)


def status(report, kind):
    return report.status(kind)


def check_all_proved(report):
    bad = [(r.subject, r.kind, r.status, r.verdict.reason) for r in report if r.status != "proved"]
    assert not bad, bad


# ----------------------------------------------------------------------------- interchange across (1, -1)
def stencil(read_j_offset: int):
    # for i in [1, N): for j in [0, N - 1): A[i, j] = A[i - 1, j + d] + 1
    return program("stencil", ("N",), [tensor("A", ("N", "N"))],
                   loop(0, "i", sub("N", 1), loop(1, "j", sub("N", 1),
                        assign("A", (v(0), v(1)), plus(ld("A", sub(v(0), 1), add(v(1), read_j_offset)), lit(1)))),
                        start=1))


def test_interchange_across_a_1_minus_1_dependence_is_disproved():
    p = stencil(1)
    t = transform(p, "swap", "i", "j")
    r = check_transform(p, t.program, t.tau, datamaps=t.datamaps)
    assert status(r, "dependence") == "disproved"
    assert status(r, "coverage") == "proved"
    w = r.verdicts("dependence")[0].witness
    assert "opposite order" in w.summary and w.cell.startswith("A[")
    assert len(w.instances) == 4
    assert w.replay.startswith("CONFIRMED"), w.replay


def test_interchange_across_a_1_0_dependence_is_proved():
    p = stencil(0)
    t = transform(p, "swap", "i", "j")
    check_all_proved(check_transform(p, t.program, t.tau, datamaps=t.datamaps))


# ----------------------------------------------------------------------------- parallel over a scalar reduction
def reduction(cell_per_iteration: bool):
    target = (v(0),) if cell_per_iteration else (0,)
    return program("red", ("N",), [tensor("S", ("N",)), tensor("X", ("N",), written=False)],
                   loop(0, "r", "N", accum("S", target, ld("X", v(0))), kind="reduce"))


def test_parallel_loop_over_a_scalar_reduction_is_disproved():
    p = reduction(False)
    new = retyped(p, "r", kind="parallel")  # parallelize without privatization
    r = check_transform(p, new, Tau())
    assert status(r, "noninterference") == "disproved"
    assert status(r, "dependence") == "proved"  # the updates commute for reordering...
    w = r.verdicts("noninterference")[0].witness
    assert w.cell == "S[0]" and "update" in w.summary
    assert w.replay.startswith("CONFIRMED") and "NoninterferenceError" in w.replay  # ...but not for parallelization


def test_binding_a_reduction_over_distinct_cells_to_cores_is_proved():
    p = reduction(True)
    t = transform(p, "bind", "r", "core")
    check_all_proved(check_transform(p, t.program, t.tau, datamaps=t.datamaps))


def test_ordered_reduction_updates_do_not_commute():
    # reversing a fold reorders its updates: legal for unordered_tree, not for fold_left
    def folded(index, policy):
        return program("red", ("N",), [tensor("S", ("N",)), tensor("X", ("N",), written=False)],
                       loop(0, "r", "N", accum("S", (0,), ld("X", index), policy=policy), kind="reduce"))

    rev = sub(sub("N", 1), v(0))
    tau = Tau((Piece(((0, rev),)),))
    r = check_transform(folded(v(0), "fold_left"), folded(rev, "fold_left"), tau)
    assert status(r, "dependence") == "disproved" and status(r, "coverage") == "proved"
    check_all_proved(check_transform(folded(v(0), "unordered_tree"), folded(rev, "unordered_tree"), tau))


# ----------------------------------------------------------------------------- barriers
def block_kernel(guarded_by_thread: bool):
    cond = lt(v(1), 16) if guarded_by_thread else lt(v(0), 2)
    return program("bar", ("G",), [tensor("A", (mul("G", 32),))],
                   loop(0, "g", "G", loop(1, "t", 32,
                        assign("A", (add(mul(v(0), 32), v(1)),), lit(1)),
                        guard(cond, barrier()), kind="parallel", binding="block0"), kind="parallel", binding="grid0"))


def test_barrier_under_a_thread_dependent_guard_is_disproved():
    r = check_program(block_kernel(True))
    assert status(r, "barrier_uniform") == "disproved"
    w = r.verdicts("barrier_uniform")[0].witness
    assert "t=16" in w.summary
    assert w.replay.startswith("CONFIRMED") and "barrier" in w.replay


def test_barrier_under_a_block_uniform_guard_is_proved():
    check_all_proved(check_program(block_kernel(False)))


def test_barrier_under_a_guard_only_some_lanes_of_a_partial_warp_pass_is_disproved():
    # 64 threads as 2 warps of 32 lanes; the guard keeps threads < 48: warp 1 is partial
    body = loop(1, "w", 2, loop(2, "l", 32, guard(lt(add(mul(v(1), 32), v(2)), 48), barrier()),
                                kind="parallel", binding="lane"), kind="parallel", binding="warp")
    p = program("partial", ("G",), [tensor("A", ("G",))], loop(0, "g", "G", body, kind="parallel", binding="grid0"))
    r = check_program(p)
    assert status(r, "barrier_uniform") == "disproved"
    assert "w=1, l=16" in r.verdicts("barrier_uniform")[0].witness.summary


def shared_exchange(with_barrier: bool):
    # each block stages A into shared memory, then thread t reads the cell thread 31 - t wrote
    inner = [assign("sh", (v(1),), ld("A", add(mul(v(0), 32), v(1))))]
    if with_barrier:
        inner.append(barrier())
    inner.append(assign("B", (add(mul(v(0), 32), v(1)),), ld("sh", sub(31, v(1)))))
    return program("xchg", ("G",), [tensor("A", (mul("G", 32),), written=False), tensor("B", (mul("G", 32),))],
                   loop(0, "g", "G", decl("sh", (32,), "shared"),
                        loop(1, "t", 32, *inner, kind="parallel", binding="block0"), kind="parallel", binding="grid0"))


def test_missing_barrier_between_a_shared_write_and_another_threads_read_is_disproved():
    r = check_program(shared_exchange(False))
    assert status(r, "noninterference") == "disproved"
    w = r.verdicts("noninterference")[0].witness
    assert w.cell.startswith("sh[") and "block0" in w.summary


def test_barrier_between_shared_write_and_read_is_proved():
    check_all_proved(check_program(shared_exchange(True)))


def test_fusing_two_thread_loops_needs_the_barrier():
    # before: the staging loop and the reading loop are sibling thread loops (the end of a thread loop
    # synchronizes the block); after: one thread loop, with or without a barrier between the statements
    before = program("xchg", ("G",), [tensor("A", (mul("G", 32),), written=False), tensor("B", (mul("G", 32),))],
                     loop(0, "g", "G", decl("sh", (32,), "shared"),
                          loop(1, "t", 32, assign("sh", (v(1),), ld("A", add(mul(v(0), 32), v(1)))),
                               kind="parallel", binding="block0"),
                          loop(2, "u", 32, assign("B", (add(mul(v(0), 32), v(2)),), ld("sh", sub(31, v(2)))),
                               kind="parallel", binding="block0"), kind="parallel", binding="grid0"))
    tau = Tau((Piece(((2, v(1)),)),))
    bad = check_transform(before, shared_exchange(False), tau)
    assert status(bad, "dependence") == "disproved"
    assert status(bad, "noninterference") == "disproved"
    check_all_proved(check_transform(before, shared_exchange(True), tau))


# ----------------------------------------------------------------------------- triangular nests
def triangle(read: tuple):
    # for i in [1, N): for j in [0, i): A[i, j] = A[read] + 1
    return program("tri", ("N",), [tensor("A", ("N", "N"))],
                   loop(0, "i", sub("N", 1),
                        loop(1, "j", v(0), assign("A", (v(0), v(1)), plus(ld("A", *read), lit(1)))),
                        start=1))


def interchanged(read: tuple, header_exchange: bool = False):
    body = assign("A", (v(0), v(1)), plus(ld("A", *read), lit(1)))
    if header_exchange:  # the naive swap: headers exchanged, the inner bound still reads the (now inner) i
        return program("tri", ("N",), [tensor("A", ("N", "N"))],
                       loop(1, "j", v(0), loop(0, "i", sub("N", 1), body, start=1)))
    return program("tri", ("N",), [tensor("A", ("N", "N"))],
                   loop(1, "j", sub("N", 1), loop(0, "i", sub(sub("N", 1), v(1)), body, start=add(v(1), 1))))


def test_reorder_op_refuses_a_bound_that_reads_the_outer_loop():
    with pytest.raises(TilecertError, match="cannot move outside"):
        transform(triangle((sub(v(0), 1), v(1))), "swap", "i", "j")


def test_reorder_keeping_a_bound_that_reads_the_outer_loop_is_disproved():
    read = (sub(v(0), 1), v(1))
    r = check_transform(triangle(read), interchanged(read, header_exchange=True), Tau())
    assert status(r, "coverage") == "disproved"
    assert "no enclosing loop binds" in r.verdicts("coverage")[0].witness.summary
    assert status(r, "dependence") == "unknown"


def test_triangular_interchange_across_a_1_minus_1_dependence_is_disproved():
    read = (sub(v(0), 1), add(v(1), 1))
    r = check_transform(triangle(read), interchanged(read), Tau())
    assert status(r, "coverage") == "proved"  # the bounds are rewritten exactly...
    assert status(r, "dependence") == "disproved"  # ...but the (1, -1) dependence is reversed
    assert r.verdicts("dependence")[0].witness.replay.startswith("CONFIRMED")


def test_triangular_interchange_with_exact_bounds_is_proved():
    read = (sub(v(0), 1), v(1))
    check_all_proved(check_transform(triangle(read), interchanged(read), Tau()))


# ----------------------------------------------------------------------------- binding a reduction loop to threads
def gemm_schedule():
    return tc.schedule(examples.EXAMPLES["gemm_i32"].kernel, M=8, N=8, K=8, bm=4, bn=4, bk=4)


def test_binding_a_reduction_loop_to_threads_is_disproved():
    s = gemm_schedule()
    s.bind("acc.mma.K", "lane")
    r = s.check()
    assert r.status("noninterference", "op 0: bind(loop='acc.mma.K', kind='lane')") == "disproved"
    w = r.verdicts("noninterference")[-1].witness
    assert "acc.mma.K" in w.summary and w.cell.startswith("acc[")


def test_binding_an_output_loop_to_threads_is_proved():
    s = gemm_schedule()
    s.bind("acc.mma.p0", "lane")
    check_all_proved(s.check())


# ----------------------------------------------------------------------------- a 3-deep nest: "<=" is not "<"
def nest3(carried_by_i: bool):
    # B[i + d, j, k] = B[i, k, j] + 1 over i, j, k in [0, N); d = 1: every dependence is carried by i
    # (direction (<, *, *)); d = 0: direction (=, <, >) exists, and swapping j and k reverses it
    d = 1 if carried_by_i else 0
    return program("n3", ("N",), [tensor("B", (add("N", 1), "N", "N"))],
                   loop(0, "i", "N", loop(1, "j", "N", loop(2, "k", "N",
                        assign("B", (add(v(0), d), v(1), v(2)), plus(ld("B", v(0), v(2), v(1)), lit(1)))))))


def test_swapping_inner_loops_under_a_le_direction_is_disproved():
    p = nest3(False)
    t = transform(p, "swap", "j", "k")
    r = check_transform(p, t.program, t.tau, datamaps=t.datamaps)
    assert status(r, "dependence") == "disproved"
    w = r.verdicts("dependence")[0].witness
    coords = [dict(i.coords) for i in w.instances[:2]]
    assert coords[0]["i"] == coords[1]["i"]  # the "=" part of "<=" in i
    assert w.replay.startswith("CONFIRMED")


def test_swapping_inner_loops_under_a_lt_direction_is_proved():
    p = nest3(True)
    t = transform(p, "swap", "j", "k")
    check_all_proved(check_transform(p, t.program, t.tau, datamaps=t.datamaps))


# ----------------------------------------------------------------------------- prefix cut: flattening across an owner
def owner_nest(flat: bool):
    # for i in [0, 3) (parallel, owns t): for j in [0, 2): t[j] = X[i, j]; for j2 in [0, 2): Y[i, j2] = t[j2]
    tensors = [tensor("X", (3, 2), written=False), tensor("Y", (3, 2))]
    if not flat:
        return program("own", (), tensors, loop(0, "i", 3, decl("t", (2,)),
                       loop(1, "j", 2, assign("t", (v(1),), ld("X", v(0), v(1)))),
                       loop(2, "j2", 2, assign("Y", (v(0), v(2)), ld("t", v(2)))), kind="parallel"))
    f1 = add(mul(3, v(10)), v(11))
    f2 = add(mul(3, v(10)), v(12))
    i1, j1 = ibin("floordiv", f1, IConst(2)), ibin("mod", f1, IConst(2))
    i2, j2 = ibin("floordiv", f2, IConst(2)), ibin("mod", f2, IConst(2))
    new = program("own", (), tensors, loop(10, "a", 2, decl("t", (2,)),
                  loop(11, "b", 3, assign("t", (j1,), ld("X", i1, j1))),
                  loop(12, "b2", 3, assign("Y", (i2, j2), ld("t", j2))), kind="parallel"))
    return new, Tau((Piece(((0, i1), (1, j1))), Piece(((0, i2), (2, j2)))))


def test_flat_bijection_across_an_owned_cut_is_disproved_with_two_prefixes():
    new, tau = owner_nest(True)
    r = check_transform(owner_nest(False), new, tau)
    assert status(r, "prefix_cut") == "disproved"
    w = r.verdicts("prefix_cut")[0].witness
    assert "both claim the old allocation" in w.summary
    assert "t(a=0)" in w.summary and "t(a=1)" in w.summary and w.cell == "t(i=1)"


def test_splitting_the_owner_loop_keeps_the_cut():
    p = owner_nest(False)
    t = transform(p, "split", "i", 2)
    check_all_proved(check_transform(p, t.program, t.tau, datamaps=t.datamaps))


def test_an_allocation_of_negative_extent_is_disproved_with_the_sizes_as_witness():
    # nothing accesses the buffer, yet at N = 0 it has extent -1: the allocation itself has no meaning
    p = program("neg", ("N",), [tensor("Y", ("N",))], decl("t", (sub("N", 1),)),
                loop(0, "i", "N", assign("Y", (v(0),), lit(1)), kind="parallel"))
    r = check_program(p)
    (w,) = [v.witness for v in r.verdicts("bounds")]
    assert status(r, "bounds") == "disproved" and "negative extent" in w.summary and dict(w.sizes) == {"N": 0}
    assert w.replay.startswith("CONFIRMED") and "negative extent" in w.replay, w.replay  # the interpreter refuses it
    assert status(check_program(p, {"N": 1}), "bounds") == "proved"
