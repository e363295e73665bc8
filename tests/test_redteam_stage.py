"""Attacks on Stage (every mode), fission, merge, expand_dim, lift_alloc, constant and the checker parts under
them (``forwarding``, ``allocations``, the ``layout`` obligation, ``lowering.fill``, the hoisted packs).

Each test states the correct expectation: a transform that changes the program's meaning is disproved or
unknown (never proved), a hostile argument is a typed ``TilecertError`` with a hint, and a legal transform
computes what the program computed, on the interpreter and in C. Where the checker disproves, the
interpreter confirms that the meaning changed.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import tilecert as tc
import test_checker_programs as P
from tilecert import i32
from tilecert.backends.errors import StaleConstantError
from tilecert.checker import check_transform
from tilecert.checker.check import check_program
from tilecert.lowering.fill import written_first
from tilecert.semantics import loopir as L
from tilecert.semantics.errors import ExecutionError, TilecertError
from tilecert.semantics.index import IConst, ibin
from tilecert.semantics.layout import Swizzle
from tilecert.semantics.transform import Expanded, Kind, Lifted, Tau

from test_checker_brute import check_transform_agrees
from test_checker_programs import accum, add, assign, decl, guard, ld, lit, loop, lt, mul, plus, program, tensor, v
from test_sched_stage import gemm_inputs, gpu

X1, Y1 = tensor("X", ("N",), written=False), tensor("Y", ("N",))


def statuses(r) -> dict[str, str]:
    return {res.kind.value: res.verdict.status for res in r}


def checked(p, t, sizes=None):
    return check_transform(p, t.program, t.tau, sizes, datamaps=t.datamaps, listed=t.obligations)


# ============================================================================ lexical scope (a hole, fixed)
def _shadowing_siblings():
    """``t`` declared at the top, accumulated by loop i; loop j declares its own ``t``. Merged, j's declaration
    stands after i's accesses in one body: they still name the outer ``t`` (lexically)."""
    return program("shadow", ("N",), [X1, Y1, tensor("Z", ("N",))], decl("t", (1,)),
                   loop(0, "i", "N", accum("t", (0,), ld("X", v(0))), assign("Y", (v(0),), ld("t", 0))),
                   loop(1, "j", "N", decl("t", (1,)), accum("t", (0,), ld("X", v(1))), assign("Z", (v(1),), ld("t", 0))))


def test_a_merge_that_leaves_a_shadowing_declaration_after_the_first_body_computes_what_the_loops_did():
    """The checker (lexical names) proves this merge; the interpreter used to keep the inner ``t`` bound into
    the next iteration and computed another Y than the C backend. Names now resolve lexically there too."""
    p = _shadowing_siblings()
    t = P.transform(p, "merge", "i", "j")
    assert checked(p, t, {"N": 4}).ok
    rng = np.random.default_rng(0)
    data = {n: rng.integers(1, 5, 4).astype(np.int32) for n in "XYZ"}
    want = tc.run(p, **{k: a.copy() for k, a in data.items()})
    np.testing.assert_array_equal(want["Y"], np.cumsum(data["X"]))  # independent reference: a running sum
    np.testing.assert_array_equal(want["Z"], data["X"])
    got = tc.run(t.program, **{k: a.copy() for k, a in data.items()})
    c = tc.compile(t.program, target="c", allow_unproved=True)(**{k: a.copy() for k, a in data.items()})
    for out in ("Y", "Z"):
        np.testing.assert_array_equal(got[out], want[out], err_msg=out)
        np.testing.assert_array_equal(c[out], want[out], err_msg=out)


def test_a_declaration_shadowing_a_tensor_in_a_loop_body_leaves_the_tensor_visible_after_the_body():
    p = program("tshadow", ("N",), [X1, Y1],
                loop(0, "i", "N", decl("Y", (1,)), assign("Y", (0,), ld("X", v(0)))),
                loop(1, "j", "N", assign("Y", (v(1),), plus(ld("X", v(1)), lit(1)))))
    x = np.arange(3, dtype=np.int32)
    out = tc.run(p, X=x.copy(), Y=np.zeros(3, np.int32))["Y"]
    np.testing.assert_array_equal(out, x + 1)


@pytest.mark.parametrize("order", ["canonical", "reverse", "shuffle"])
def test_a_per_iteration_declaration_in_a_parallel_loop_leaves_the_outer_buffer_to_the_statements_after_it(order):
    """t = 7 at the top; each iteration of a parallel loop declares its own t; Z[0] = t after the loop reads 7."""
    Z = tensor("Z", (1,))
    p = program("private", ("N",), [X1, Y1, Z], decl("t", (1,)), assign("t", (0,), lit(7)),
                loop(0, "i", "N", decl("t", (1,)), assign("t", (0,), ld("X", v(0))), assign("Y", (v(0),), ld("t", 0)),
                     kind="parallel"),
                assign("Z", (0,), ld("t", 0)))
    assert check_program(p, {"N": 3}).ok
    x = np.arange(1, 4, dtype=np.int32)
    out = tc.run(p, X=x.copy(), Y=np.zeros(3, np.int32), Z=np.zeros(1, np.int32), order=order)
    np.testing.assert_array_equal(out["Y"], x)
    assert out["Z"][0] == 7


# ============================================================================ fission / merge
@pytest.mark.parametrize("policy", ["fold_left", "ordered_tree", "unordered_tree"])
def test_fission_and_merge_keep_the_order_of_an_ordered_reduction(policy):
    """Old order a0 b0 a1 b1 ...; fissioned or merged it becomes a0 a1 ... b0 b1 ...: only the unordered
    policy allows it."""
    A = tensor("A", ("N",), written=False)
    acc = tensor("acc", (1,))
    inner = program("f", ("N",), [X1, A, acc],
                    loop(0, "i", "N", loop(1, "a", 1, accum("acc", (0,), ld("X", v(0)), policy=policy)),
                         loop(2, "b", 1, accum("acc", (0,), ld("A", v(0)), policy=policy))))
    siblings = program("m", ("N",), [X1, A, acc], loop(0, "i", "N", accum("acc", (0,), ld("X", v(0)), policy=policy)),
                       loop(1, "j", "N", accum("acc", (0,), ld("A", v(1)), policy=policy)))
    for p, t in ((inner, P.transform(inner, "fission", "i", "a")), (siblings, P.transform(siblings, "merge", "i", "j"))):
        for sizes in ({"N": 3}, None):
            r = checked(p, t, sizes)
            if policy == "unordered_tree":
                assert r.ok, r.explain()
            else:
                assert not r.ok and r.status(Kind.DEPENDENCE) == "disproved", r.explain()


def test_a_merge_reversing_a_dependence_through_a_floordiv_mod_view_is_disproved():
    """The first loop writes A[i // 2, i % 2] = X[i]; the second reads A[(j+1) // 2, (j+1) % 2], the cell the
    first writes at i = j + 1: merged, it reads it before it is written."""
    i, j = v(0), v(1)
    half = lambda e: (ibin("floordiv", e, IConst(2)), ibin("mod", e, IConst(2)))  # noqa: E731
    p = program("view", ("N",), [tensor("X", (mul(2, "N"),), written=False), tensor("Y", (mul(2, "N"),)),
                                 tensor("A", (add("N", 1), 2))],
                loop(0, "i", mul(2, "N"), assign("A", half(i), ld("X", i))),
                loop(1, "j", mul(2, "N"), assign("Y", (j,), ld("A", *half(add(j, 1))))))
    t = P.transform(p, "merge", "i", "j")
    for sizes in ({"N": 2}, None):
        assert checked(p, t, sizes).status(Kind.DEPENDENCE) == "disproved"
    assert check_transform_agrees(p, t.program, t.tau, {"N": 2}).status(Kind.DEPENDENCE) == "disproved"
    assert not np.array_equal(P.run(p, {"N": 2})["Y"], P.run(t.program, {"N": 2})["Y"])


# ============================================================================ lift_alloc / expand_dim
def test_lifting_a_buffer_written_under_a_first_iteration_guard_and_read_later_is_disproved():
    """t[1] is written only at i == 0 and read every iteration: per-instance it is 0 after, lifted X[0]."""
    p = program("l", ("N",), [X1, Y1],
                loop(0, "i", "N", decl("t", (2,)), guard(lt(v(0), 1), assign("t", (1,), ld("X", 0))),
                     assign("t", (0,), ld("X", v(0))), assign("Y", (v(0),), plus(ld("t", 0), ld("t", 1)))))
    t = P.transform(p, "lift_alloc", "t", "i")
    for sizes in ({"N": 3}, None):
        r = checked(p, t, sizes)
        assert r.status(Kind.DATAMAP) == "disproved" and not r.ok, r.explain()
    assert not np.array_equal(P.run(p, {"N": 3})["Y"], P.run(t.program, {"N": 3})["Y"])


@pytest.mark.parametrize("datamap", [Lifted("t", ()), Lifted("t", (0, 0)), Lifted("t", (7,)), Lifted("nope", (0,)),
                                     Expanded("t", ())], ids=str)
def test_a_forged_lift_or_expansion_declaration_is_never_proved(datamap):
    """The lifted scalar accumulator (which carries values across iterations) with declarations that name no
    loop, one loop twice, a loop that is not there, or another buffer."""
    body = (P.accum("t", (), ld("X", v(0))), assign("Y", (v(0),), ld("t")))
    old = program("c", ("N",), [X1, Y1], loop(0, "i", "N", decl("t", ()), *body))
    new = program("c", ("N",), [X1, Y1], decl("t", ()), loop(0, "i", "N", *body))
    r = check_transform(old, new, Tau(), {"N": 3}, datamaps=(datamap,), final=False)
    assert not r.ok and r.status(Kind.COVERAGE) != "proved", r.explain()
    assert not np.array_equal(P.run(old, {"N": 3})["Y"], P.run(new, {"N": 3})["Y"])


def _lifted_over_a_shadow(name: str, outer: tuple):
    """``name`` declared in loop i (shadowing ``outer``'s ``name``: a top declaration or a tensor) and read after
    the loop by ``Z[0] = name[0] + 9``: lifted by hand to just before the loop, that read names the lifted one."""
    X, Y, Z = tensor("X", ("N",), written=False), tensor("Y", ("N",)), tensor("Z", (1,))
    body = (assign(name, (0,), ld("X", v(0))), assign("Y", (v(0),), ld(name, 0)))
    after = assign("Z", (0,), plus(ld(name, 0), lit(9)))
    old = program("shadowed", ("N",), [X, Y, Z], *outer, loop(0, "i", "N", decl(name, (1,)), *body), after)
    new = program("shadowed", ("N",), [X, Y, Z], *outer, decl(name, (1,)), loop(0, "i", "N", *body), after)
    return old, new


@pytest.mark.parametrize("name, outer", [("t", (decl("t", (1,)), assign("t", (0,), lit(5)))), ("Z", ())],
                         ids=["declaration", "tensor"])
def test_a_lift_whose_declaration_would_capture_a_later_read_of_a_shadowed_name_is_not_proved(name, outer):
    old, new = _lifted_over_a_shadow(name, outer)
    with pytest.raises(TilecertError):  # the op refuses: two declarations, or a tensor of that name
        P.transform(old, "lift_alloc", name, "i")
    for sizes in ({"N": 3}, None):
        r = check_transform(old, new, Tau(), sizes, datamaps=(Lifted(name, (0,)),), final=False)
        assert not r.ok and r.status(Kind.DATAMAP) != "proved", r.explain()
    assert not np.array_equal(P.run(old, {"N": 3})["Z"], P.run(new, {"N": 3})["Z"])


def test_expand_dim_over_loops_listed_against_their_nesting_then_lift_alloc_is_proved_and_equal():
    p = program("e", ("N",), [tensor("X", ("N", "N"), written=False), tensor("Y", ("N", "N"))],
                loop(0, "i", "N", loop(1, "j", "N", decl("t", ()), accum("t", (), ld("X", v(0), v(1))),
                                       accum("t", (), ld("X", v(1), v(0))), assign("Y", (v(0), v(1)), ld("t")))))
    sizes = {"N": 3}
    t1 = P.transform(p, "expand_dim", "t", ["j", "i"], sizes=sizes)
    t2 = P.transform(t1.program, "lift_alloc", "t", "i", sizes=sizes)
    for before, t in ((p, t1), (t1.program, t2)):
        for sz in (sizes, None):
            assert checked(before, t, sz).ok
    for seed in range(2):
        x = P.run(p, sizes, seed)
        np.testing.assert_array_equal(P.run(t2.program, sizes, seed)["Y"], x["Y"])
    unexpanded = P.transform(p, "lift_alloc", "t", "j", sizes=sizes)
    assert checked(p, unexpanded, sizes).status(Kind.DATAMAP) == "disproved"


# ============================================================================ stage
@tc.kernel
def strided(X: tc.Tensor[i32, "M"], Y: tc.Tensor[i32, "N"]):
    for i in tc.serial(Y.shape[0]):
        Y.at(i.index()).store(X.at(2 * i.index()).load())


def test_a_strided_tile_whose_loop_runs_zero_times_is_not_proved():
    """Tile extent 1 + 2 * (N - 1) is -1 at N = 0: the staged program fails to allocate where the kernel runs."""
    for sizes in ({"N": 0, "M": 0}, {}):
        s = tc.schedule(strided, **sizes)
        s.stage("X", ["i"])
        r = s.check()
        assert not r.ok and r.status(Kind.BOUNDS) == "disproved", r.explain()
    s = tc.schedule(strided, N=0, M=0)
    s.stage("X", ["i"])
    with pytest.raises(ExecutionError, match="negative extent"):
        s.run(X=np.zeros(0, np.int32), Y=np.zeros(0, np.int32))
    ok = tc.schedule(strided, N=3, M=6)
    ok.stage("X", ["i"])
    assert ok.check().ok
    x = np.arange(6, dtype=np.int32)
    np.testing.assert_array_equal(ok.run(X=x.copy(), Y=np.zeros(3, np.int32))["Y"], x[::2])


@pytest.mark.parametrize("K", [0, 5])
def test_pipeline_depth_2_refuses_a_zero_trip_anchor_and_proves_a_ragged_one(K):
    s = gpu(K=K)
    if K == 0:
        with pytest.raises(TilecertError, match="needs anchor 'ko' to run at least once") as err:
            s.stage("A", ["ii", "ki"], shared=True, cooperative=4, pipeline_depth=2)
        assert err.value.hint
        return
    s.stage("A", ["ii", "ki"], shared=True, cooperative=4, pipeline_depth=2)
    assert s.check().ok
    base, data = gpu(K=K), gemm_inputs(s)
    np.testing.assert_array_equal(s.run(**{k: a.copy() for k, a in data.items()})["C"],
                                  base.run(**{k: a.copy() for k, a in data.items()})["C"])


@pytest.mark.parametrize("kwargs", [{"shared": True}, {"shared": True, "cooperative": 2},
                                    {"shared": True, "cooperative": 2, "pipeline_depth": 2}], ids=str)
def test_a_shared_tile_loaded_under_a_loop_its_outer_part_reads_is_proved_and_equal(kwargs):
    """Y[2t + x] = X[t + 4x] staged over t: the anchor x lies inside the tile loop t."""
    p = program("inner", (), [tensor("X", (8,), written=False), tensor("Y", (8,))],
                loop(0, "t", 4, loop(1, "x", 2, assign("Y", (add(mul(v(0), 2), v(1)),), ld("X", add(v(0), mul(4, v(1))))))))
    t = P.transform(p, "stage", "X", ["t"], **kwargs)
    assert checked(p, t, {}).ok
    for seed in range(2):
        np.testing.assert_array_equal(P.run(t.program, {}, seed)["Y"], P.run(p, {}, seed)["Y"])


@pytest.mark.parametrize("offset", [4, 2])
def test_a_hoisted_pack_of_a_read_offset_by_whole_tiles_is_proved_and_a_partial_offset_refused(offset):
    """Y[4 io + ii] = X[4 io + offset + ii]: offset 4 reads the pack one tile on; offset 2 would overlap tiles."""
    p = program("h", (), [tensor("X", (12,), written=False), tensor("Y", (8,))],
                loop(0, "io", 2, loop(1, "ii", 4, assign("Y", (add(mul(4, v(0)), v(1)),),
                                                         ld("X", add(add(mul(4, v(0)), offset), v(1)))))))
    marked = P.transform(p, "constant", "X").program
    if offset % 4:
        with pytest.raises(TilecertError, match="not a multiple of the tile extent 4") as err:
            P.transform(marked, "stage", "X", ["ii"], hoisted=True)
        assert err.value.hint
        return
    t = P.transform(marked, "stage", "X", ["ii"], hoisted=True)
    assert checked(marked, t, {}).ok
    for seed in range(2):
        np.testing.assert_array_equal(P.run(t.program, {}, seed)["Y"], P.run(p, {}, seed)["Y"])


@pytest.mark.parametrize("args, kwargs, match", [
    (("X", []), {}, "non-empty list"), (("X", ["i", "i"]), {}, "more than once"),
    (("X", ["i"]), {"cooperative": 0}, "positive int"), (("X", ["i"]), {"pipeline_depth": 3}, "not implemented"),
    (("X", ["i"]), {"tile_prec": "f32"}, "not an exact widening"), (("X", ["i"]), {"pad_stride": 0}, "positive int"),
    (("X", ["i"]), {"swizzle": "elem"}, "needs shared=True"), (("Y", ["i"]), {}, "is written in the routine"),
    ((3, ["i"]), {}, "must be a buffer name"), (("X", "i"), {}, "non-empty list"),
    (("X", ["i"]), {"hoisted": True}, "must be marked constant"),
])
def test_hostile_stage_arguments_are_typed_errors_with_hints(args, kwargs, match):
    s = tc.schedule(strided, N=4, M=8)
    with pytest.raises(TilecertError, match=match) as err:
        s.stage(*args, **kwargs)
    assert err.value.hint and s.history == []


@tc.kernel
def reversed_copy(X: tc.Tensor[i32, "N"], Y: tc.Tensor[i32, "N"]):
    for i in tc.serial(X.shape[0]):
        Y.at(i.index()).store(X.at(X.shape[0] - 1 - i.index()).load())


@tc.kernel
def two_phases(X: tc.Tensor[i32, "N"], Y: tc.Tensor[i32, "N"]):
    for i in tc.serial(X.shape[0]):
        X.at(i.index()).store(X.at(i.index()).load() + 1)
    for j in tc.serial(X.shape[0]):
        Y.at(j.index()).store(X.at(j.index()).load())


def test_a_decreasing_tile_index_and_a_source_written_in_an_earlier_phase_are_refused():
    with pytest.raises(TilecertError, match="not an increasing affine function of loop 'i'"):
        tc.schedule(reversed_copy, N=4).stage("X", ["i"])
    with pytest.raises(TilecertError, match="'X' is written in the routine"):
        tc.schedule(two_phases, N=4).stage("X", ["j"])
    flagged = program("ph", ("N",), [X1, Y1], loop(0, "i", "N", assign("X", (v(0),), plus(ld("X", v(0)), lit(1)))),
                      loop(1, "j", "N", assign("Y", (v(1),), ld("X", v(1)))))  # X flagged unwritten, yet written
    with pytest.raises(TilecertError, match="'X' is written in the routine"):
        P.transform(flagged, "stage", "X", ["j"])


# ============================================================================ layout
@pytest.mark.parametrize("minor, sizes, want", [(6, {"N": 6}, "disproved"), ("N", {"N": 6}, "disproved"),
                                                ("N", None, "unknown"), (P.add("N", 2), None, "unknown"),
                                                (P.add("N", 2), {"N": 6}, "proved"),  # N + 2 = 8 at the bound size
                                                (8, {"N": 8}, "proved")])
def test_a_forged_swizzle_is_proved_only_on_a_power_of_two_minor_dim(minor, sizes, want):
    """An 8-row local buffer declared swizzle(elem) by hand: XOR of the row into 6 columns leaves the row; a
    minor dim that is a size expression is decided at the bound sizes, unknown without them."""
    buf = dataclasses.replace(L.Buffer("t", "f32", (P.ix(8), P.ix(minor)), "local"), layout=Swizzle("elem"))
    p = program("sw", ("N",), [tensor("X", (8, "N"), "f32", written=False), tensor("Y", (8, "N"), "f32")], L.Decl(buf),
                loop(0, "a", 8, loop(1, "b", "N", assign("t", (v(0), v(1)), ld("X", v(0), v(1), dtype="f32")))),
                loop(2, "c", 8, loop(3, "e", "N", assign("Y", (v(2), v(3)), ld("t", v(2), v(3), dtype="f32")))))
    r = check_program(p, sizes)
    assert r.status(Kind.LAYOUT) == want and r.ok == (want == "proved"), r.explain()


# ============================================================================ fill
def test_a_fill_is_kept_for_a_read_the_guarded_write_does_not_cover_and_dropped_when_the_guards_agree():
    def prog(read_guarded):
        read = assign("Y", (v(0),), ld("t", 0))
        return program("f", ("N",), [X1, Y1],
                       loop(0, "i", "N", decl("t", (2,)), guard(lt(0, v(0)), assign("t", (0,), ld("X", v(0)))),
                            guard(lt(0, v(0)), read) if read_guarded else read))
    assert written_first(prog(False), {"N": 3}) == frozenset() and written_first(prog(False), {}) == frozenset()
    assert written_first(prog(True), {"N": 3}) == frozenset({0})
    x = np.arange(1, 4, dtype=np.int32)
    out = tc.compile(prog(False), target="c", allow_unproved=True)(X=x.copy(), Y=np.full(3, 7, np.int32))["Y"]
    np.testing.assert_array_equal(out, [0, 2, 3])  # the kept fill: iteration 0 reads the zero


# ============================================================================ hoisted packs
def test_a_constant_input_changed_through_another_view_of_its_memory_is_refused():
    from test_hoisted_pack import inputs, packed_gemm
    k = tc.compile(packed_gemm(), target="c")
    arrays = inputs(4)
    k(**arrays)
    flat = arrays["B"].reshape(-1)  # another view of B's memory
    flat[17] += 1.0
    with pytest.raises(StaleConstantError, match="constant input B of kernel gemm changed since it was packed"):
        k(**arrays)
    with pytest.raises(TilecertError, match="not C-contiguous"):  # a view with other strides is no input at all
        k(**{**arrays, "B": np.asfortranarray(arrays["B"])})
