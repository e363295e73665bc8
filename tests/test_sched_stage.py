"""stage(source, tile_loops, ...): reads of a source through a fresh tile, in each mode.

Kernels reach the staging form with today's ops: a scalar-descent GEMM accumulating straight into
``C`` in a serial K loop, split and reordered so that the K tile loop runs inside the K block
loop. Each staged schedule computes bit for bit what the unstaged one computes (interpreter and
C), the checker proves it, and every precondition failure is a typed ``ScheduleError`` with a hint.
"""
import numpy as np
import pytest

import tilecert as tc
from tilecert import f16, f32
from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.index import evaluate
from tilecert.semantics.sched.base import ScheduleError
from tilecert.semantics.transform import Copy

EDGE = pytest.mark.xfail(strict=True, reason="needs the checker's edge-guarded copies")


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
    M, K = A.shape
    N = B.shape[1]
    for nest in tc.parallel(M, N):
        i, j = nest.index(0), nest.index(1)
        for k in nest.serial(K):
            C.at(i, j).store(C.at(i, j).load() + tc.cast(A.at(i, k.index()).load(), f32) * B.at(k.index(), j).load())


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


@EDGE
def test_an_edge_tile_is_proved():
    proved(edge_schedule()[0])


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


@EDGE
def test_a_widened_tile_is_proved():
    s = blocked(gemm_f16, M=8, N=6, K=4)
    s.stage("A", ["ii", "ki"], tile_prec="f32")
    proved(s)


def test_a_narrowing_tile_is_refused():
    s = blocked(gemm_rmw, M=8, N=6, K=4)
    raises(s.stage, "A", ["ii", "ki"], tile_prec="f16", match="not an exact widening of the source's f32")
    raises(s.stage, "A", ["ii", "ki"], tile_prec="i32", match="not an exact widening")
