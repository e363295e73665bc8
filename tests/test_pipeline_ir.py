"""The pipeline IR (issue 13 part 1, seed 003): the prelude before the first cut, the stage structure that every
schedule op keeps (or refuses to break), its check in the checker's model, the digest and round trip of the loop
form's pipeline data, and what ``s.show()`` prints of the stages.

Every schedule op is applied where it can act in a pipeline (on the pipeline loop and on loops inside a stage) of
the GEMM example and of an all-regions kernel with a prelude; after each op the stage blocks are those of the fresh
schedule (ordinals and names), the structure check finds nothing, and the program computes what the fresh one
computes (integer kernels: exactly).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import tilecert as tc
from examples import EXAMPLES
from tilecert import i32
from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.checker import CheckerError
from tilecert.semantics.pipeline.plan import ModuloPlan
from tilecert.semantics.pipeline.stages import check_stage_structure, pipeline_loops, stage_blocks
from tilecert.semantics.sched.base import ScheduleError
from tilecert.semantics.serialize import digest, dump, load

GEMM = EXAMPLES["gemm_i32"].kernel


@tc.kernel
def regions_i32(A: tc.Tensor[i32, "M", "K"], B: tc.Tensor[i32, "K", "N"], Y: tc.Tensor[i32, "M", "N"],
                S: tc.Tensor[i32, "M"], bm: int = 2, bn: int = 3, bk: int = 2):
    """A parallel, a pipeline with a prelude (``base``, used by both stages) and a carry, a reduce inside a stage."""
    M, K = A.shape
    N = B.shape[1]
    for rows in tc.parallel(tc.cdiv(M, bm)):
        m0 = rows.index() * bm
        s = tc.zeros(i32, (bm,), dims=("M",))
        for col in rows.pipeline(tc.cdiv(N, bn)):
            n0 = col.index() * bn
            base = tc.cast(col.index(), i32) * bn
            col.stage("scores")
            acc = tc.zeros(i32, (bm, bn), dims=("M", "N"))
            for k in col.reduce(tc.cdiv(K, bk)):
                a = A.tile((m0, k.index() * bk), (bm, bk)).load()
                b = B.tile((k.index() * bk, n0), (bk, bn)).load()
                acc = tc.mma(a, b, acc)
            acc = acc + base
            col.stage("fold")
            Y.tile((m0, n0), (bm, bn)).store(acc)
            s = s + tc.reduce(acc, "N", "add") + base
        S.tile((m0,), (bm,)).store(s)


def _gemm_inputs(rng, M, N, K):
    return {"A": rng.integers(-9, 9, (M, K), dtype=np.int32), "B": rng.integers(-9, 9, (K, N), dtype=np.int32),
            "C": np.zeros((M, N), np.int32)}


def _regions_inputs(rng, M, N, K):
    return {"A": rng.integers(-9, 9, (M, K), dtype=np.int32), "B": rng.integers(-9, 9, (K, N), dtype=np.int32),
            "Y": np.zeros((M, N), np.int32), "S": np.zeros(M, np.int32)}


def _stages(p: ir.Program) -> list[list[tuple[int, str, bool]]]:
    return [[(b.ordinal, b.name, b.inferred) for b in stage_blocks(lp)] for lp in pipeline_loops(p.body)]


def _run(s: tc.Schedule, data: dict) -> dict:
    return s.run(**{k: a.copy() for k, a in data.items()})


# ============================================================================ the prelude
def test_a_prelude_used_by_two_stages_is_recomputed_in_each():
    s = tc.schedule(regions_i32, M=5, N=7, K=5)
    (lp,) = pipeline_loops(s.program.body)
    blocks = stage_blocks(lp)
    written = [{st.buf for st in ir.walk(b.body) if isinstance(st, L.Assign)} for b in blocks]
    read = [{ld.buf for st in ir.walk(b.body) if isinstance(st, (L.Assign, L.Accum)) for ld in L.loads(st.value)}
            for b in blocks]
    index = [{st.buf for st in ir.walk(b.body) if isinstance(st, L.Assign) and isinstance(st.value, L.Ix)}
             for b in blocks]
    assert all(len(ix) == 1 for ix in index) and index[0] != index[1]  # each stage computes its own k.index() tile
    assert all(b.body.ops[0].buf in ix for b, ix in zip(blocks, index))  # the prelude opens each stage
    # no stage reads a prelude buffer another stage wrote: the only buffer stage 1 reads of stage 0 is the score tile
    assert read[1] & written[0] == {"acc1"}
    data = _regions_inputs(np.random.default_rng(1), 5, 7, 5)
    want = tc.run(regions_i32, **{k: a.copy() for k, a in data.items()})
    got = _run(s, data)
    assert got.keys() == want.keys() and all(np.array_equal(got[k], want[k]) for k in want)
    # the independent reference, on the column tiles padded to 9 columns (the padding scores are 0 + base)
    scores = np.zeros((5, 9), np.int64)
    scores[:, :7] = data["A"].astype(np.int64) @ data["B"]
    scores += np.arange(9) // 3 * 3
    np.testing.assert_array_equal(got["Y"], scores[:, :7])
    np.testing.assert_array_equal(got["S"], scores.sum(axis=1) + sum(c * 3 for c in range(3)))


@tc.kernel
def load_before_cut(X: tc.Tensor[i32, "N"], Y: tc.Tensor[i32, "N"]):
    N = X.shape[0]
    for k in tc.pipeline(N):
        x = X.at(k.index()).load()
        k.stage("store")
        Y.at(k.index()).store(x)


@tc.kernel
def carry_before_cut(X: tc.Tensor[i32, "N"], Y: tc.Tensor[i32, "N"]):
    N = X.shape[0]
    t = tc.zeros(i32, ())
    for k in tc.pipeline(N):
        t = t + tc.cast(k.index(), i32)
        k.stage("store")
        Y.at(k.index()).store(t)


@pytest.mark.parametrize("kernel, op, line", [(load_before_cut, "load", 4), (carry_before_cut, "add", 5)])
def test_an_impure_op_before_the_first_cut_is_refused_at_the_cut(kernel, op, line):
    with pytest.raises(tc.CaptureError) as info:
        tc.capture(kernel)
    e = info.value
    first = kernel.fn.__code__.co_firstlineno
    assert e.loc.file.endswith("test_pipeline_ir.py") and e.loc.line == first + line + 1  # the cut's line
    assert f"`{op}` at" in e.message and f":{first + line}" in e.message  # the op's line
    assert "k.stage(...) before" in e.hint


# ============================================================================ every op keeps the stage structure
GEMM_SIZES = dict(M=8, N=9, K=20)
REGIONS_SIZES = dict(M=5, N=7, K=5)
KEEPS = [  # (kernel, sizes, op, args): each acts on the pipeline loop or inside a stage
    ("gemm", "split", ("k", 2)), ("gemm", "split", ("k", 2, "partition")), ("gemm", "split", ("a.load.K", 3)),
    ("gemm", "pad", ("k", 4)), ("gemm", "pad", ("a.load.K", 8)), ("gemm", "partition", ("k", [1])),
    ("gemm", "partition", ("a.load.K", [3])), ("gemm", "unroll", ("k",)), ("gemm", "unroll", ("a.load.K", True)),
    ("gemm", "unroll", ("nest.1", True)), ("gemm", "reorder", (["a.load.M", "a.load.K"],)),
    ("gemm", "swap", ("b.load.K", "b.load.N")), ("gemm", "tile", (["a.load.M", "a.load.K"], [2, 2])),
    ("gemm", "fuse", ("a.load.M", "a.load.K")), ("gemm", "coalesce", (["b.load.K", "b.load.N"],)),
    ("gemm", "reshape", ("k", [1, 3])), ("gemm", "insert_unit", ("k",)), ("gemm", "insert_unit", ("a.load.M",)),
    ("gemm", "privatize", ("acc", "k")), ("gemm", "privatize", ("acc", "acc.mma.K")),
    ("gemm", "stage", ("A", ["a.load.M", "a.load.K"])), ("gemm", "stage", ("B", ["b.load.K", "b.load.N"])),
    ("gemm", "expand_dim", ("a", ["k"])), ("gemm", "lift_alloc", ("a", "k")), ("gemm", "bind", ("nest.0", "grid0")),
    ("gemm", "bind", ("k", "serial")), ("gemm", "bind", ("a.load.M", "block0")), ("gemm", "expand_zero", ("acc",)),
    ("gemm", "constant", ("A",)),
    ("regions", "split", ("col", 2)), ("regions", "pad", ("col", 2)), ("regions", "unroll", ("k", True)),
    ("regions", "split", ("acc1.add.N", 2)), ("regions", "fuse", ("Y.store.M", "Y.store.N")),
    ("regions", "privatize", ("acc", "k")), ("regions", "stage", ("B", ["b.load.K", "b.load.N"])),
    ("regions", "bind", ("rows", "grid0")), ("regions", "partition", ("col", [1])),
]
FRESH = {"gemm": (GEMM, GEMM_SIZES, _gemm_inputs), "regions": (regions_i32, REGIONS_SIZES, _regions_inputs)}


@pytest.mark.parametrize("which, op, args", KEEPS, ids=lambda x: str(x))
def test_every_op_keeps_the_stage_blocks_and_the_meaning(which, op, args):
    kernel, sizes, inputs = FRESH[which]
    fresh = tc.schedule(kernel, **sizes)
    s = tc.schedule(kernel, **sizes)
    getattr(s, op)(*args)
    assert check_stage_structure(s.program) == []
    before, after = _stages(fresh.program), _stages(s.program)
    assert after and all(stages == before[0] for stages in after)  # a partition's segments each keep them all
    if op in ("split", "partition") and args[0] in ("k", "col") and len(after) == 1:
        (lp,) = pipeline_loops(s.program.body)
        assert lp.name.endswith(".i")  # the inner loop runs the pipeline
    data = inputs(np.random.default_rng(0), *(sizes[d] for d in "MNK"))
    want, got = _run(fresh, data), _run(s, data)
    assert all(np.array_equal(got[k], want[k]) for k in want)


@pytest.mark.parametrize("op, args", [("remove_unit", ("k",)), ("unroll", ("k", True))])
def test_an_op_that_removes_the_pipeline_loop_dissolves_its_stages(op, args):
    sizes = dict(M=8, N=9, K=7)  # K = bk: loop k runs once
    fresh, s = tc.schedule(GEMM, **sizes), tc.schedule(GEMM, **sizes)
    getattr(s, op)(*args)
    assert not list(pipeline_loops(s.program.body))
    assert not any(isinstance(st, L.StageBlock) for st in ir.walk(s.program.body))
    assert check_stage_structure(s.program) == []
    data = _gemm_inputs(np.random.default_rng(2), 8, 9, 7)
    np.testing.assert_array_equal(_run(s, data)["C"], _run(fresh, data)["C"])


@tc.kernel
def two_pipelines(X: tc.Tensor[i32, "R", "N"], Y: tc.Tensor[i32, "R", "N"], Z: tc.Tensor[i32, "R", "N"]):
    """A serial loop whose body is exactly one pipeline with two independent stages, and a second pipeline."""
    R, N = X.shape
    for r in tc.serial(R):
        for k in r.pipeline(N):
            k.stage("copy")
            Y.at(r.index(), k.index()).store(X.at(r.index(), k.index()).load())
            k.stage("double")
            Z.at(r.index(), k.index()).store(X.at(r.index(), k.index()).load() * 2)
    for q in tc.serial(R):
        for j in q.pipeline(N):
            j.stage("inc")
            Y.at(q.index(), j.index()).store(Y.at(q.index(), j.index()).load() + 1)


@pytest.mark.parametrize("op, args", [
    ("fission", ("k", "Y")),  # the pipeline loop cut between its stages
    ("reorder", (["k", "r"],)),  # the pipeline loop moved out of its serial loop: its body would not be its stages
    ("swap", ("r", "k")),
    ("merge", ("r", "q")),  # two pipelines' loops around them merged: fine; then their own loops
])
def test_an_op_that_would_break_the_stage_structure_is_refused(op, args):
    s = tc.schedule(two_pipelines, R=2, N=3)
    if op == "merge":
        s.merge("r", "q")
        op, args = "merge", ("k", "j")
    with pytest.raises(ScheduleError) as info:
        getattr(s, op)(*args)
    assert "stage structure" in str(info.value) and "stage blocks" in info.value.hint
    assert check_stage_structure(s.program) == []  # nothing was applied


def test_merge_and_fission_around_pipeline_loops_keep_both_pipelines():
    fresh, s = tc.schedule(two_pipelines, R=2, N=3), tc.schedule(two_pipelines, R=2, N=3)
    merged = s.merge("r", "q")
    assert _stages(s.program) == _stages(fresh.program) == [[(0, "copy", False), (1, "double", False)],
                                                            [(0, "inc", False)]]
    s.fission(merged, "k")
    assert _stages(s.program) == _stages(fresh.program) and check_stage_structure(s.program) == []
    rng = np.random.default_rng(3)
    data = {"X": rng.integers(-9, 9, (2, 3), dtype=np.int32), "Y": np.zeros((2, 3), np.int32),
            "Z": np.zeros((2, 3), np.int32)}
    got = _run(s, data)
    np.testing.assert_array_equal(got["Y"], data["X"] + 1)
    np.testing.assert_array_equal(got["Z"], data["X"] * 2)


@tc.kernel
def one_stage_one_loop(Y: tc.Tensor[i32, "N"]):
    """The pipeline loop's body is exactly one stage block holding one loop (no declaration)."""
    N = Y.shape[0]
    for nest in tc.parallel(1):
        z = tc.zeros(i32, (2,))
        for k in nest.pipeline(tc.cdiv(N, 2)):
            k.stage("only")
            Y.tile((k.index() * 2,), (2,)).store(z)


def test_a_band_stops_at_a_stage_block():
    """A stage block is no guard of a perfect band: sinking it onto the inner loop would lose the stage."""
    s = tc.schedule(one_stage_one_loop, N=5)
    (lp,) = pipeline_loops(s.program.body)
    assert [type(st) for st in lp.body.ops] == [L.StageBlock]
    inner = lp.body.ops[0].body.ops[0].name
    with pytest.raises(ScheduleError, match="stage 0 \\(only\\) lies between them"):
        s.swap("k", inner)


# ============================================================================ the structure check
def _pipeline_program() -> tuple[ir.Program, L.Loop]:
    p = tc.schedule(GEMM, **GEMM_SIZES).program
    (lp,) = pipeline_loops(p.body)
    return p, lp


def _with_loop(p: ir.Program, lp: L.Loop, new: list) -> ir.Program:
    from tilecert.semantics.sched.base import replace_loop, with_body
    return with_body(p, replace_loop(p.body, lp, new))


def test_the_structure_check_finds_each_kind_of_break():
    p, lp = _pipeline_program()
    decls, (s0, s1) = lp.body.ops[:-2], lp.body.ops[-2:]
    swapped = dataclasses.replace(lp, body=ir.Block((), (*decls, s1, s0)))
    assert check_stage_structure(_with_loop(p, lp, [swapped])) == [
        "the stage blocks of pipeline loop 'k' have ordinals [1, 0], not [0, 1] in order"]
    beside = dataclasses.replace(lp, body=ir.Block((), (*decls, s0, *s1.body.ops)))
    problems = check_stage_structure(_with_loop(p, lp, [beside]))
    assert problems and all("among its stage blocks" in x for x in problems)
    outside = dataclasses.replace(lp, pipeline=None)
    assert check_stage_structure(_with_loop(p, lp, [outside])) == [
        "stage 0 (load) of pipeline 1 stands outside the body of its pipeline loop",
        "stage 1 (compute) of pipeline 1 stands outside the body of its pipeline loop"]
    late = dataclasses.replace(lp, body=ir.Block((), (s0, s1, *decls)))
    assert "pipeline loop 'k' holds the declaration of a among its stage blocks" in check_stage_structure(
        _with_loop(p, lp, [late]))
    assert check_stage_structure(p) == []


def test_the_checker_never_proves_a_broken_stage_structure():
    p, lp = _pipeline_program()
    decls, (s0, s1) = lp.body.ops[:-2], lp.body.ops[-2:]
    broken = _with_loop(p, lp, [dataclasses.replace(lp, body=ir.Block((), (*decls, s1, s0)))])
    with pytest.raises(CheckerError, match="ill-formed: the stage blocks of pipeline loop 'k' have ordinals"):
        tc.check(broken, GEMM_SIZES)


# ============================================================================ digest and round trip
@tc.kernel
def policy(X: tc.Tensor[i32, "N"], Y: tc.Tensor[i32, "N"], w: int = 1, iv: int = 1):
    N = X.shape[0]
    for k in tc.pipeline(N, window=w, interval=iv):
        k.stage("load")
        x = X.at(k.index()).load()
        k.stage("store")
        Y.at(k.index()).store(x + 1)


@tc.kernel
def renamed_cuts(X: tc.Tensor[i32, "N"], Y: tc.Tensor[i32, "N"]):
    N = X.shape[0]
    for k in tc.pipeline(N, window=1, interval=1):
        k.stage("fetch")
        x = X.at(k.index()).load()
        k.stage("put")
        Y.at(k.index()).store(x + 1)


@tc.kernel
def moved_cut(X: tc.Tensor[i32, "N"], Y: tc.Tensor[i32, "N"]):
    N = X.shape[0]
    for k in tc.pipeline(N, window=1, interval=1):
        k.stage("load")
        x = X.at(k.index()).load()
        y = x + 1
        k.stage("store")
        Y.at(k.index()).store(y)


def _loop_form(kernel, **config) -> ir.Program:
    return tc.expand(tc.capture(kernel, **config))


def test_the_digest_sees_the_policy_and_the_cut_positions_not_the_cut_names():
    base = digest(_loop_form(policy))  # window 1, interval 1 (the digest leaves the config out)
    assert digest(_loop_form(policy, w=4, iv=3)) != base
    assert digest(_loop_form(policy, w=4)) != base and digest(_loop_form(policy, iv=3)) != base
    assert digest(_loop_form(renamed_cuts)) == base
    assert digest(tc.capture(renamed_cuts)) == digest(tc.capture(policy))  # the tile IR too
    assert digest(_loop_form(moved_cut)) != base
    assert _stages(_loop_form(renamed_cuts)) == [[(0, "fetch", False), (1, "put", False)]]


def test_dump_and_load_round_trip_the_stage_blocks_and_a_plan():
    p = _loop_form(policy, w=4, iv=3)
    (lp,) = pipeline_loops(p.body)
    plan = ModuloPlan(interval=3, offsets=(0, 2), window=4, target="cuda", versions=(("x", 2),),
                      waits=((0, 1, "x"),), releases=(("x", (1,)),))
    planned = _with_loop(p, lp, [dataclasses.replace(lp, pipeline=dataclasses.replace(lp.pipeline, plan=plan))])
    back = load(dump(planned))
    assert back == planned and digest(back) == digest(planned)
    (lp2,) = pipeline_loops(back.body)
    assert lp2.pipeline.plan == plan and lp2.pipeline.plan.issue(1, 2) == 8
    assert _stages(back) == [[(0, "load", False), (1, "store", False)]]
    assert digest(planned) != digest(p)
    other = dataclasses.replace(plan, offsets=(0, 1))
    replanned = _with_loop(p, lp, [dataclasses.replace(lp, pipeline=dataclasses.replace(lp.pipeline, plan=other))])
    assert digest(replanned) != digest(planned)


# ============================================================================ what show prints
@tc.kernel
def cut_free(A: tc.Tensor[i32, "M", "K"], B: tc.Tensor[i32, "K", "N"], C: tc.Tensor[i32, "M", "N"],
             bm: int = 2, bn: int = 2, bk: int = 2):
    M, K = A.shape
    N = B.shape[1]
    for nest in tc.parallel(tc.cdiv(M, bm), tc.cdiv(N, bn)):
        acc = tc.zeros(i32, (bm, bn))
        for k in nest.pipeline(tc.cdiv(K, bk)):
            a = A.tile((nest.index(0) * bm, k.index() * bk), (bm, bk)).load()
            b = B.tile((k.index() * bk, nest.index(1) * bn), (bk, bn)).load()
            acc = tc.mma(a, b, acc)
        C.tile((nest.index(0) * bm, nest.index(1) * bn), (bm, bn)).store(acc)


def _stage_lines(s: tc.Schedule, capsys) -> list[str]:
    s.show()
    return [line.strip() for line in capsys.readouterr().out.splitlines() if line.strip().startswith("stage ")]


def test_show_prints_the_inferred_stages_of_a_cut_free_pipeline(capsys):
    s = tc.schedule(cut_free, M=4, N=4, K=6)
    assert _stage_lines(s, capsys) == ["stage 0 load (inferred)", "stage 1 compute (inferred)"]
    text = s.loop_tree()
    load, compute = text.index("stage 0 load"), text.index("stage 1 compute")
    assert load < text.index("a.load.M") < text.index("b.load.K") < compute < text.index("acc.mma")


def test_show_prints_the_explicit_cuts(capsys):
    s = tc.schedule(regions_i32, **REGIONS_SIZES)
    assert _stage_lines(s, capsys) == ["stage 0 scores", "stage 1 fold"]
    assert "pipeline col [3] window=2 interval=1" in s.loop_tree()


def _gpu_gemm(bind_a_k: bool) -> tc.Schedule:
    s = tc.schedule(EXAMPLES["gemm"].kernel, M=16, N=16, K=24, bm=8, bn=8, bk=8)
    s.bind("nest.0", "grid1")
    s.bind("nest.1", "grid0")
    pairs = [("acc.full.p1", "acc.full.p0"), ("acc.mma.p1", "acc.mma.p0"), ("C.store.M", "C.store.N")]
    for rows, cols in pairs + ([("a.load.M", "a.load.K"), ("b.load.K", "b.load.N")] if bind_a_k else []):
        s.bind(rows, "block1")
        s.bind(cols, "block0")
    if not bind_a_k:  # the cooperative lanes take block0
        s.bind("a.load.M", "block1")
        s.bind("b.load.K", "block1")
    return s


@pytest.mark.parametrize("mode", [dict(shared=True), dict(shared=True, cooperative=4, pipeline_depth=2)],
                         ids=["shared", "double-buffered"])
def test_a_shared_stage_at_the_pipeline_loop_keeps_the_stages_and_is_proved(mode):
    s = _gpu_gemm(bind_a_k="cooperative" not in mode)
    s.stage("A", ["a.load.M", "a.load.K"], **mode)
    s.stage("B", ["b.load.K", "b.load.N"], **mode)
    assert check_stage_structure(s.program) == [] and _stages(s.program) == [[(0, "load", False),
                                                                              (1, "compute", False)]]
    (lp,) = pipeline_loops(s.program.body)
    load = stage_blocks(lp)[0]
    assert isinstance(load.body.ops[0], L.Barrier) or "pipeline_depth" not in mode  # the rotor opens stage 0
    assert not any(isinstance(st, L.Barrier) for st in lp.body.ops)  # every barrier inside a stage block
    report = s.check()
    assert report.ok, report.explain()
    assert tc.differential(s, target="cuda-host", trials=1).matched
