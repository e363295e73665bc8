"""stage(source, tile_loops, ...): reads of a source through a fresh tile, in each mode.

Kernels reach the staging form with today's ops: a scalar-descent GEMM accumulating straight into
``C`` in a serial K loop, split and reordered so that the K tile loop runs inside the K block
loop. Each staged schedule computes bit for bit what the unstaged one computes (interpreter and
C), the checker proves it, and every precondition failure is a typed ``ScheduleError`` with a hint.
"""
import dataclasses

import numpy as np
import pytest

import tilecert as tc
from tilecert import f16, f32
from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.checker import check_transform
from tilecert.backends import SanitizerError
from tilecert.lowering.barriers import place_barriers
from tilecert.lowering.lower import bind_sizes
from tilecert.lowering.pipeline import lower_for
from tilecert.semantics.index import IBin, IConst, IVar, evaluate, ibin
from tilecert.semantics.mapper import Mapper
from tilecert.semantics.serialize import digest
from tilecert.semantics.sched.base import ScheduleError
from tilecert.semantics.constants import constant_inputs
from tilecert.semantics.transform import Copy, Kind, Tau

@tc.kernel
def gemm_rmw(A: tc.Tensor[f32, "M", "K"], B: tc.Tensor[f32, "K", "N"], C: tc.Tensor[f32, "M", "N"]):
    M, K = A.shape
    N = B.shape[1]
    for nest in tc.parallel(M, N):
        i, j = nest.index(0), nest.index(1)
        for k in nest.serial(K):
            C.at(i, j).store(C.at(i, j).load() + A.at(i, k.index()).load() * B.at(k.index(), j).load())


@tc.kernel
def gemm_f16(A: tc.Tensor[f16, "M", "K"], B: tc.Tensor[f32, "K", "N"], C: tc.Tensor[f32, "M", "N"]):
    """``gemm_rmw`` with a half-precision ``A``, widened at each read."""
    for nest in tc.parallel(A.shape[0], B.shape[1]):
        for k in nest.serial(A.shape[1]):
            a = tc.cast(A.at(nest.index(0), k.index()).load(), f32)
            acc = C.at(nest.index(0), nest.index(1)).load()
            C.at(nest.index(0), nest.index(1)).store(acc + a * B.at(k.index(), nest.index(1)).load())


def blocked(kernel, bm=4, bk=2, **sizes):
    """``kernel`` with rows split by ``bm``, K by ``bk``, and the K block loop moved outside the rows:
    ``io, ko, ii, j, ki``."""
    s = tc.schedule(kernel, **sizes)
    s.split("nest.0", bm, outer="io", inner="ii")
    s.split("k", bk, outer="ko", inner="ki")
    s.reorder(["ko", "ii", "nest.1"])
    return s


def gemm_inputs(s, dtype=np.float32):
    rng = np.random.default_rng(7)
    M, N, K = (s.sizes[n] for n in "MNK")
    return {"A": rng.standard_normal((M, K)).astype(dtype), "B": rng.standard_normal((K, N)).astype(np.float32),
            "C": rng.standard_normal((M, N)).astype(np.float32)}


def assert_same_everywhere(s, base, proved=True):
    """``s`` computes bit for bit what ``base`` computes, on the interpreter and in C (compiled unproved,
    marked so, when ``proved`` is False)."""
    arrays = gemm_inputs(s, np.float16 if s.kernel is gemm_f16 else np.float32)
    want = base.run(**{k: v.copy() for k, v in arrays.items()})["C"]
    np.testing.assert_array_equal(s.run(**{k: v.copy() for k, v in arrays.items()})["C"], want)
    c = {k: v.copy() for k, v in arrays.items()}
    tc.compile(s, allow_unproved=not proved).run_in_place(**c)
    np.testing.assert_array_equal(c["C"], want)


def proved(s):
    report = s.check()
    assert all(r.verdict.proved for r in report), [(r.subject, r.kind, r.verdict) for r in report
                                                   if not r.verdict.proved]
    return report


def decl(s, name):
    return next(st.buf for st in ir.walk(s.program.body) if isinstance(st, L.Decl) and st.buf.name == name)


def shape(s, name):
    return tuple(int(evaluate(e, s.sizes, {})) for e in decl(s, name).shape)


def loads_of(s, name):
    return [st for st in ir.walk(s.program.body) if isinstance(st, L.Assign) and st.buf == name]


def raises(fn, *args, match, **kwargs):
    with pytest.raises(ScheduleError, match=match) as info:
        fn(*args, **kwargs)
    assert info.value.hint, "every ScheduleError carries a hint"


# ============================================================================ packing (shared=False)
def test_packing_gemm_stages_a_tile_per_k_block():
    s = blocked(gemm_rmw, M=8, N=6, K=4)
    base = blocked(gemm_rmw, M=8, N=6, K=4)
    assert s.stage("A", ["ii", "ki"]) == "A.tile"
    assert shape(s, "A.tile") == (4, 2)
    names = [lp.name for lp in s.loops()]
    assert names == ["io", "ko", "A.tile.load0", "A.tile.load1", "ii", "nest.1", "ki"]
    (load,) = loads_of(s, "A.tile")
    assert isinstance(load.value, L.Ld) and load.value.buf == "A"  # dividing: the edge guard folds away
    reads = {ld.buf for st in ir.walk(s.program.body) if isinstance(st, L.Assign) for ld in L.loads(st.value)}
    assert "A" in reads and sum(ld.buf == "A" for st in ir.walk(s.program.body) if isinstance(st, L.Assign)
                                for ld in L.loads(st.value)) == 1  # only the load reads A
    (d,) = s.transforms[-1].datamaps
    assert isinstance(d, Copy) and (d.buffer, d.source, d.live.load, d.live.store) == ("A.tile", "A", load, None)
    assert_same_everywhere(s, base)
    proved(s)


def test_packing_both_operands_and_the_checker_proves_each():
    s = blocked(gemm_rmw, M=8, N=6, K=4)
    base = blocked(gemm_rmw, M=8, N=6, K=4)
    s.stage("A", ["ii", "ki"])
    assert s.stage("B", ["ki", "nest.1"]) == "B.tile"
    assert shape(s, "B.tile") == (2, 6)
    assert_same_everywhere(s, base)
    report = proved(s)
    assert {r.kind for r in report if "op 3: stage" in r.subject} >= {"datamap", "dependence", "coverage", "bounds"}


def edge_schedule():
    s = blocked(gemm_rmw, M=7, N=6, K=5)
    base = blocked(gemm_rmw, M=7, N=6, K=5)
    s.stage("A", ["ii", "ki"])
    return s, base


def test_an_edge_tile_loads_in_where_form():
    s, base = edge_schedule()
    (load,) = loads_of(s, "A.tile")
    assert isinstance(load.value, L.Sel) and load.value.a.buf == "A" and load.value.b == L.Lit(0.0, "f32")
    assert_same_everywhere(s, base, proved=False)


def test_an_edge_tile_is_proved():
    report = proved(edge_schedule()[0])
    assert report.ok and report.status("zero_fringe") == "proved", report.explain()


# ============================================================================ tile_prec
def test_a_widened_tile_converts_once_at_load():
    s = blocked(gemm_f16, M=8, N=6, K=4)
    base = blocked(gemm_f16, M=8, N=6, K=4)
    s.stage("A", ["ii", "ki"], tile_prec="f32")
    assert decl(s, "A.tile").dtype == "f32"
    (load,) = loads_of(s, "A.tile")
    assert load.value == L.Cvt(L.Ld("A", load.value.x.index, "f16"), "f32")
    users = [ld for st in ir.walk(s.program.body) if isinstance(st, L.Assign) for ld in L.loads(st.value)
             if ld.buf == "A.tile"]
    assert users and all(ld.dtype == "f32" for ld in users)
    assert_same_everywhere(s, base, proved=False)


def test_a_tile_at_the_source_precision_keeps_the_conversion_of_its_reads():
    s = blocked(gemm_f16, M=8, N=6, K=4)
    s.stage("A", ["ii", "ki"], tile_prec="f64")
    f64_reads = [e for st in ir.walk(s.program.body) if isinstance(st, L.Assign) for e in [st.value]
                 if isinstance(e, L.Cvt) and isinstance(e.x, L.Ld) and e.x.buf == "A.tile"]
    assert f64_reads and all(e.dtype == "f16" for e in f64_reads)  # a bare read converts the tile back, exactly
    assert_same_everywhere(s, blocked(gemm_f16, M=8, N=6, K=4), proved=False)


def test_a_widened_tile_is_proved():
    s = blocked(gemm_f16, M=8, N=6, K=4)
    s.stage("A", ["ii", "ki"], tile_prec="f32")
    report = proved(s)
    assert report.ok and report.status("datamap") == "proved", report.explain()


def test_a_narrowing_tile_is_refused():
    s = blocked(gemm_rmw, M=8, N=6, K=4)
    raises(s.stage, "A", ["ii", "ki"], tile_prec="f16", match="not an exact widening of the source's f32")
    raises(s.stage, "A", ["ii", "ki"], tile_prec="i32", match="not an exact widening")


# ============================================================================ shared (GPU)
@tc.kernel
def scale_cols(X: tc.Tensor[f32, "M", "N"], w: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "M", "N"]):
    M, N = X.shape
    for nest in tc.parallel(M, N):
        i, j = nest.index(0), nest.index(1)
        Y.at(i, j).store(X.at(i, j).load() * w.at(j).load())


def gpu(M=8, N=8, K=8, b=4, threads=(("ii", "block1"), ("ji", "block0"))):
    """The blocked GEMM on a GPU shape: ``io`` / ``jo`` blocks, ``ii`` / ``ji`` threads (``threads``), the K block
    loop ``ko`` at block level (outside the thread loops) and ``ki`` serial per thread."""
    s = tc.schedule(gemm_rmw, M=M, N=N, K=K)
    s.split("nest.0", b, outer="io", inner="ii")
    s.split("nest.1", b, outer="jo", inner="ji")
    s.split("k", b, outer="ko", inner="ki")
    s.reorder(["io", "jo", "ko", "ii", "ji"])
    for loop, binding in [("io", "grid1"), ("jo", "grid0"), *threads]:
        s.bind(loop, binding)
    return s


def barriers(block):
    return [st for st in ir.walk(block) if isinstance(st, L.Barrier)]


def the_loop(s, name):
    return next(lp for lp in L.loops(s.program.body) if lp.name == name)


def lowered(s):
    low = lower_for("cuda-host", s.program, s.sizes)
    assert low.barriers is not None and low.barriers.ok, low.barriers.explain()
    return low


def cuda_host(s, arrays, proved=True):
    c = {k: v.copy() for k, v in arrays.items()}
    tc.compile(s, target="cuda-host", allow_unproved=not proved).run_in_place(**c)
    return c


def test_shared_gemm_stages_a_and_b_in_one_phase():
    s = gpu()
    assert s.stage("A", ["ii", "ki"], shared=True, cooperative=4) == "A.tile"
    assert s.stage("B", ["ki", "ji"], shared=True) == "B.tile"
    body = the_loop(s, "ko").body.ops
    kinds = [type(st).__name__ for st in body]
    assert kinds == ["Decl", "Decl", "Loop", "Loop", "Barrier", "Loop", "Barrier"]  # one phase, one closer
    assert [st.buf.scope for st in body[:2]] == ["shared", "shared"]
    # A: ii reused as the block1 index, the ki copy loop taken by the 4 cooperative lanes (extent 4: no guard)
    assert [(lp.name, lp.binding) for lp in L.loops(ir.Block((), (body[2],)))] == \
        [("A.tile.load0", "block1"), ("A.tile.lane", "block0")]
    # B: ki copied under a fresh serial loop, ji reused; the barrier pass runs it on the threads with block1 == 0
    assert [(lp.name, lp.binding) for lp in L.loops(ir.Block((), (body[3],)))] == \
        [("B.tile.load0", None), ("B.tile.load1", "block0")]
    proved(s)
    low = lowered(s)
    ko = next(lp for lp in L.loops(low.program.body) if lp.name == "ko")
    # Stage's two barriers per iteration and no other: both tiles are proved written before read (no zero fill)
    assert len(barriers(ko.body)) == 2 and len(barriers(low.program.body)) == 2
    assert not any(lp.name.endswith(".zero") for lp in L.loops(low.program.body))
    report = tc.differential(s, target="cuda-host", trials=2)
    assert report.matched, report


def test_the_cooperative_lanes_fold_into_the_innermost_copy_loop():
    """e <= w: the lane is the copy index under ``lane < e``; w | e: e / w chunks at ``w*c + lane``; otherwise
    lane 0 copies alone. Each computes what the unstaged schedule computes on the host emulation."""
    arrays = gemm_inputs(gpu())
    want = gpu().run(**{k: v.copy() for k, v in arrays.items()})["C"]
    for lanes, shape in [(8, "guard"), (2, "chunks"), (3, "lane0")]:
        s = gpu()
        s.stage("A", ["ii", "ki"], shared=True, cooperative=lanes)
        (load,) = loads_of(s, "A.tile")
        nest_text = s.loop_tree()
        if shape == "guard":
            assert "(A.tile.lane < 4)" in nest_text and load.index[1] == IVar(the_loop(s, "A.tile.lane").var, 0)
        elif shape == "chunks":
            assert the_loop(s, "A.tile.load1").extent == IConst(2) and "(2 * A.tile.load1) + A.tile.lane" in nest_text
        else:
            assert "(A.tile.lane == 0)" in nest_text
        proved(s)
        np.testing.assert_array_equal(cuda_host(s, arrays)["C"], want)


def test_a_chunked_cooperative_copy_with_a_wrong_chunk_count_is_disproved():
    """The chunked lane plan writes tile cell ``w*c + lane``; one chunk too many transfers a cell out of the
    tile, which the checker's copy rule disproves (the legal plan is proved above)."""
    s = gpu()
    s.stage("A", ["ii", "ki"], shared=True, cooperative=2)
    proved(s)
    chunk = the_loop(s, "A.tile.load1")

    class OneMore(Mapper):
        def map_loop(self, st):
            st = super().map_loop(st)
            return dataclasses.replace(st, extent=ibin("add", st.extent, IConst(1))) if st.var == chunk.var else st

    bad = dataclasses.replace(s.program, body=OneMore().map_block(s.program.body))
    t = s.transforms[-1]
    r = check_transform(s.programs[-2], bad, t.tau, s.sizes, listed=t.obligations, datamaps=t.datamaps)
    assert any(v.kind == "datamap" and v.verdict.status == "disproved" for v in r), [(v.kind, v.verdict) for v in r]


def test_a_broadcast_vector_with_no_anchor_wraps_the_outermost_tile_loop():
    s = tc.schedule(scale_cols, M=4, N=8)
    s.bind("nest.0", "grid0")
    s.bind("nest.1", "block0")
    assert s.stage("w", ["nest.1"], shared=True) == "w.tile"
    grid = the_loop(s, "nest.0")
    assert [type(st).__name__ for st in grid.body.ops] == ["Decl", "Loop", "Barrier", "Loop", "Barrier"]
    assert grid.body.ops[3].name == "nest.1"
    proved(s)
    lowered(s)
    assert tc.differential(s, target="cuda-host", trials=2).matched


def test_a_staging_point_inside_a_thread_loop_is_refused_as_a_race():
    s = tc.schedule(gemm_rmw, M=8, N=8, K=8)
    s.split("nest.0", 4, outer="io", inner="ii")
    s.split("k", 4, outer="ko", inner="ki")
    s.bind("io", "grid0")
    s.bind("ii", "block0")
    raises(s.stage, "A", ["ki"], shared=True, match="lies inside loop 'ii', bound to block0: threads differing")


# ============================================================================ pipeline_depth
def pipelined(depth, K=8):
    s = gpu(K=K)
    s.stage("A", ["ii", "ki"], shared=True, cooperative=4, pipeline_depth=depth)
    return s


def executed_barriers(s, program=None):
    """Barriers the loop form (``s.program``, or ``program`` with the same ``ko``) runs per block: those in
    ``ko`` times its trips, plus the others."""
    program = program or s.program
    ko = next(lp for lp in L.loops(program.body) if lp.name == "ko")
    inside = len(barriers(ko.body))
    return inside * int(evaluate(ko.extent, s.sizes, {})) + len(barriers(program.body)) - inside


@pytest.mark.parametrize("K", [8, 4, 16])  # N = 2, 1 (the prefetch guard folds away), 4 iterations of ko
def test_pipelined_depth_2_is_bitwise_equal_to_depth_1(K):
    one, two = pipelined(1, K), pipelined(2, K)
    ko = the_loop(two, "ko")
    assert decl(two, "A.tile").shape[0] == IConst(2) and ko.body.ops[0] == L.Barrier("block", ko.loc)
    n = K // 4
    assert executed_barriers(one) == 2 * n and executed_barriers(two) == n + 1
    assert (f"if (ko < {n - 1})" in two.loop_tree()) == (n > 1)
    proved(two)
    # after the barrier pass too: no zero fill (the ring is written before read), no barrier between the
    # prefetch of slot (k + 1) mod 2 and the reads of slot k mod 2, none before the loop or at its end
    for s, want in ((one, 2 * n), (two, n + 1)):
        low = lowered(s)
        assert all(r.verdict.proved for r in low.barriers), low.barriers.explain()
        assert executed_barriers(s, low.program) == want
        assert not any(lp.name.endswith(".zero") for lp in L.loops(low.program.body))
    arrays = gemm_inputs(two)
    np.testing.assert_array_equal(two.run(**{k: v.copy() for k, v in arrays.items()})["C"],
                                  one.run(**{k: v.copy() for k, v in arrays.items()})["C"])
    np.testing.assert_array_equal(cuda_host(two, arrays)["C"], cuda_host(one, arrays)["C"])


# ============================================================================ hoisted (a constant packed once)
def test_a_hoisted_constant_weight_is_packed_once_before_the_routine():
    s = blocked(gemm_rmw, M=8, N=6, K=4)
    base = blocked(gemm_rmw, M=8, N=6, K=4)
    assert s.constant("A") == () and constant_inputs(s.program) == {"A"}
    assert s.stage("A", ["ii", "ki"], hoisted=True) == "A.packed"
    first, pack = s.program.body.ops[:2]
    assert isinstance(first, L.Decl) and first.buf.scope == "constant"
    assert shape(s, "A.packed") == (2, 2, 4, 2)  # the outer coordinates (io, ko), then the tile axes
    assert [lp.name for lp in L.loops(ir.Block((), (pack,)))] == ["A.packed.q0", "A.packed.q1", "A.packed.u0",
                                                                   "A.packed.u1"]
    (load,) = loads_of(s, "A.packed")
    assert sum(ld.buf == "A" for st in ir.walk(s.program.body) if isinstance(st, L.Assign)
               for ld in L.loads(st.value)) == 1 and isinstance(load.value, L.Ld)
    reads = [ld for st in ir.walk(s.program.body) if isinstance(st, L.Assign) for ld in L.loads(st.value)
             if ld.buf == "A.packed" and st is not load]
    assert [r.index for r in reads] == [tuple(IVar(the_loop(s, n).var, 0) for n in ("io", "ko", "ii", "ki"))]
    assert_same_everywhere(s, base)
    proved(s)


def test_a_hoisted_edge_pack_zero_fills_its_pad_slots():
    s = blocked(gemm_rmw, M=7, N=6, K=4)
    s.constant("A")
    s.stage("A", ["ii", "ki"], hoisted=True)
    (load,) = loads_of(s, "A.packed")
    assert isinstance(load.value, L.Sel) and load.value.b == L.Lit(0.0, "f32")
    assert_same_everywhere(s, blocked(gemm_rmw, M=7, N=6, K=4), proved=False)


def test_constant_refuses_a_written_tensor_and_a_non_tensor():
    s = blocked(gemm_rmw, M=8, N=6, K=4)
    raises(s.constant, "C", match="the program writes 'C'")
    s.stage("A", ["ii", "ki"])
    raises(s.constant, "A.tile", match="'A.tile' is not a tensor parameter")


# ============================================================================ pad_stride
def test_pad_stride_rounds_the_minor_extent_up_and_iterates_the_unpadded_tile():
    s = blocked(gemm_rmw, M=8, N=6, K=4)
    s.stage("A", ["ii", "ki"], pad_stride=4)
    assert shape(s, "A.tile") == (4, 4)
    assert int(evaluate(the_loop(s, "A.tile.load1").extent, s.sizes, {})) == 2
    assert_same_everywhere(s, blocked(gemm_rmw, M=8, N=6, K=4))
    proved(s)


# ============================================================================ preconditions
@tc.kernel
def reversed_rows(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"]):
    N = X.shape[0]
    for nest in tc.parallel(N):
        Y.at(nest.index(0)).store(X.at(N - 1 - nest.index(0)).load())


@tc.kernel
def ignores_w(X: tc.Tensor[f32, "N"], W: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"]):
    N = X.shape[0]
    for nest in tc.parallel(N):
        Y.at(nest.index(0)).store(X.at(nest.index(0)).load())


@tc.kernel
def two_cells(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"]):
    N = X.shape[0]
    for nest in tc.parallel(N):
        Y.at(nest.index(0)).store(X.at(nest.index(0)).load() + X.at(0).load())


def packing():
    return blocked(gemm_rmw, M=8, N=6, K=4)


def unbound_k():
    s = tc.schedule(gemm_rmw, M=8, N=8)
    s.split("nest.0", 4, outer="io", inner="ii")
    s.split("nest.1", 4, outer="jo", inner="ji")
    s.split("k", 4, outer="ko", inner="ki")
    s.reorder(["io", "jo", "ko", "ii", "ji"])
    for loop, binding in [("io", "grid1"), ("jo", "grid0"), ("ii", "block1"), ("ji", "block0")]:
        s.bind(loop, binding)
    return s


def broadcast(threads="block0"):
    s = tc.schedule(scale_cols, M=4, N=8)
    s.bind("nest.0", "grid0")
    s.bind("nest.1", threads)
    return s


def with_tile():
    s = packing()
    s.stage("A", ["ii", "ki"])
    return s


def not_reordered():
    s = tc.schedule(gemm_rmw, M=8, N=6, K=4)
    s.split("nest.0", 4, outer="io", inner="ii")
    s.split("k", 2, outer="ko", inner="ki")
    return s


def unrolled():
    s = gpu()
    s.unroll("ki")
    return s


def two_level():
    s = packing()
    s.split("ii", 2, outer="iio", inner="iii")
    return s


PRECONDITIONS = [
    (packing, ("A", ["ii", "ki"]), dict(cooperative=4), "cooperative loading needs shared=True"),
    (gpu, ("A", ["ii", "ki"]), dict(shared=True, cooperative=4, pipeline_depth=3),
     "pipeline_depth=3 is not implemented"),
    (gpu, ("A", ["ii", "ki"]), dict(shared=True, pipeline_depth=2), "pipeline_depth=2 needs a cooperative"),
    (gpu, ("A", ["ii", "ki"]), dict(shared=True, hoisted=True), "a hoisted pack is computed once on the host"),
    (packing, ("A", ["ii", "ki"]), dict(hoisted=True, pad_stride=4), "a hoisted pack takes no padding"),
    (packing, ("A", ["ii", "ki"]), dict(swizzle="elem"), "a swizzle permutes a block-shared tile"),
    (packing, ("A", ["ii", "ki"]), dict(pad_stride=1), "pad_stride=1 pads nothing"),
    (lambda: tc.schedule(ignores_w, N=8), ("W", ["nest"]), {}, "no reads of 'W'"),
    (packing, ("C", ["ii"]), {}, "'C' is written in the routine"),
    (lambda: tc.schedule(two_cells, N=8), ("X", ["nest"]), {}, "do not share one index vector"),
    (with_tile, ("B", ["A.tile.load0"]), {}, "tile loop 'A.tile.load0' does not enclose every read of 'B'"),
    (lambda: tc.schedule(reversed_rows, N=8), ("X", ["nest"]), {}, "not an increasing affine function"),
    (packing, ("A", ["ii", "nest.1"]), {}, "does not read tile loop 'nest.1'"),
    (gpu, ("A", ["ii", "ki"]), {}, "tile loop 'ii' is bound to block1; a packing copy"),
    (not_reordered, ("A", ["ii", "ki"]), {}, "tile loop 'ii' encloses the anchor 'ko'"),
    (broadcast, ("w", ["nest.1"]), dict(pad_stride=2), "pad_stride needs a tile of rank >= 2"),
    (gpu, ("A", ["io", "ki"]), dict(shared=True), "tile loop 'io' is bound to grid1"),
    (unrolled, ("A", ["ii", "ki"]), dict(shared=True), "tile loop 'ki' is unrolled"),
    (gpu, ("B", ["ki", "ji"]), dict(shared=True, cooperative=4), "tile loop 'ji' binds already"),
    (broadcast, ("w", ["nest.1"]), dict(shared=True, swizzle="elem"), "a tile of rank >= 2"),
    (lambda: gpu(M=6, N=6, K=6, b=3), ("A", ["ii", "ki"]), dict(shared=True, swizzle="elem"),
     "swizzle='elem' does not apply to the tile: .*power-of-two"),
    (lambda: broadcast("block1"), ("w", ["nest.1"]), dict(shared=True, cooperative=8, pipeline_depth=2),
     "have none"),
    (lambda: broadcast("block1"), ("X", ["nest.1"]), dict(shared=True, cooperative=8, pipeline_depth=2),
     "needs a serial anchor from 0; 'nest.0' is parallel bound to grid0"),
    (unbound_k, ("A", ["ii", "ki"]), dict(shared=True, cooperative=4, pipeline_depth=2), "is not proved >= 1"),
    (packing, ("A", ["ii", "ki"]), dict(hoisted=True), "must be marked constant"),
    (lambda: tc.schedule(scale_cols, M=4), ("w", ["nest.1"]), dict(hoisted=True), "needs constant tile extents"),
    (two_level, ("A", ["iio", "ki"]), dict(hoisted=True), "is not a multiple of the tile extent 3"),
]


@pytest.mark.parametrize("make, args, kwargs, match", PRECONDITIONS,
                         ids=lambda c: c[:40] if isinstance(c, str) else None)
def test_each_precondition_failure_is_a_schedule_error_saying_what_to_change(make, args, kwargs, match):
    s = make()
    if kwargs.get("hoisted") and match != "must be marked constant":
        s.constant(args[0])
    raises(s.stage, *args, match=match, **kwargs)


# ============================================================================ illegal twins
def without_barrier(p, k):
    """``p`` with its ``k``-th barrier (in program order) removed."""
    seen = [-1]

    class Strip(Mapper):
        def map_barrier(self, st):
            seen[0] += 1
            return None if seen[0] == k else st

    return dataclasses.replace(p, body=Strip().map_block(p.body))


def test_a_stage_barrier_removed_from_the_placed_program_is_a_race_with_a_witness_that_replays():
    s = gpu()
    s.stage("A", ["ii", "ki"], shared=True, cooperative=4)
    s.stage("B", ["ki", "ji"], shared=True)
    placed = lowered(s).program
    assert tc.check(placed, s.sizes).ok
    # barriers: after the loads (Stage's), the phase closer (Stage's)
    for k in (0, 1):
        twin = without_barrier(placed, k)
        report = tc.check(twin, s.sizes)
        (ni,) = [r for r in report if r.kind == "noninterference"]
        assert ni.status == "disproved", report.explain()
        assert ni.verdict.witness.replay.startswith("CONFIRMED"), ni.verdict.witness.replay


def test_a_tile_not_proved_written_before_read_keeps_its_zero_fill():
    """The A load guarded to lanes < 3: column 3 of the tile is read but never written, so its zero fill
    (what the declaration means) stays, ordered before the reads; B's fill is still dropped."""
    s = gpu()
    s.stage("A", ["ii", "ki"], shared=True, cooperative=4)
    s.stage("B", ["ki", "ji"], shared=True)
    lane = the_loop(s, "A.tile.lane")

    class Partial(Mapper):
        def map_loop(self, st):
            st = super().map_loop(st)
            if st.var != lane.var:
                return st
            return dataclasses.replace(st, body=ir.Block((), (L.If(IBin("lt", IVar(st.var, 0), IConst(3)), st.body),)))

    twin = dataclasses.replace(s.program, body=Partial().map_block(s.program.body))
    low = lower_for("cuda-host", twin, s.sizes)
    assert all(r.verdict.proved for r in low.barriers), low.barriers.explain()
    assert [lp.name for lp in L.loops(low.program.body) if lp.name.endswith(".zero")] == ["A.tile.zero"]
    ko = next(lp for lp in L.loops(low.program.body) if lp.name == "ko")
    # the fill goes before the loads, in the phase they open: each thread zeroes the one cell (row-major over
    # the 16 threads) that it then loads, and the barrier after the loads orders both before the reads
    kinds = [type(st).__name__ for st in ko.body.ops]
    assert ko.body.ops[0].name == "A.tile.zero" and kinds.count("Barrier") == 2 and kinds[-1] == "Barrier"
    arrays = gemm_inputs(s)
    c = {k: v.copy() for k, v in arrays.items()}
    tc.compile(twin, target="cuda-host", allow_unproved=True).run_in_place(**c)
    np.testing.assert_array_equal(c["C"], tc.run(twin, **{k: v.copy() for k, v in arrays.items()})["C"])


class _SameSlot(Mapper):
    """The prefetch of a depth-2 ring ``tile`` into slot ``k mod 2``, the slot the compute reads."""

    def __init__(self, tile, k):
        self.tile, self.slot = tile, ibin("mod", IVar(k, 0), IConst(2))

    def map_assign(self, st):
        st = super().map_assign(st)
        if st.buf == self.tile and st.index[0] != IConst(0):
            st = dataclasses.replace(st, index=(self.slot,) + st.index[1:])
        return st


def test_a_prefetch_into_the_slot_being_read_gets_a_barrier_and_without_it_is_disproved():
    """The pass's per-cell test: slot (k + 1) mod 2 and slot k mod 2 never meet, slot k mod 2 and itself do.
    Its omission would not be trusted: the placed program with the slot changed and no barrier is disproved."""
    s = pipelined(2)
    same = _SameSlot("A.tile", the_loop(s, "ko").var)
    twin = place_barriers(bind_sizes(dataclasses.replace(s.program, body=same.map_block(s.program.body)), s.sizes),
                          sizes=s.sizes)
    ko = next(lp for lp in L.loops(twin.body) if lp.name == "ko")
    assert len(barriers(ko.body)) == 2  # Stage's, and one between the prefetch and the compute
    placed = lowered(s).program
    wrong = dataclasses.replace(placed, body=same.map_block(placed.body))
    report = tc.check(wrong, s.sizes)
    (ni,) = [r for r in report if r.kind == "noninterference"]
    assert ni.status == "disproved", report.explain()
    assert ni.verdict.witness.replay.startswith("CONFIRMED"), ni.verdict.witness.replay


def test_a_staged_kernel_without_its_phase_barrier_is_a_thread_sanitizer_race_and_disproved():
    """The emitted pipelined, cooperative kernel is TSan-clean; with the barrier at the top of ``ko`` removed
    from its placed program, the prefetch of one iteration races with the reads of the next: ThreadSanitizer
    reports it, and the checker disproves noninterference with a witness that replays."""
    s = pipelined(2)
    placed = lowered(s).program
    arrays = gemm_inputs(s)
    want = s.run(**{k: v.copy() for k, v in arrays.items()})["C"]
    clean = tc.compile(placed, target="cuda-host", sanitize=True, allow_unproved=True)(
        **{k: v.copy() for k, v in arrays.items()})
    np.testing.assert_array_equal(clean["C"], want)
    racy = without_barrier(placed, 0)
    (ni,) = [r for r in tc.check(racy, s.sizes) if r.kind == "noninterference"]
    assert ni.status == "disproved" and ni.verdict.witness.replay.startswith("CONFIRMED"), ni.verdict.witness.replay
    with pytest.raises(SanitizerError, match="reports a data race") as info:
        tc.compile(racy, target="cuda-host", sanitize=True, allow_unproved=True)(
            **{k: v.copy() for k, v in arrays.items()})
    assert "WARNING: ThreadSanitizer: data race" in info.value.message


class _SlotZero(Mapper):
    """Every access of the ring ``tile`` at slot 0 (one slot reused by every version); ``nodes`` maps each
    rewritten statement to its twin."""

    def __init__(self, tile):
        self.tile, self.nodes = tile, {}

    def map_ld(self, e):
        return dataclasses.replace(e, index=(IConst(0),) + e.index[1:]) if e.buf == self.tile else e

    def map_assign(self, st):
        new = super().map_assign(st)
        if new.buf == self.tile:
            new = dataclasses.replace(new, index=(IConst(0),) + new.index[1:])
        self.nodes[id(st)] = new
        return new


def test_a_ring_whose_slot_is_reused_too_early_is_disproved_with_a_witness_that_replays():
    s = pipelined(2)
    (ring,) = s.transforms[-1].datamaps
    zero = _SlotZero(ring.buffer)
    twin = dataclasses.replace(s.program, body=zero.map_block(s.program.body))
    early = dataclasses.replace(ring, slot=IConst(0),
                                fills=tuple((zero.nodes[id(st)], v) for st, v in ring.fills),
                                uses=tuple((zero.nodes[id(st)], v) for st, v in ring.uses))
    r = check_transform(s.programs[-2], twin, Tau(), s.sizes, datamaps=(early,), final=False)
    (d,) = r.verdicts(Kind.DATAMAP)
    assert d.status == "disproved" and "overwrites" in d.witness.summary, r.explain()
    assert d.witness.replay.startswith("CONFIRMED"), d.witness.lines()


def test_a_staged_schedule_saves_and_replays_to_the_same_program():
    s = pipelined(2)
    s.stage("B", ["ki", "ji"], shared=True)
    again = s.replay()
    assert again.history == s.history and digest(again.program) == digest(s.program)
    assert again.history[-2] == ("stage", {"source": "A", "tile_loops": ["ii", "ki"], "shared": True,
                                           "cooperative": 4, "pipeline_depth": 2})


@pytest.mark.parametrize("K", [8, 4])
def test_pipelined_stages_on_one_anchor_share_its_barrier_and_prefetch_guard(K):
    s = gpu(K=K, threads=(("ii", "block1"),))  # ji unbound: both stages can take the block0 lanes
    base = gpu(K=K, threads=(("ii", "block1"),))
    s.stage("A", ["ii", "ki"], shared=True, cooperative=4, pipeline_depth=2)
    s.stage("B", ["ki", "ji"], shared=True, cooperative=4, pipeline_depth=2)
    n = K // 4
    assert executed_barriers(s) == n + 1
    ko = the_loop(s, "ko")
    if n > 1:
        (guard,) = [st for st in ko.body.ops if isinstance(st, L.If)]
        assert {st.buf for st in ir.walk(guard.body) if isinstance(st, L.Assign)} == {"A.tile", "B.tile"}
    proved(s)
    arrays = gemm_inputs(s)
    np.testing.assert_array_equal(cuda_host(s, arrays)["C"], base.run(**{k: v.copy() for k, v in arrays.items()})["C"])


@tc.kernel
def transpose(X: tc.Tensor[f32, "M", "N"], Y: tc.Tensor[f32, "N", "M"]):
    for nest in tc.parallel(X.shape[0], X.shape[1]):
        Y.at(nest.index(1), nest.index(0)).store(X.at(nest.index(0), nest.index(1)).load())


@pytest.mark.parametrize("kind", ["elem", "b128"])
def test_a_swizzled_shared_transpose_is_proved_and_matches_on_the_host_emulation(kind):
    """An 8 x 8 block of ``X`` staged into a swizzled shared tile (f32: ``b128`` permutes two 16-byte units of
    a row): the layout obligation proves the map a bijection of each row, and the host emulation, which
    stores every access at its physical offset, computes the unstaged transpose."""
    s = tc.schedule(transpose, M=16, N=16)
    s.split("nest.0", 8, outer="io", inner="ii")
    s.split("nest.1", 8, outer="jo", inner="ji")
    s.reorder(["io", "jo", "ii"])
    for loop, binding in [("io", "grid1"), ("jo", "grid0"), ("ii", "block1"), ("ji", "block0")]:
        s.bind(loop, binding)
    tile = s.stage("X", ["ii", "ji"], shared=True, swizzle=kind)
    assert str(decl(s, tile).layout) == f"swizzle({kind})"
    report = proved(s)
    assert any(r.kind == "layout" for r in report)
    x = np.arange(256, dtype=np.float32).reshape(16, 16)
    c = {"X": x.copy(), "Y": np.zeros((16, 16), np.float32)}
    tc.compile(s, target="cuda-host").run_in_place(**c)
    np.testing.assert_array_equal(c["Y"], x.T)


def test_a_swizzle_reads_the_tile_extent_at_the_bound_sizes():
    """A tile whose minor extent is a size expression (``1 + (N - 1)``) takes the swizzle when the schedule
    binds that size to a power of two; the layout obligation then proves it at those sizes."""
    s = tc.schedule(transpose, M=16, N=16)
    s.split("nest.0", 8, outer="io", inner="ii")
    s.bind("io", "grid0")
    s.bind("ii", "block1")
    s.bind("nest.1", "block0")
    tile = s.stage("X", ["ii", "nest.1"], shared=True, swizzle="elem")
    assert str(decl(s, tile).layout) == "swizzle(elem)"
    proved(s)
