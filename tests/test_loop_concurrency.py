"""Concurrency in the loop-form interpreter, and one canonical tree in the tile-level one.

Loops that run concurrently (parallel, and every hardware binding) follow the instance order,
and checked mode records their conflicts, per barrier phase for thread scopes. References are
independent: sequential numpy recurrences, numpy reversals and cumulative sums. Also here: the
loop form's meaning for masked loads from empty tensors, thread-dependent inner trip counts and
negative extents, and the tile-level interpreter's checked and unchecked runs agreeing bitwise.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import event, given, strategies as st

import tilecert as tc
from examples import EXAMPLES, output_names
from examples.gemm import gemm
from test_checker_programs import (accum, add, assign, barrier, decl, guard, ld, lit, loop, lt, mul, plus, program,
                                   sub, tensor, v)
from test_sched_random import RAGGED
from tilecert import i32, strategies
from tilecert.semantics import loopir as L
from tilecert.semantics.errors import Loc
from tilecert.semantics.index import IConst, ibin
from tilecert.semantics.sched.base import ScheduleError

ORDERS = [("canonical", 0), ("reverse", 0), ("shuffle", 1), ("shuffle", 2)]


@tc.kernel
def prefix(A: tc.Tensor[i32, "N"], B: tc.Tensor[i32, "N"]):
    """A serial prefix sum: ``B[j] = B[j - 1] + A[j]`` for j >= 1, in order."""
    N = A.shape[0]
    for i in tc.serial(N - 1):
        j = i.index() + 1
        prev = B.tile((j - 1,), (1,)).load()
        B.tile((j,), (1,)).store(prev + A.tile((j,), (1,)).load())


def prefix_inputs(n: int = 12, seed: int = 5) -> dict[str, np.ndarray]:
    a = np.random.default_rng(seed).integers(-9, 10, n).astype(np.int32)
    b = np.zeros(n, np.int32)
    b[0] = a[0]
    return {"A": a, "B": b}


def sequential_prefix(a: np.ndarray) -> np.ndarray:
    out = a.copy()
    for j in range(1, len(a)):
        out[j] = out[j - 1] + a[j]
    return out


def run(p, checked: bool = True, order: str = "canonical", seed: int = 0, **arrays):
    return tc.run(p, checked=checked, order=order, seed=seed, **{k: np.array(x) for k, x in arrays.items()})


# ----------------------------------------------------------------------------- racy bound schedules
@pytest.mark.parametrize("kind", ["core", "vector"])
def test_a_serial_prefix_sum_bound_concurrently_is_a_race(kind):
    s = tc.schedule(prefix, N=12)
    inputs = prefix_inputs()
    assert np.array_equal(s.run(**inputs)["B"], sequential_prefix(inputs["A"]))
    s.bind("i", kind)
    with pytest.raises(tc.NoninterferenceError) as err:
        s.run(**inputs)
    msg = err.value.message
    assert "concurrent i: instances (0,) and (1,) both access B[1]" in msg
    assert "instance (0,) by the write at" in msg and "instance (1,) by the read at" in msg
    assert err.value.loc.line > 0 and err.value.hint


def test_orders_change_the_result_of_a_racy_unchecked_run():
    s = tc.schedule(prefix, N=12)
    s.bind("i", "core")
    inputs = prefix_inputs()
    want = sequential_prefix(inputs["A"])
    results = {o: s.run(order=o, seed=seed, checked=False, **inputs)["B"] for o, seed in ORDERS}
    assert np.array_equal(results[("canonical")], want)  # canonical is the instances in order
    assert not np.array_equal(results["reverse"], want)
    assert any(not np.array_equal(s.run(order="shuffle", seed=k, checked=False, **inputs)["B"], want)
               for k in range(3))


def test_a_grid_whose_blocks_all_write_one_cell_is_a_race():
    body = loop(0, "g", 4, assign("B", (0,), ld("A", v(0))), kind="parallel", binding="grid0")
    p = program("grid", ("N",), [tensor("A", ("N",), written=False), tensor("B", ("N",))], body)
    a = np.arange(4, dtype=np.int32) + 10
    with pytest.raises(tc.NoninterferenceError, match=r"concurrent g: instances \(0,\) and \(1,\) both access B\[0\]"):
        run(p, A=a, B=np.zeros(4, np.int32))
    # unchecked, the instance order picks the winner
    assert run(p, False, A=a, B=np.zeros(4, np.int32))["B"][0] == 13
    assert run(p, False, "reverse", A=a, B=np.zeros(4, np.int32))["B"][0] == 10


def test_threads_of_a_two_dimensional_block_are_named_by_both_coordinates():
    body = loop(0, "ty", 2, loop(1, "tx", 3, assign("B", (v(1),), ld("A", v(0), v(1))),
                                 kind="parallel", binding="block0"), kind="parallel", binding="block1")
    p = program("blk2", (), [tensor("A", (2, 3), written=False), tensor("B", (3,))], body)
    with pytest.raises(tc.NoninterferenceError, match=r"concurrent ty, tx: instances \(0, 0\) and \(1, 0\) "
                                                      r"both access B\[0\]"):
        run(p, A=np.ones((2, 3), np.int32), B=np.zeros(3, np.int32))


def block_reversal(with_barrier: bool) -> tc.Program:
    """Per block of T threads: stage A's segment in shared memory, then read it reversed."""
    T = 4
    seg = add(mul(v(0), T), v(1))
    threads = [assign("S", (v(1),), ld("A", seg))] + ([barrier("block")] if with_barrier else []) + \
        [assign("B", (seg,), ld("S", sub(T - 1, v(1))))]
    body = loop(0, "g", 3, decl("S", (T,), "shared"), loop(1, "t", T, *threads, kind="parallel", binding="block0"),
                kind="parallel", binding="grid0")
    return program("rev", (), [tensor("A", (12,), written=False), tensor("B", (12,))], body)


def test_a_shared_memory_exchange_without_a_barrier_is_a_race():
    a = np.arange(12, dtype=np.int32)
    racy = r"concurrent g, t: instances \(0, \d\) and \(0, \d\) both access S\[0, "
    with pytest.raises(tc.NoninterferenceError, match=racy):
        run(block_reversal(False), A=a, B=np.zeros(12, np.int32))


def test_a_shared_memory_exchange_separated_by_a_block_barrier_is_not_a_conflict():
    a = np.random.default_rng(0).integers(-50, 50, 12).astype(np.int32)
    want = a.reshape(3, 4)[:, ::-1].reshape(-1)
    for o, seed in ORDERS:
        for checked in (True, False):
            assert np.array_equal(run(block_reversal(True), checked, o, seed, A=a, B=np.zeros(12, np.int32))["B"],
                                  want)


def warp_exchange(partner, scope: str) -> tc.Program:
    """Two warps of four lanes stage X in shared memory; after a ``scope`` barrier each lane reads
    the cell ``partner(w, l)`` names."""
    cell = add(mul(v(0), 4), v(1))
    lanes = loop(1, "l", 4, assign("S", (cell,), ld("X", v(0), v(1))), barrier(scope),
                 assign("Y", (v(0), v(1)), ld("S", partner(v(0), v(1)))), kind="parallel", binding="lane")
    body = [decl("S", (8,), "shared"), loop(0, "w", 2, lanes, kind="parallel", binding="warp")]
    return program("wx", (), [tensor("X", (2, 4), written=False), tensor("Y", (2, 4))], *body)


def within_warp(w, l):
    return add(mul(w, 4), sub(3, l))


def across_warps(w, l):
    return add(mul(ibin("mod", add(w, 1), IConst(2)), 4), l)


def test_a_warp_barrier_orders_the_lanes_of_one_warp_and_not_two_warps():
    x = np.arange(8, dtype=np.int32).reshape(2, 4) * 3
    out = run(warp_exchange(within_warp, "warp"), X=x, Y=np.zeros((2, 4), np.int32))
    assert np.array_equal(out["Y"], x[:, ::-1])
    with pytest.raises(tc.NoninterferenceError, match=r"concurrent w: instances \(\d,\) and \(\d,\) both access S\["):
        run(warp_exchange(across_warps, "warp"), X=x, Y=np.zeros((2, 4), np.int32))
    out = run(warp_exchange(across_warps, "block"), X=x, Y=np.zeros((2, 4), np.int32))
    assert np.array_equal(out["Y"], x[::-1])


# ----------------------------------------------------------------------------- orders and race-free schedules
@st.composite
def scheduled_cases(draw):
    """A random kernel, a random schedule of it, then one concurrent binding of a drawn loop."""
    case = draw(strategies.kernels(max_size=6))
    s = draw(strategies.schedules(case.kernel, case.sizes, max_ops=3))
    name = draw(st.sampled_from([lp.name for lp in L.loops(s.program.body)]))
    try:
        s.bind(name, draw(st.sampled_from(["grid0", "block0", "warp", "lane", "vector", "core"])))
    except ScheduleError:
        event("bind: precondition failed")
    return case, s


@given(scheduled_cases())
def test_orders_never_change_a_proved_race_free_schedule(drawn):
    case, s = drawn
    report = s.check()
    if not report.ok:
        event("not proved: skipped")
        return
    event("proved: compared")
    results = [s.run(order=o, seed=seed, checked=checked, **case.inputs())
               for o, seed in ORDERS for checked in (True, False)]
    for got in results[1:]:
        for name in case.outputs:
            assert got[name].tobytes() == results[0][name].tobytes(), (name, s.history)


# ----------------------------------------------------------------------------- loop-form meaning
def test_masked_loads_from_a_zero_length_tensor_read_nothing():
    pick = L.Sel(L.Ix(lt(v(0), "N"), "bool"), ld("A", v(0)), lit(7), "i32")
    for binding in (None, "block0", "vector"):
        body = loop(0, "i", "M", assign("B", (v(0),), pick), guard(lt(v(0), "N"), assign("C", (v(0),), ld("A", v(0)))),
                    kind="parallel", binding=binding)
        p = program("empty", ("M", "N"), [tensor("A", ("N",), written=False), tensor("B", ("M",)),
                                          tensor("C", ("M",))], body)
        for checked in (True, False):
            out = run(p, checked, A=np.zeros(0, np.int32), B=np.zeros(3, np.int32), C=np.full(3, 2, np.int32))
            assert out["B"].tolist() == [7, 7, 7] and out["C"].tolist() == [2, 2, 2]


def triangle(inner_kind: str) -> tc.Program:
    """Thread t sums A[0..t] with an inner loop of t + 1 iterations."""
    inner = loop(1, "j", add(v(0), 1), accum("B", (v(0),), ld("A", v(1))), kind=inner_kind)
    body = loop(0, "t", "N", inner, kind="parallel", binding="block0")
    return program("tri", ("N",), [tensor("A", ("N",), written=False), tensor("B", ("N",))], body)


@pytest.mark.parametrize("inner_kind", ["serial", "reduce"])
def test_bound_loops_with_a_thread_dependent_inner_trip_count_run_masked(inner_kind):
    a = np.random.default_rng(2).integers(-20, 20, 9).astype(np.int32)
    for o, seed in ORDERS:
        for checked in (True, False):
            out = run(triangle(inner_kind), checked, o, seed, A=a, B=np.zeros(9, np.int32))
            assert np.array_equal(out["B"], np.cumsum(a))


def test_a_barrier_inside_a_thread_dependent_loop_is_divergent():
    inner = loop(1, "j", add(v(0), 1), accum("B", (v(0),), ld("A", v(1))), barrier("block"))
    p = program("tri_bar", ("N",), [tensor("A", ("N",), written=False), tensor("B", ("N",))],
                loop(0, "t", "N", inner, kind="parallel", binding="block0"))
    with pytest.raises(tc.ExecutionError, match="block barrier reached by participants"):
        run(p, A=np.ones(4, np.int32), B=np.zeros(4, np.int32))


@tc.kernel
def short_rows(B: tc.Tensor[i32, "N"]):
    """A parallel region of N - 5 instances (negative for N < 5)."""
    for r in tc.parallel(B.shape[0] - 5):
        B.tile((r.index(),), (1,)).store(tc.zeros(i32, (1,)))


def test_negative_extents_are_errors_in_loop_form_as_in_the_tile_program():
    here = Loc("kernel.py", 12)
    lp = dataclasses.replace(loop(0, "i", sub("N", 5), assign("B", (v(0),), lit(1)), kind="parallel"), loc=here)
    p = program("neg", ("N",), [tensor("B", ("N",))], lp)
    for checked in (True, False):
        with pytest.raises(tc.ExecutionError, match=r"extent .* = -3 < 0") as err:
            run(p, checked, B=np.zeros(2, np.int32))
        assert err.value.loc == here and err.value.hint
    with pytest.raises(tc.ExecutionError, match="< 0"):
        tc.run(short_rows, B=np.zeros(2, np.int32))


def test_an_inner_loop_reading_an_outer_thread_variable_in_its_body_extent_still_batches_bitwise():
    # a per-thread local buffer whose extent is the thread's trip count
    inner = loop(1, "j", add(v(0), 1), assign("T", (v(1),), plus(ld("A", v(1)), lit(1))), kind="parallel")
    fold = loop(2, "k", add(v(0), 1), accum("B", (v(0),), ld("T", v(2))), kind="serial")
    body = loop(0, "t", "N", decl("T", (add(v(0), 1),)), inner, fold, kind="parallel", binding="lane")
    p = program("tri_local", ("N",), [tensor("A", ("N",), written=False), tensor("B", ("N",))], body)
    a = np.arange(6, dtype=np.int32)
    for checked in (True, False):
        assert np.array_equal(run(p, checked, A=a, B=np.zeros(6, np.int32))["B"], np.cumsum(a + 1))


# ----------------------------------------------------------------------------- tile level: one canonical tree
def check_modes_agree(kernel, inputs: dict, names) -> None:
    want = tc.run(kernel, checked=True, **{k: np.array(x) if isinstance(x, np.ndarray) else x
                                            for k, x in inputs.items()})
    got = tc.run(kernel, checked=False, **{k: np.array(x) if isinstance(x, np.ndarray) else x
                                            for k, x in inputs.items()})
    for name in names:
        assert got[name].tobytes() == want[name].tobytes(), name


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_checked_and_unchecked_canonical_runs_of_the_examples_agree_bitwise(name):
    entry = EXAMPLES[name]
    inputs = entry.make_inputs(np.random.default_rng(11), **RAGGED[name])
    check_modes_agree(entry.kernel, inputs, output_names(entry))


@pytest.mark.parametrize("tiles", [dict(), dict(bm=8, bn=8, bk=8), dict(bm=16, bn=16, bk=16),
                                   dict(bm=32, bn=32, bk=32)])
def test_checked_and_unchecked_f32_gemm_agree_bitwise_on_ragged_sizes(tiles):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((29, 41)).astype(np.float32)
    b = rng.standard_normal((41, 37)).astype(np.float32)
    inputs = dict(A=a, B=b, C=np.zeros((29, 37), np.float32), **tiles)
    check_modes_agree(gemm, inputs, ["C"])
    got = tc.run(gemm, **inputs)["C"]
    np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)


@given(strategies.kernels(max_size=7))
def test_checked_and_unchecked_canonical_runs_of_random_kernels_agree_bitwise(case):
    check_modes_agree(case.kernel, case.inputs(), case.outputs)
