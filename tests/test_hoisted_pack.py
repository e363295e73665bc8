"""Hoisted constant packs (``lowering/packs.py``) on the C backend and on cuda-host.

The subjects are the GEMM example's loop form with B declared constant and packed, by ``with_pack``,
into ``Bp[K / bk, N / bn, bk, bn]`` (one axis per outer coordinate, then the tile axes; slots past the
edges of B zero-filled by the pack nest's where-form), every read of B remapped to it. The references
are the loop interpreter on the same program (which computes the pack inline), and numpy.
"""
import dataclasses

import numpy as np
import pytest

import tilecert as tc
from examples.gemm import gemm
from examples.gemm_gpu import gemm_gpu
from tilecert.backends.errors import StaleConstantError
from tilecert.lowering import PackError, format_lowered, lower
from tilecert.lowering.lower import bind_sizes
from tilecert.lowering.pipeline import lower_for
from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.constants import constant_inputs, with_constants
from tilecert.semantics.index import IBin, IConst, IVar, cdiv, ibin
from tilecert.semantics.mapper import Mapper

SIZES = {"M": 10, "K": 12, "N": 9}  # no tile size divides: B's pack has zero-filled edge slots


class _Remap(Mapper):
    """Every load of ``src`` at ``(k, n)`` as a load of its pack at ``(k // bk, n // bn, k % bk, n % bn)``."""

    def __init__(self, src: str, pack: str, tile: tuple[int, int]) -> None:
        self.src, self.pack, self.tile = src, pack, tile

    def map_sexpr(self, e: L.SExpr) -> L.SExpr:
        if isinstance(e, L.Ld) and e.buf == self.src:
            (k, n), (bk, bn) = e.index, self.tile
            index = (ibin("floordiv", k, IConst(bk)), ibin("floordiv", n, IConst(bn)), ibin("mod", k, IConst(bk)),
                     ibin("mod", n, IConst(bn)))
            return L.Ld(self.pack, index, e.dtype)
        return super().map_sexpr(e)


def pack_nest(p: ir.Program, src: str, pack: str, tile: tuple[int, int], body_of=None,
              binding=None) -> tuple[L.Decl, L.Loop]:
    """The declaration and nest of the tiled pack of 2-D tensor ``src`` (``body_of(assign)``: the nest's
    innermost body, the Assign by default; ``binding``: of its outermost loop)."""
    t = p.tensor(src)
    (rows, cols), (bk, bn) = t.shape, tile
    shape = (cdiv(rows, IConst(bk)), cdiv(cols, IConst(bn)), IConst(bk), IConst(bn))
    v0 = max(lp.var for lp in L.loops(p.body)) + 1
    kb, nb, kk, nn = (IVar(v0 + k, 0) for k in range(4))
    k, n = ibin("add", ibin("mul", kb, IConst(bk)), kk), ibin("add", ibin("mul", nb, IConst(bn)), nn)
    inside = L.Ix(IBin("and", IBin("lt", k, rows), IBin("lt", n, cols)), "bool")
    value = L.Sel(inside, L.Ld(src, (k, n), t.dtype), L.Lit(0.0, t.dtype), t.dtype)
    stmt = L.Assign(pack, (kb, nb, kk, nn), value)
    nest = body_of(stmt) if body_of is not None else stmt
    for d in reversed(range(4)):
        nest = L.Loop(v0 + d, f"{pack}.{d}", shape[d], "parallel", ir.Block((), (nest,)), binding if d == 0 else None)
    return L.Decl(L.Buffer(pack, t.dtype, shape, "constant")), nest


def with_pack(p: ir.Program, src: str = "B", pack: str = "Bp", tile: tuple[int, int] = (7, 5),
              constant: bool = True, binding=None) -> ir.Program:
    """``p`` with ``src`` declared constant, its pack prepended and every read of it remapped to the pack."""
    body = _Remap(src, pack, tile).map_block(p.body)
    decl, nest = pack_nest(p, src, pack, tile, binding=binding)
    q = dataclasses.replace(p, body=ir.Block(body.args, (decl, nest) + body.ops))
    return with_constants(q, [src]) if constant else q


def packed_gemm() -> ir.Program:
    return with_pack(tc.schedule(gemm, **SIZES).program)


def inputs(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"A": rng.standard_normal((10, 12), dtype=np.float32), "B": rng.standard_normal((12, 9), dtype=np.float32),
            "C": np.zeros((10, 9), np.float32)}


def interpreted(p: ir.Program, arrays: dict[str, np.ndarray]) -> np.ndarray:
    return tc.run(p, **{k: v.copy() for k, v in arrays.items()})["C"]


@pytest.fixture(scope="module")
def kernel():
    return tc.compile(packed_gemm(), target="c")


def test_the_pack_is_a_function_of_its_own_and_the_kernel_reads_it(kernel):
    lp = kernel.lowered
    assert [(pk.buf, pk.start, pk.reads) for pk in lp.packs] == [("Bp", 0, ("B",))]
    assert "alloc constant Bp: f32" in format_lowered(lp) and "hoisted pack" in format_lowered(lp)
    pack_fn = kernel.source[kernel.source.index("void tc_pack_0("):kernel.source.index("void tc_kernel(")]
    body = kernel.source[kernel.source.index("void tc_kernel("):]
    assert "b1_Bp[" in pack_fn and "T1_B[" in pack_fn  # the pack nest reads B and writes the pack
    assert "const float *restrict b1_Bp" in body.splitlines()[0] and "T1_B[" not in body  # the kernel only reads it
    assert kernel.validation.ok  # translation validation covers the pack nest as any statement


def test_results_are_bitwise_those_of_the_interpreter_and_of_the_unpacked_program(kernel):
    unpacked = tc.schedule(gemm, **SIZES).program
    for seed in range(3):
        arrays = inputs(seed)
        got = kernel(**arrays)["C"]
        assert np.array_equal(got, interpreted(packed_gemm(), arrays))
        assert np.array_equal(got, interpreted(unpacked, arrays))
        assert np.allclose(got, arrays["A"] @ arrays["B"], atol=1e-5)


def test_a_pack_nest_bound_to_cores_runs_in_parallel_in_its_function():
    q = with_pack(tc.schedule(gemm, **SIZES).program, binding="core")
    k = tc.compile(q, target="c")
    assert "#pragma omp parallel for" in k.source[k.source.index("void tc_pack_0("):k.source.index("void tc_kernel(")]
    arrays = inputs(7)
    assert np.array_equal(k(**arrays)["C"], interpreted(q, arrays))


def test_the_pack_is_computed_once_across_calls_and_the_kernel_reads_the_stored_one():
    k = tc.compile(packed_gemm(), target="c")
    arrays = inputs(1)
    first = k(**arrays)["C"]
    for _ in range(3):
        assert np.array_equal(k(**arrays)["C"], first)
    assert k.packs_computed == 1
    k.run_in_place(**{name: a.copy() if name == "C" else a for name, a in arrays.items()})
    assert k.packs_computed == 2  # unrounded inputs are another identity
    # the stored pack is what the kernel reads: scaling it by 2 doubles C (exactly, in binary floating point)
    packs = [e.packs[0] for e in k.pack_cache.entries.values()]
    assert len(packs) == 2 and all(p.shape == (2, 2, 7, 5) for p in packs)
    assert all(np.all(p[1, :, 12 - 7:, :] == 0) and np.all(p[:, 1, :, 9 - 5:] == 0) for p in packs)  # pad slots
    assert np.array_equal(packs[0][0, 0], arrays["B"][:7, :5])
    for p in packs:
        p *= 2
    assert np.array_equal(k(**arrays)["C"], 2 * first) and k.packs_computed == 2


def test_a_constant_input_changed_since_packing_is_refused():
    k = tc.compile(packed_gemm(), target="c")
    arrays = inputs(2)
    k(**arrays)
    assert np.array_equal(k(**arrays)["C"], interpreted(packed_gemm(), arrays))  # unchanged: accepted
    arrays["B"][3, 4] += 1.0
    with pytest.raises(StaleConstantError) as err:
        k(**arrays)
    assert "constant input B of kernel gemm changed since it was packed" in err.value.message
    assert "rebuild / repack: the input was declared constant" in err.value.hint and err.value.loc is not None
    with pytest.raises(StaleConstantError):  # another view of the same memory is the same input
        k(**{**arrays, "B": arrays["B"][...]})
    fresh = {**arrays, "B": arrays["B"].copy()}  # the new values in a new array: packed anew
    assert np.array_equal(k(**fresh)["C"], interpreted(packed_gemm(), fresh)) and k.packs_computed == 2


def test_an_input_whose_memory_was_freed_is_packed_anew():
    k = tc.compile(packed_gemm(), target="c")
    arrays = inputs(3)
    k(**{**arrays, "B": arrays["B"].copy()})  # that copy dies at once
    assert not any(e.alive for e in k.pack_cache.entries.values())
    k(**arrays)
    assert k.packs_computed == 2 and len(k.pack_cache.entries) == 1  # the dead entry is dropped


def test_the_sanitized_build_computes_the_pack_and_refuses_a_changed_input():
    k = tc.compile(packed_gemm(), target="c", sanitize=True)
    arrays = inputs(4)
    assert np.array_equal(k(**arrays)["C"], interpreted(packed_gemm(), arrays))
    arrays["B"][0, 0] = -arrays["B"][0, 0]
    with pytest.raises(StaleConstantError):
        k(**arrays)


def test_the_differential_harness_agrees_on_a_hoisted_pack():
    report = tc.differential(with_pack(tc.schedule(gemm, **SIZES).program), target="c", trials=3,
                             sizes=SIZES)
    assert report.matched, str(report)


def test_the_mark_survives_the_json_round_trip():
    p = packed_gemm()
    assert constant_inputs(p) == {"B"} and constant_inputs(tc.load(tc.dump(p))) == {"B"}
    assert constant_inputs(with_constants(p, ["A"])) == {"A", "B"}


# ----------------------------------------------------------------------------- malformed packs
def _prepend(p: ir.Program, *stmts) -> ir.Program:
    return dataclasses.replace(p, body=ir.Block(p.body.args, tuple(stmts) + p.body.ops))


def _malformed():
    base = tc.schedule(gemm, **SIZES).program
    good = with_pack(base)
    decl, nest = good.body.ops[:2]
    rest = good.body.ops[2:]
    other = L.Decl(L.Buffer("T", "f32", (IConst(1),), "local"))
    yield "not followed by the loop nest", dataclasses.replace(good, body=ir.Block((), (decl, other, nest) + rest))
    yield "reads A, which is not an input declared constant", with_constants(
        _prepend(base, *pack_nest(base, "A", "Ap", (7, 5))), ["B"])
    yield "reads B, which is not an input declared constant", with_pack(base, constant=False)
    yield "writes C", _prepend(base, *pack_nest(base, "B", "Bp", (7, 5), lambda st: dataclasses.replace(st, buf="C")))
    yield "holds a barrier", with_constants(_prepend(base, *pack_nest(
        base, "B", "Bp", (7, 5), lambda st: L.If(IConst(1), ir.Block((), (st, L.Barrier()))))), ["B"])
    yield "declared after the start of the program", with_constants(
        dataclasses.replace(base, body=ir.Block((), base.body.ops + (decl, nest))), ["B"])
    store = L.Assign("Bp", (IConst(0),) * 4, L.Lit(1.0, "f32"))
    yield "written after its pack nest", dataclasses.replace(good, body=ir.Block((), (decl, nest, store) + rest))
    yield "reads C, which is not an input declared constant", with_constants(_prepend(
        base, *pack_nest(base, "C", "Cp", (7, 5))), ["C"])


@pytest.mark.parametrize("reason,program", list(_malformed()), ids=lambda x: x if isinstance(x, str) else "")
def test_a_constant_declaration_not_in_pack_form_is_refused(reason, program):
    with pytest.raises(PackError) as err:
        lower(program, SIZES)
    assert reason in err.value.message and "root-level `constant` declaration" in err.value.hint


# ----------------------------------------------------------------------------- cuda-host
def test_cuda_host_runs_the_pack_as_ordinary_code_and_refuses_a_changed_input():
    k = tc.compile(packed_gemm(), target="cuda-host")
    arrays = inputs(5)
    assert np.array_equal(k(**arrays)["C"], interpreted(packed_gemm(), arrays))
    arrays["B"][1, 1] += 1
    with pytest.raises(StaleConstantError):
        k(**arrays)


def test_a_gpu_schedule_with_a_pack_passes_the_barrier_pass_and_runs_on_cuda_host():
    s = gemm_gpu(32)
    q = with_pack(s.program, tile=(16, 16))
    low = lower_for("cuda-host", q, s.sizes)
    assert low.barriers is not None and low.barriers.ok and low.validation.ok
    assert low.lowered.packs and low.program.body.ops[:2] == bind_sizes(q, s.sizes).body.ops[:2]  # left as it was
    report = tc.differential(q, target="cuda-host", sizes=s.sizes, sanitize=True, trials=2)
    assert report.matched, str(report)
