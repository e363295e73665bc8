"""Library expansion (tile program -> loop form) preserves meaning and builds the documented nests.

- Every example interprets to the same result at tile level and in loop form (exactly for
  integer kernels), checked and unchecked, under the canonical and the reverse instance
  order, for default and ragged sizes.
- Structure: each tile op becomes its documented loop nest (``mma``: parallel loops over
  the kept dims around reduce loops over the contracted dims with one ``Accum``; view
  loads: guarded copies; view stores: copies under an ``If`` on the in-bounds predicate;
  ``reduce``: an initialisation nest and a parallel / reduce nest with one ``Accum``;
  regions: one loop per domain axis of the region's kind). Small hand-written kernels pin
  the exact nests; counting invariants hold on every example and every random kernel.
- A hypothesis campaign: random kernels (``tc.strategies.kernels``) interpret identically
  at tile level and in loop form, in every instance order and checking mode, with
  adversarial reduction trees at tile level.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Iterator

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tilecert as tc
from examples import EXAMPLES, output_names
from tilecert import i32, strategies
from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.expand import in_bounds
from tilecert.semantics.index import IConst, IVar

NAMES = sorted(EXAMPLES)
# ragged sizes per example (the kernels' tile factors do not divide them)
RAGGED = {
    "gemm": dict(M=4, K=8, N=6), "gemm_i32": dict(M=4, K=8, N=6), "gemm_scalar": dict(M=4, K=5, N=3),
    "rowreduce": dict(M=5, N=11),
    "softmax": dict(M=5, N=7), "layernorm": dict(M=5, N=11), "rmsnorm": dict(M=5, N=11),
    "transpose": dict(M=5, N=4), "conv2d": dict(H=5, W=6, R=3, S=2), "all_regions": dict(M=5, K=6, N=7),
    "reduction_policy": dict(N=5), "elementwise": dict(N=7), "stencil": dict(H=6, W=5),
}
CAMPAIGN = max(settings.default.max_examples, 60)


def split_inputs(entry, inputs) -> tuple[dict, dict]:
    cfg = {k: v for k, v in inputs.items() if k in entry.kernel.config_defaults}
    return cfg, {k: v for k, v in inputs.items() if k not in cfg}


def copies(arrays: dict) -> dict:
    return {k: v.copy() for k, v in arrays.items()}


def assert_same(a: dict, b: dict, names, exact: bool, what: str) -> None:
    for name in names:
        if exact:
            np.testing.assert_array_equal(a[name], b[name], err_msg=f"{what} {name}")
        else:
            scale = max(1.0, float(np.abs(a[name]).max())) if a[name].size else 1.0
            np.testing.assert_allclose(a[name], b[name], rtol=1e-5, atol=1e-5 * scale, err_msg=f"{what} {name}")


# ---------------------------------------------------------------------------- walking loop form
def statements(block: ir.Block, loops: tuple = (), guards: tuple = ()) -> Iterator[tuple]:
    """Every statement with its enclosing loops and guards (outermost first)."""
    for st_ in block.ops:
        yield st_, loops, guards
        if isinstance(st_, L.Loop):
            yield from statements(st_.body, loops + (st_,), guards)
        elif isinstance(st_, L.If):
            yield from statements(st_.body, loops, guards + (st_,))


def tile_ops(p: ir.Program, kind: type) -> list:
    return [op for op in ir.walk(p.body) if isinstance(op, kind)]


def perfect_nest(loops: tuple, stmt) -> bool:
    """``stmt`` is the only statement of the innermost loop and each loop is its parent's only statement."""
    inner = [stmt] + list(reversed(loops))
    return all(len(lp.body.ops) == 1 and lp.body.ops[0] is child for lp, child in zip(reversed(loops), inner))


def check_structure(p: ir.Program, q: ir.Program) -> None:
    """Counting invariants tying each tile op of ``p`` to its loop nest in ``q`` (see the module doc)."""
    tensors = {t.name: t for t in p.tensors}
    stmts = list(statements(q.body))
    assert L.is_loop_form(q.body)

    # view loads: zero bounds -> Sel(in bounds, Ld(tensor), fill); assume -> a bare Ld(tensor)
    guarded, bare = 0, 0
    for st_, _, _ in stmts:
        if isinstance(st_, L.Assign) and st_.buf not in tensors:
            v = st_.value
            if isinstance(v, L.Sel) and isinstance(v.a, L.Ld) and v.a.buf in tensors:
                assert v.cond == L.Ix(in_bounds(v.a.index, tensors[v.a.buf].shape), "bool")
                guarded += 1
            elif isinstance(v, L.Ld) and v.buf in tensors:
                bare += 1
    loads = tile_ops(p, ir.ViewLoad)
    assert guarded == sum(op.bounds == "zero" for op in loads)
    assert bare == sum(op.bounds == "assume" for op in loads)

    # view stores: copies into the tensor, under If(in bounds) exactly for bounds="zero"
    stores = [(st_, guards) for st_, _, guards in stmts if isinstance(st_, L.Assign) and st_.buf in tensors]
    in_if = 0
    for st_, guards in stores:
        assert isinstance(st_.value, L.Ld) and st_.value.buf not in tensors
        if guards:
            assert guards[-1].body.ops == (st_,)
            assert guards[-1].cond == in_bounds(st_.index, tensors[st_.buf].shape)
            in_if += 1
    views = tile_ops(p, ir.ViewStore)
    assert len(stores) == len(views)
    assert in_if == sum(op.bounds == "zero" for op in views)

    # mma: parallel loops over the kept dims around reduce loops over the contracted ones, one Accum
    mmas = [(st_, loops) for st_, loops, _ in stmts
            if isinstance(st_, L.Accum) and isinstance(st_.value, L.Bin) and st_.value.fn == "mul"]
    assert len(mmas) == len(tile_ops(p, ir.Mma))
    for st_, loops in mmas:
        kept = len(st_.index)
        nest = loops[len(loops) - kept - _contracted(st_, loops):]
        assert perfect_nest(nest, st_)
        assert [lp.kind for lp in nest] == ["parallel"] * kept + ["reduce"] * (len(nest) - kept)
        assert st_.index == tuple(IVar(lp.var, 0) for lp in nest[:kept])
        assert st_.op == "add"

    # reduce expressions: an Accum (or a serial fold for a custom combiner) in a parallel / reduce nest
    accums = [(st_, loops) for st_, loops, _ in stmts if isinstance(st_, L.Accum) and not isinstance(st_.value, L.Bin)
              and perfect_nest(loops[-1:], st_) and loops and loops[-1].kind == "reduce"
              and _nest_op(loops[-1]) == "reduce"]
    assert len(accums) == sum(op.combiner != "custom" for op in tile_ops(p, ir.ReduceExpr))
    by_combiner = sorted(st_.op for st_, _ in accums)
    assert by_combiner == sorted(op.combiner for op in tile_ops(p, ir.ReduceExpr) if op.combiner != "custom")

    # regions: one loop per domain axis, named after the loop variable (a number after it where the name is
    # taken; with several axes, <variable>.<axis>), in program order and of the region's kind (a reduce region
    # without a known merge becomes a serial fold)
    kinds = {ir.Parallel: ("parallel",), ir.Serial: ("serial",), ir.Pipeline: ("pipeline",),
             ir.Reduce: ("reduce", "serial")}
    expected = [(re.escape(op.name) + (rf"\d*\.{a}" if len(op.extents) > 1 else r"\d*"), kinds[type(op)])
                for op in ir.walk(p.body) if type(op) in kinds and op.name for a in range(len(op.extents))]
    named = re.compile("|".join(f"(?:{rx})" for rx, _ in expected) or "(?!)")
    found = [(lp.name, lp.kind) for lp in L.loops(q.body) if named.fullmatch(lp.name)]
    assert len(found) == len(expected)
    for (name, kind), (want_name, want_kinds) in zip(found, expected):
        assert re.fullmatch(want_name, name) and kind in want_kinds, (name, kind, want_name, want_kinds)


def _nest_op(lp: L.Loop) -> str:
    """The tile op whose nest ``lp`` belongs to (``<buffer>.<op>.<dim>``, the op numbered when taken)."""
    parts = lp.name.split(".")
    return re.sub(r"\d+$", "", parts[-2]) if len(parts) == 3 else ""


def _contracted(st_: L.Accum, loops: tuple) -> int:
    """How many innermost loops of an mma nest are reduce loops (the contracted dims)."""
    n = 0
    for lp in reversed(loops):
        if lp.kind != "reduce" or _nest_op(lp) != "mma":
            break
        n += 1
    return n


# ---------------------------------------------------------------------------- examples
@pytest.mark.parametrize("checked", [True, False], ids=["checked", "unchecked"])
@pytest.mark.parametrize("name", NAMES)
def test_examples_same_before_and_after_expansion(name, checked):
    entry = EXAMPLES[name]
    for sizes in ({}, RAGGED[name]):
        cfg, arrays = split_inputs(entry, entry.make_inputs(np.random.default_rng(7), **sizes))
        p = tc.capture(entry.kernel, **cfg)
        q = tc.expand(p)
        for order in ("canonical", "reverse"):
            tile = tc.run(p, order=order, checked=checked, **copies(arrays))
            loop = tc.run(q, order=order, checked=checked, **copies(arrays))
            assert_same(tile, loop, output_names(entry), entry.exact, f"{name} {sizes} {order}")


@pytest.mark.parametrize("name", NAMES)
def test_examples_expand_to_the_documented_nests(name):
    entry = EXAMPLES[name]
    p = tc.capture(entry.kernel, **split_inputs(entry, entry.make_inputs(np.random.default_rng(0)))[0])
    check_structure(p, tc.expand(p))


def test_expansion_is_idempotent_on_loop_form():
    q = tc.expand(tc.capture(EXAMPLES["gemm"].kernel))
    assert tc.expand(q) is q


# ---------------------------------------------------------------------------- exact nests of small kernels
@tc.kernel
def one_mma(A: tc.Tensor[i32, "M", "K"], B: tc.Tensor[i32, "K", "N"], C: tc.Tensor[i32, "M", "N"]):
    for nest in tc.parallel(1):
        a = A.tile((0, 0), (2, 3), bounds="assume").load()
        b = B.tile((0, 0), (3, 4), bounds="assume").load()
        C.tile((0, 0), (2, 4), bounds="assume").store(tc.mma(a, b, tc.zeros(i32, (2, 4), dims=("M", "N"))))


def test_mma_is_parallel_over_kept_dims_around_reduce_over_contracted():
    p = tc.capture(one_mma)
    q = tc.expand(p)
    [(acc, loops)] = [(s, lp) for s, lp, _ in statements(q.body) if isinstance(s, L.Accum)]
    nest = loops[1:]  # inside the kernel's parallel loop
    assert [lp.kind for lp in nest] == ["parallel", "parallel", "reduce"]
    assert [lp.extent for lp in nest] == [IConst(2), IConst(4), IConst(3)]
    assert perfect_nest(nest, acc)
    m, n, k = (IVar(lp.var, 0) for lp in nest)
    assert acc.index == (m, n) and acc.op == "add"
    assert acc.value.fn == "mul"
    assert (acc.value.a.index, acc.value.b.index) == ((m, k), (k, n))
    a = np.arange(6, dtype=np.int32).reshape(2, 3) - 2
    b = np.arange(12, dtype=np.int32).reshape(3, 4) - 5
    out = tc.run(q, A=a, B=b, C=np.zeros((2, 4), np.int32))["C"]
    np.testing.assert_array_equal(out, a @ b)


@tc.kernel
def guarded_copy(X: tc.Tensor[i32, "N"], Y: tc.Tensor[i32, "N"]):
    for nest in tc.parallel(tc.cdiv(X.shape[0], 4)):
        x = X.tile((nest.index() * 4 - 1,), (4,), bounds="zero").load(fallback=-7)
        Y.tile((nest.index() * 4,), (4,), bounds="zero").store(x)


def test_view_load_is_a_guarded_copy_and_view_store_is_guarded():
    p = tc.capture(guarded_copy)
    q = tc.expand(p)
    assigns = [(s, lp, g) for s, lp, g in statements(q.body) if isinstance(s, L.Assign)]
    [(load, load_loops, load_guards)] = [a for a in assigns if isinstance(a[0].value, L.Sel)]
    assert not load_guards
    v = IVar(load_loops[-1].var, 0)
    assert load.index == (v,)
    sel = load.value
    assert sel.a.buf == "X" and sel.cond.expr == in_bounds(sel.a.index, p.tensor("X").shape)
    assert isinstance(sel.b, L.Ld) and sel.b.buf != "X"  # the fallback value, not a literal 0
    [(store, _, store_guards)] = [a for a in assigns if a[0].buf == "Y"]
    assert len(store_guards) == 1 and store_guards[0].cond == in_bounds(store.index, p.tensor("Y").shape)
    x = np.arange(1, 7, dtype=np.int32)
    out = tc.run(q, X=x, Y=np.zeros(6, np.int32))["Y"]
    np.testing.assert_array_equal(out, [-7, 1, 2, 3, 4, 5])  # shifted by one; the cell before X reads -7


def test_structure_check_rejects_an_unguarded_store():
    """The counting invariants can fail: drop the in-bounds guard of the store."""
    p = tc.capture(guarded_copy)
    q = tc.expand(p)

    def unguard(block: ir.Block) -> ir.Block:
        ops: list = []
        for s in block.ops:
            if isinstance(s, L.If):
                ops.extend(s.body.ops)
            else:
                ops.append(dataclasses.replace(s, body=unguard(s.body)) if isinstance(s, L.Loop) else s)
        return ir.Block(block.args, tuple(ops), block.yields)

    check_structure(p, q)
    with pytest.raises(AssertionError):
        check_structure(p, dataclasses.replace(q, body=unguard(q.body)))


@tc.kernel
def reduce_policies(X: tc.Tensor[i32, "M", "N"], S: tc.Tensor[i32, "M"], D: tc.Tensor[i32, "M"]):
    for nest in tc.parallel(1):
        x = X.tile((0, 0), (3, 4), bounds="assume").load()
        S.tile((0,), (3,), bounds="assume").store(tc.reduce(x, "N", "max", policy="ordered_tree"))
        D.tile((0,), (3,), bounds="assume").store(
            tc.reduce(x, "N", lambda a, b: a - b, policy="fold_right", init=0))


def test_reduce_expr_nests():
    p = tc.capture(reduce_policies)
    q = tc.expand(p)
    [(acc, loops)] = [(s, lp) for s, lp, _ in statements(q.body) if isinstance(s, L.Accum)]
    assert acc.op == "max" and acc.policy == "ordered_tree"
    assert [lp.kind for lp in loops[1:]] == ["parallel", "reduce"] and perfect_nest(loops[1:], acc)
    # the custom fold_right is a serial loop that walks the reduced dim backwards
    folds = [(s, lp) for s, lp, _ in statements(q.body)
             if isinstance(s, L.Assign) and isinstance(s.value, L.Bin) and s.value.fn == "sub"]
    [(fold, fold_loops)] = folds
    assert [lp.kind for lp in fold_loops[1:]] == ["parallel", "serial"]
    x = np.arange(12, dtype=np.int32).reshape(3, 4) * 3 % 7
    out = tc.run(q, X=x, S=np.zeros(3, np.int32), D=np.zeros(3, np.int32))
    np.testing.assert_array_equal(out["S"], x.max(axis=1))
    np.testing.assert_array_equal(out["D"], [r[0] - (r[1] - (r[2] - (r[3] - 0))) for r in x.tolist()])


@tc.kernel
def regions(X: tc.Tensor[i32, "N"], Y: tc.Tensor[i32, "N"]):
    N = X.shape[0]
    for blk in tc.parallel(2, 1):
        s = tc.zeros(i32, ())
        t = tc.full(i32, (), 1)
        for step in blk.serial(3):
            s, t = t, s + t  # both carries update at once
        u = tc.zeros(i32, ())
        for r in blk.reduce(N, policy="fold_right"):
            u = X.at(r.index()).load() - u
        Y.at(blk.index(0)).store(s + u * 100)


def test_regions_become_named_loops_of_their_kind():
    p = tc.capture(regions)
    q = tc.expand(p)
    by_name = {lp.name: lp for lp in L.loops(q.body)}
    assert by_name["blk.0"].kind == by_name["blk.1"].kind == "parallel"
    assert by_name["blk.0"].extent == IConst(2) and by_name["blk.1"].extent == IConst(1)
    assert by_name["step"].kind == "serial" and by_name["step"].extent == IConst(3)
    assert by_name["r"].kind == "serial"  # a fold with no merge is a serial loop
    x = np.array([5, 3, 1], np.int32)
    for checked in (True, False):
        out = tc.run(q, checked=checked, X=x, Y=np.zeros(3, np.int32))["Y"]
        fold_right = 5 - (3 - (1 - 0))
        np.testing.assert_array_equal(out, [2 + 100 * fold_right] * 2 + [0])  # fib: s after 3 steps is 2


@tc.kernel
def merged_reduce(A: tc.Tensor[i32, "M", "K"], B: tc.Tensor[i32, "K", "N"], C: tc.Tensor[i32, "M", "N"]):
    K = A.shape[1]
    for nest in tc.parallel(1):
        acc = tc.zeros(i32, (2, 2), dims=("M", "N"))
        for k in nest.reduce(tc.cdiv(K, 2), policy="fold_left"):
            acc = tc.mma(A.tile((0, k.index() * 2), (2, 2)).load(), B.tile((k.index() * 2, 0), (2, 2)).load(), acc)
        C.tile((0, 0), (2, 2)).store(acc)


def test_region_merge_accumulates_under_the_region_policy():
    q = tc.expand(tc.capture(merged_reduce))
    [acc] = [s for s in ir.walk(q.body) if isinstance(s, L.Accum)]
    assert acc.policy == "fold_left"
    assert {lp.name: lp.kind for lp in L.loops(q.body)}["k"] == "reduce"
    a = np.arange(10, dtype=np.int32).reshape(2, 5) - 4
    b = np.arange(10, dtype=np.int32).reshape(5, 2) % 3
    out = tc.run(q, A=a, B=b, C=np.zeros((2, 2), np.int32))["C"]
    np.testing.assert_array_equal(out, a @ b)


@tc.kernel
def unmerged_reduce(X: tc.Tensor[i32, "N"], Out: tc.Tensor[i32, "P"], policy: str = "ordered_tree"):
    s = tc.full(i32, (), 0)
    for r in tc.reduction(X.shape[0], policy=policy):
        s = s * 2 + X.at(r.index()).load()  # no merge: the contribution depends on the state
    Out.at(0).store(s)


@pytest.mark.parametrize("policy", ["ordered_tree", "unordered_tree"])
def test_a_tree_region_without_a_known_merge_is_refused_as_the_interpreter_refuses_it(policy):
    p = tc.capture(unmerged_reduce, policy=policy)
    arrays = dict(X=np.ones(4, np.int32), Out=np.zeros(1, np.int32))
    with pytest.raises(tc.TilecertError) as ran:
        tc.run(p, **arrays)
    with pytest.raises(tc.TilecertError) as expanded:
        tc.expand(p)
    assert type(expanded.value) is type(ran.value)
    assert (expanded.value.message, expanded.value.loc, expanded.value.hint) == \
        (ran.value.message, ran.value.loc, ran.value.hint)
    assert "no known merge" in expanded.value.message and expanded.value.loc.line > 0


@pytest.mark.parametrize("policy, want", [("fold_left", 15), ("fold_right", 15)])
def test_a_fold_region_without_a_known_merge_is_a_serial_loop(policy, want):
    q = tc.expand(tc.capture(unmerged_reduce, policy=policy))
    assert not any(isinstance(st, L.Accum) for st in ir.walk(q.body))
    assert "serial" in {lp.kind for lp in L.loops(q.body)}
    assert tc.run(q, X=np.ones(4, np.int32), Out=np.zeros(1, np.int32))["Out"][0] == want


# regressions: buffers that expansion used to share between live values
@tc.kernel
def carry_read_in_body(X: tc.Tensor[i32, "N"], Y: tc.Tensor[i32, "N"]):
    for nest in tc.parallel(tc.cdiv(X.shape[0], 4)):
        a = X.tile((nest.index() * 4,), (4,)).load()
        s = a
        t = a
        for k in nest.serial(3):
            s, t = s + a, t * 2
        Y.tile((nest.index() * 4,), (4,)).store(s + t)


@tc.kernel
def mma_accumulator_is_an_operand(X: tc.Tensor[i32, "N"], Y: tc.Tensor[i32, "N"]):
    for nest in tc.parallel(1):
        x = tc.iota(i32, (2, 2), axis=1) + X.at(0).load()
        Y.tile((0,), (4,)).store(tc.reshape(tc.mma(x, x, x), (4,)))


@pytest.mark.parametrize("k", [carry_read_in_body, mma_accumulator_is_an_operand], ids=lambda k: k.name)
def test_live_values_keep_their_buffers(k):
    x = np.arange(1, 9, dtype=np.int32)
    p = tc.capture(k)
    want = tc.run(p, X=x, Y=np.zeros(8, np.int32))["Y"]
    for checked in (True, False):
        np.testing.assert_array_equal(tc.run(tc.expand(p), checked=checked, X=x, Y=np.zeros(8, np.int32))["Y"], want)


def test_carried_expectations():
    x = np.arange(1, 9, dtype=np.int32)
    out = tc.run(carry_read_in_body, X=x, Y=np.zeros(8, np.int32))["Y"]
    np.testing.assert_array_equal(out, 4 * x + 8 * x)
    m = np.array([[1, 2], [1, 2]])  # iota along axis 1, plus X[0] = 1
    out = tc.run(mma_accumulator_is_an_operand, X=x, Y=np.zeros(8, np.int32))["Y"]
    np.testing.assert_array_equal(out[:4], (m @ m + m).reshape(4))


# ---------------------------------------------------------------------------- random kernels
@pytest.mark.slow
@settings(max_examples=CAMPAIGN)
@given(strategies.kernels(), st.sampled_from(["canonical", "reverse", "shuffle"]), st.booleans(), st.integers(0, 3))
def test_random_kernels_same_at_tile_level_and_in_loop_form(case, order, checked, seed):
    p = tc.capture(case.kernel)
    q = tc.expand(p)
    check_structure(p, q)
    tile = tc.run(p, order=order, checked=checked, seed=seed, reduce_mode="adversarial", **case.inputs())
    loop = tc.run(q, order=order, checked=checked, seed=seed, **case.inputs())
    assert_same(tile, loop, case.outputs, True, case.source)
