"""Stage end to end: the scalar-descent GEMM (``examples/gemm_scalar.py``) reaches the staging form and is staged.

The descent: ``expand_dim`` gives the scalar accumulator one axis per output loop, ``lift_alloc`` moves it out
of the nest, ``split`` tiles i, j and k, ``reorder`` makes the tile band ``io, jo, ii, ji``, four ``fission``\\ s
distribute ``ji`` then ``ii`` over the init / K loop / store statements (three nests), and a last ``reorder``
moves ``ko`` outside the compute nest: ``io, jo, ko, ii, ji, ki``, the form Stage applies to. Every op's
check is proved. Then, staged: (a) packed on the CPU (A and B, acc privatized across ``ko``), proved and bit
for bit the kernel's result in C; (b) on a GPU shape (A cooperative, B, one phase), proved, and the CUDA
host emulation bit for bit; a register-blocktiled form (Split, Stage, Privatize, materializing Unroll),
proved and bit for bit in C; the non-dividing 33 x 65 x 70 padded and staged shared, its zero fringe
stated and proved; and the C backend refusing a shared stage with a typed error.
"""
import numpy as np
import pytest

import tilecert as tc
from examples import EXAMPLES
from tilecert.lowering.pipeline import lower_for
from tilecert.lowering.program import LoweringError
from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.index import IConst
from tilecert.semantics.transform import Kind

GEMM = EXAMPLES["gemm_scalar"].kernel
THREADS = [("ii.f0", "block1"), ("ji.f0", "block0"), ("ii.f1.f0", "block1"), ("ji.f1.f0", "block0"),
           ("ii.f1.f1", "block1"), ("ji.f1.f1", "block0")]


def descended(M, N, K, bm, bn, bk, pad=False):
    """The scalar-descent GEMM in the staging form, each op's returned handles asserted; with ``pad``, the
    three loops padded to multiples of their tiles first (no split remainder)."""
    s = tc.schedule(GEMM, M=M, N=N, K=K)
    assert s.expand_dim("acc", ["nest.0", "nest.1"]) == ()
    assert s.lift_alloc("acc", "nest.0") == ()
    if pad:
        for loop, t in [("nest.0", bm), ("nest.1", bn), ("k", bk)]:
            assert s.pad(loop, t) == ()
    assert s.split("nest.0", bm, outer="io", inner="ii") == ("io", "ii")
    assert s.split("nest.1", bn, outer="jo", inner="ji") == ("jo", "ji")
    assert s.split("k", bk, outer="ko", inner="ki") == ("ko", "ki")
    assert s.reorder(["io", "jo", "ii", "ji"]) == ()
    assert s.fission("ji", after="acc") == ("ji.f0", "ji.f1")  # acc = 0 | the K loop and the store
    assert s.fission("ji.f1", after="ko") == ("ji.f1.f0", "ji.f1.f1")  # the K loop | the store
    assert s.fission("ii", after="ji.f0") == ("ii.f0", "ii.f1")
    assert s.fission("ii.f1", after="ji.f1.f0") == ("ii.f1.f0", "ii.f1.f1")
    assert s.reorder(["ko", "ii.f1.f0", "ji.f1.f0"]) == ()
    return s


def bound(s):
    for loop, binding in [("io", "grid1"), ("jo", "grid0"), *THREADS]:
        assert s.bind(loop, binding) == ()
    return s


def all_proved(s):
    report = s.check()
    open_ = [(r.subject, r.kind, r.verdict) for r in report if not r.verdict.proved]
    assert report.ok and not open_, open_
    return report


def inputs(s):
    made = EXAMPLES["gemm_scalar"].make_inputs(np.random.default_rng(11), **s.sizes)
    return {k: v for k, v in made.items() if isinstance(v, np.ndarray)}


def kernel_result(s, arrays):
    return tc.schedule(GEMM, **s.sizes).run(**{k: v.copy() for k, v in arrays.items()})["C"]


def compiled_result(s, arrays, target):
    c = {k: v.copy() for k, v in arrays.items()}
    tc.compile(s, target=target).run_in_place(**c)
    return c["C"]


def names(s):
    return [lp.name for lp in s.loops()]


def test_the_descent_reaches_the_staging_form_with_every_op_proved():
    s = descended(8, 6, 6, 4, 3, 2)
    assert names(s) == ["io", "jo", "ii.f0", "ji.f0", "ko", "ii.f1.f0", "ji.f1.f0", "ki", "ii.f1.f1", "ji.f1.f1"]
    report = all_proved(s)
    assert len(report.contract()) == 11  # expand_dim, lift_alloc, 3 splits, reorder, 4 fissions, reorder
    arrays = inputs(s)
    np.testing.assert_array_equal(s.run(**{k: v.copy() for k, v in arrays.items()})["C"], kernel_result(s, arrays))


def test_cpu_packing_with_acc_privatized_across_ko_is_proved_and_bitwise_in_c():
    s = descended(8, 6, 6, 4, 3, 2)
    assert s.stage("A", ["ii.f1.f0", "ki"]) == "A.tile"
    assert s.stage("B", ["ki", "ji.f1.f0"]) == "B.tile"
    assert s.privatize("acc", "ko") == ("acc.acc.init0", "acc.acc.init1", "acc.acc.store0", "acc.acc.store1")
    ko = next(lp for lp in L.loops(s.program.body) if lp.name == "ko")
    assert [st.buf.name for st in ir.walk(ko.body) if isinstance(st, L.Decl) and "tile" in st.buf.name] == \
        ["B.tile", "A.tile"]
    assert not [st for st in ir.walk(s.program.body) if isinstance(st, L.Barrier)]  # packing: no barriers
    all_proved(s)
    arrays = inputs(s)
    np.testing.assert_array_equal(compiled_result(s, arrays, "c"), kernel_result(s, arrays))


def gpu_staged(M=8, N=8, K=8, b=4):
    s = bound(descended(M, N, K, b, b, b))
    assert s.stage("A", ["ii.f1.f0", "ki"], shared=True, cooperative=b) == "A.tile"
    assert s.stage("B", ["ki", "ji.f1.f0"], shared=True) == "B.tile"
    return s


def test_gpu_shared_staging_is_one_phase_proved_and_bitwise_on_the_host_emulation():
    s = gpu_staged()
    ko = next(lp for lp in L.loops(s.program.body) if lp.name == "ko")
    kinds = [type(st).__name__ for st in ko.body.ops]
    assert kinds == ["Decl", "Decl", "Loop", "Loop", "Barrier", "Loop", "Barrier"]  # one phase, one closer
    assert [st.buf.scope for st in ko.body.ops[:2]] == ["shared", "shared"]
    report = all_proved(s)
    stage_kinds = {k for subject, c in report.contract().items() if "stage(" in subject for k in c}
    assert {Kind.DATAMAP, Kind.NONINTERFERENCE, Kind.BARRIER_UNIFORM, Kind.HARDWARE_LIMITS} <= stage_kinds
    assert Kind.ZERO_FRINGE not in stage_kinds  # the tiles divide: every edge guard folds away
    low = lower_for("cuda-host", s.program, s.sizes)
    assert low.barriers is not None and low.barriers.ok, low.barriers.explain()
    placed_ko = next(lp for lp in L.loops(low.program.body) if lp.name == "ko")
    # Stage's two per K iteration: the tiles are proved written before read, so no zero fill and no fill barrier
    assert sum(isinstance(st, L.Barrier) for st in ir.walk(placed_ko.body)) == 2
    arrays = inputs(s)
    np.testing.assert_array_equal(compiled_result(s, arrays, "cuda-host"), kernel_result(s, arrays))
    assert tc.differential(s, target="cuda-host", trials=1).matched


def test_the_register_blocktiled_gemm_is_proved_and_bitwise_in_c():
    """Split, Stage, Privatize, then ``ji`` moved inside ``ki`` and unrolled into registers: each ``ki`` step
    reads ``A.tile[ii, ki]`` once (forwarded to every copy) and updates a row of three accumulators."""
    s = descended(8, 6, 6, 4, 3, 2)
    s.stage("A", ["ii.f1.f0", "ki"])
    s.stage("B", ["ki", "ji.f1.f0"])
    s.privatize("acc", "ko")
    assert s.reorder(["ki", "ji.f1.f0"]) == ()
    assert s.unroll("ji.f1.f0", materialize=True) == ()
    assert "ji.f1.f0" not in names(s)
    ki = next(lp for lp in L.loops(s.program.body) if lp.name == "ki")
    updates = [st.index for st in ir.walk(ki.body) if isinstance(st, L.Assign) and st.buf == "acc.acc"]
    assert [ix[1] for ix in updates] == [IConst(0), IConst(1), IConst(2)]
    report = all_proved(s)
    unroll = next(c for subject, c in report.contract().items() if "unroll(" in subject)
    assert unroll.get(Kind.DATAMAP) == "proved"  # the forwarded A.tile read
    arrays = inputs(s)
    np.testing.assert_array_equal(compiled_result(s, arrays, "c"), kernel_result(s, arrays))


def test_padded_shared_staging_on_a_non_dividing_gemm_has_a_proved_zero_fringe():
    s = bound(descended(33, 65, 70, 8, 8, 8, pad=True))
    assert s.stage("A", ["ii.f1.f0", "ki"], shared=True, cooperative=8) == "A.tile"
    assert s.stage("B", ["ki", "ji.f1.f0"], shared=True) == "B.tile"
    loads = [st for st in ir.walk(s.program.body) if isinstance(st, L.Assign) and st.buf in ("A.tile", "B.tile")]
    assert len(loads) == 2 and all(isinstance(st.value, L.Sel) for st in loads)  # the edge guards stay
    report = all_proved(s)
    stages = [c for subject, c in report.contract().items() if "stage(" in subject]
    assert len(stages) == 2
    for c in stages:
        assert c[Kind.ZERO_FRINGE] == "proved" and c[Kind.DATAMAP] == "proved"
    arrays = inputs(s)
    np.testing.assert_array_equal(compiled_result(s, arrays, "cuda-host"), kernel_result(s, arrays))


def test_the_c_backend_refuses_a_shared_stage_with_a_typed_error_and_a_hint():
    s = gpu_staged()
    for attempt in (lambda: tc.compile(s, target="c"), lambda: tc.emit(s, target="c")):
        with pytest.raises(LoweringError, match="does not lower the block-shared tile A.tile") as info:
            attempt()
        assert info.value.hint == "compile for cuda or cuda-host, or stage with shared=False"
    assert "__shared__" in tc.emit(s, target="cuda")  # the same schedule lowers for the GPU
