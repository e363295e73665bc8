"""Swizzled tile layouts: the maps (against the formulas written out here, and brute force), their
requirements, the JSON / printer round trip, the ``layout`` obligation (proved, disproved with a
witness, unknown), shared bytes counted over the padded shape, and the rendering on C and on the CUDA
host emulation (bitwise the interpreter's result; a wrong map is caught by the differential)."""
import dataclasses
import functools
import json
import shutil

import numpy as np
import pytest

import tilecert as tc
from tilecert.backends.c.emit import Emitter
from tilecert.backends.cuda import cases, nvcc_check
from tilecert.checker.check import check_program
from tilecert.checker.obligations import layout as layout_obligation
from tilecert.lowering.loop_form import loop_form
from tilecert.lowering.lower import lower
from tilecert.lowering.program import Alloc, LoweringError, format_lowered, walk
from tilecert.semantics import ir, serialize
from tilecert.semantics import loopir as L
from tilecert.semantics.bindings import Target
from tilecert.semantics.dtypes import dtype_of
from tilecert.semantics.errors import SerializationError
from tilecert.semantics.index import IBin, IConst, ISize, IVar, ibin
from tilecert.semantics.layout import Swizzle, physical_offset
from tilecert.semantics.mapper import Mapper
from tilecert.semantics.printer import format_nest, format_program

NVCC = shutil.which("nvcc")
compile_unproved = functools.partial(tc.compile, allow_unproved=True)
differential = functools.partial(tc.differential, allow_unproved=True)
RNG = np.random.default_rng(12)
T = 4  # the transposes' tile: T x T cells used, in a tile of T x 8 (8 = the padded minor dim)


# ----------------------------------------------------------------------------- the maps
def reference_column(kind, row, col, minor, elem_bytes):
    """The maps as the layout is specified: elem ``col ^ (P & (C-1))``; b128 with ``E = 16 / elem_bytes``,
    ``U = C / E``: ``((col / E) ^ (P & (U - 1))) * E + col % E``."""
    if kind == "elem":
        return col ^ (row & (minor - 1))
    e = 16 // elem_bytes
    return ((col // e) ^ (row & (minor // e - 1))) * e + col % e


@pytest.mark.parametrize("kind, dtype, minor", [("elem", "f32", 2), ("elem", "i8", 8), ("elem", "f64", 32),
                                                ("b128", "f32", 8), ("b128", "f32", 32), ("b128", "f64", 4),
                                                ("b128", "i8", 64), ("b128", "bf16", 16)])
def test_the_maps_are_the_specified_formulas_and_permute_every_row(kind, dtype, minor):
    sw, size = Swizzle(kind), dtype_of(dtype).itemsize
    assert sw.requirements(L.Buffer("t", dtype, (IConst(3), IConst(minor)))) is None
    for row in range(3 * minor):
        got = [sw.column(row, col, minor, size) for col in range(minor)]
        assert got == [reference_column(kind, row, col, minor, size) for col in range(minor)]
        assert sorted(got) == list(range(minor))
    moved = {sw.column(row, 0, minor, size) for row in range(minor)}
    assert len(moved) > 1  # the map depends on the row: it really swizzles
    if kind == "b128":  # whole 16-byte units move: the elements of a unit stay together, in order
        e = 16 // size
        for row in range(4):
            for unit in range(minor // e):
                cols = [sw.column(row, unit * e + k, minor, size) for k in range(e)]
                assert cols == list(range(cols[0], cols[0] + e)) and cols[0] % e == 0


def test_the_physical_offset_is_row_major_over_the_padded_shape_with_the_column_swizzled():
    sw = Swizzle("elem")
    shape = (3, 5, 8)  # rows: 15, the leading axes row-major
    seen = set()
    for i in range(3):
        for j in range(5):
            for k in range(8):
                off = physical_offset(sw, (i, j, k), shape, 8, 4)
                p = i * 5 + j
                assert off == p * 8 + (k ^ (p & 7))
                seen.add(off)
    assert seen == set(range(3 * 5 * 8))


@pytest.mark.parametrize("kind, dtype, shape, why", [
    ("elem", "f32", (8,), "rank >= 2; t has rank 1"),
    ("elem", "f32", (4, 12), "power-of-two minor dim > 1; t's is 12"),
    ("elem", "f32", (4, 1), "power-of-two minor dim > 1; t's is 1"),
    ("elem", "f32", (4, "N"), "constant minor dim; t's is N"),
    ("b128", "f32", (4, 6), "whole 16-byte units; t's is 6 x 4 = 24 bytes"),
    ("b128", "f32", (4, 12), "power-of-two count > 1 of 16-byte units; t's spans 3"),
    ("b128", "f32", (4, 4), "power-of-two count > 1 of 16-byte units; t's spans 1"),
    ("b128", "i8", (4, 8), "whole 16-byte units; t's is 8 x 1 = 8 bytes"),
])
def test_requirements_say_why_a_layout_cannot_apply(kind, dtype, shape, why):
    dims = tuple(ISize(n) if isinstance(n, str) else IConst(n) for n in shape)
    reason = Swizzle(kind).requirements(L.Buffer("t", dtype, dims))
    assert reason is not None and why in reason and f"swizzle({kind})" in reason


def test_elem_and_b128_requirements_differ_neither_implies_the_other():
    f32_8, f32_4 = L.Buffer("t", "f32", (IConst(2), IConst(8))), L.Buffer("t", "f32", (IConst(2), IConst(4)))
    assert Swizzle("elem").requirements(f32_4) is None and Swizzle("b128").requirements(f32_4) is not None
    f64_6 = L.Buffer("t", "f64", (IConst(2), IConst(6)))  # 48 bytes = 3 units; 6 is no power of two either
    i8_32 = L.Buffer("t", "i8", (IConst(2), IConst(48)))  # 3 units of i8
    assert Swizzle("elem").requirements(f64_6) is not None and Swizzle("b128").requirements(i8_32) is not None
    assert Swizzle("elem").requirements(f32_8) is None and Swizzle("b128").requirements(f32_8) is None


# ----------------------------------------------------------------------------- programs
def v(k):
    return IVar(k, 0)


def block(*ops):
    return ir.Block((), tuple(ops))


def loop(var, name, extent, *body, binding=None):
    return L.Loop(var, name, extent if not isinstance(extent, int) else IConst(extent), "parallel", block(*body),
                  binding)


def tensor(name, dims, written):
    return ir.TensorDecl(name, "f32", tuple(ir.Dim(i, d) for i, d in dims), tuple(ISize(d) for _, d in dims), written)


def local_transpose(layout, shape=(T, 8), load_cols=T):
    """``B = A^T`` tile by tile on the host: per T x T tile, a local tile of ``shape`` (columns past T are
    padding) with ``layout``, written at logical cells ``t[i, j] = A[..]``, then read back transposed."""
    m, n = ISize("M"), ISize("N")
    by, bx, i, j, i2, j2 = (v(k) for k in range(6))
    row, col = ibin("add", ibin("mul", by, IConst(T)), i), ibin("add", ibin("mul", bx, IConst(T)), j)
    inside = IBin("and", IBin("lt", row, m), IBin("lt", col, n))
    load = loop(2, "i", T, loop(3, "j", load_cols, L.If(inside, block(L.Assign("t", (i, j), L.Ld("A", (row, col), "f32"))))))
    out_row, out_col = ibin("add", ibin("mul", bx, IConst(T)), i2), ibin("add", ibin("mul", by, IConst(T)), j2)
    out = IBin("and", IBin("lt", out_row, n), IBin("lt", out_col, m))
    store = loop(4, "i2", T, loop(5, "j2", T, L.If(out, block(L.Assign("B", (out_row, out_col),
                                                                      L.Ld("t", (j2, i2), "f32"))))))
    decl = L.Decl(L.Buffer("t", "f32", tuple(IConst(s) for s in shape), "local", layout))
    body = block(loop(0, "by", ibin("floordiv", ibin("add", m, IConst(T - 1)), IConst(T)),
                      loop(1, "bx", ibin("floordiv", ibin("add", n, IConst(T - 1)), IConst(T)), decl, load, store)))
    return ir.Program("local_transpose", ("M", "N"), (tensor("A", ((0, "M"), (1, "N")), False),
                                                      tensor("B", ((1, "N"), (0, "M")), True)), body)


class _Retile(Mapper):
    def __init__(self, layout):
        self.layout = layout

    def map_buffer(self, b):
        return dataclasses.replace(b, shape=(IConst(T), IConst(8)), layout=self.layout) if b.name == "tile" else b


def shared_transpose(layout):
    """The CUDA suite's shared-memory transpose (``backends/cuda/cases.py``) with its 4 x 5 tile replaced by a
    4 x 8 one stored in ``layout``."""
    p = cases.shared_transpose("ok")
    return ir.Program(f"swizzled_{p.name}", p.sizes, p.tensors, _Retile(layout).map(p.body))


def transpose_inputs():
    a = RNG.standard_normal((10, 7)).astype(np.float32)
    return dict(A=a, B=np.zeros((7, 10), np.float32)), a.T


def layout_verdict(p, **kw):
    report = check_program(p, **kw)
    found = [r.verdict for r in report if r.kind == "layout"]
    assert len(found) == 1, str(report)
    return found[0]


# ----------------------------------------------------------------------------- JSON and printing
@pytest.mark.parametrize("kind", ["elem", "b128"])
def test_a_swizzled_buffer_round_trips_through_json_and_prints_its_layout(kind):
    p = local_transpose(Swizzle(kind))
    assert serialize.load(serialize.dump(p)) == p
    assert serialize.digest(p) != serialize.digest(local_transpose(None))
    assert serialize.digest(p) != serialize.digest(local_transpose(Swizzle({"elem": "b128", "b128": "elem"}[kind])))
    assert f"local t: f32[4, 8] swizzle({kind})" in format_program(p)
    assert f"local t: f32[4, 8] swizzle({kind})" in format_nest(p, {})
    assert "local t: f32[4, 8]\n" in format_nest(local_transpose(None), {}) + "\n"


def test_a_program_without_layouts_loads_from_json_that_never_names_one():
    p = local_transpose(None)
    tree = json.loads(serialize.dump(p))
    text = json.dumps(tree).replace(', "layout": null', "").replace('"layout": null, ', "")
    assert '"layout"' not in text
    assert serialize.load(text) == p


def test_an_unknown_swizzle_kind_in_json_is_refused():
    text = serialize.dump(local_transpose(Swizzle("elem"))).replace('"kind": "elem"', '"kind": "b64"')
    with pytest.raises(SerializationError, match=r"Swizzle node: field 'kind' holds 'b64'"):
        serialize.load(text)


# ----------------------------------------------------------------------------- the layout obligation
@pytest.mark.parametrize("kind", ["elem", "b128"])
def test_the_layout_obligation_is_proved_for_legal_layouts(kind):
    verdict = layout_verdict(local_transpose(Swizzle(kind)))
    assert verdict.proved and verdict.engine == "z3"
    report = check_program(local_transpose(Swizzle(kind)))
    assert report.ok, str(report)


def test_a_program_without_a_swizzled_buffer_states_no_layout_obligation():
    assert not [r for r in check_program(local_transpose(None)) if r.kind == "layout"]


def test_the_unmasked_xor_on_a_non_power_of_two_row_is_disproved_with_a_checked_witness():
    minor, rows = 12, 16
    status, point = layout_obligation.bijective(lambda p, c: c ^ p, minor, rows, 10_000)
    assert status == "disproved"
    row, c1, c2, x = point
    assert 0 <= row < rows and 0 <= c1 < minor and 0 <= c2 < minor
    assert x == c1 ^ row
    assert not 0 <= x < minor if c1 == c2 else (c2 ^ row) == x
    # brute force agrees that the map is broken, and that the masked map on a power-of-two row is not
    assert any(sorted(c ^ p for c in range(minor)) != list(range(minor)) for p in range(rows))
    assert layout_obligation.bijective(lambda p, c: c ^ (p & 15), 16, rows, 10_000) == ("proved", None)


def test_a_map_that_collides_inside_the_row_is_disproved_naming_both_columns():
    status, point = layout_obligation.bijective(lambda p, c: (c ^ p) & 7, 8, 4, 10_000)  # a bijection of [0, 8)...
    assert status == "proved"
    status, point = layout_obligation.bijective(lambda p, c: (c | (p & 1)), 8, 4, 10_000)  # ...this is not
    assert status == "disproved"
    row, c1, c2, x = point
    assert c1 != c2 and (c1 | (row & 1)) == (c2 | (row & 1)) == x and row & 1


def test_elem_on_twelve_columns_is_refused_by_requirements_and_disproved_by_the_obligation():
    buf = L.Buffer("t", "f32", (IConst(4), IConst(12)), "local", Swizzle("elem"))
    assert Swizzle("elem").requirements(buf) is not None
    elem12 = lambda p, c: Swizzle("elem").column(p, c, 12, 4)  # noqa: E731
    assert layout_obligation.bijective(elem12, 12, 4, 10_000) == ("proved", None)  # rows 0..3 xor below 4: fine
    status, point = layout_obligation.bijective(elem12, 12, 16, 10_000)
    assert status == "disproved"
    row, c1, _, x = point
    assert 8 <= row < 16 and x == c1 ^ (row & 11) and not 0 <= x < 12  # e.g. 4 ^ 8 = 12: outside the row
    verdict = layout_verdict(local_transpose(Swizzle("elem"), shape=(16, 12)))
    assert verdict.status == "disproved" and verdict.witness is not None
    assert "swizzle(elem) of t (minor dim 12) is no bijection of a row" in verdict.witness.summary
    assert "outside the row [0, 12)" in verdict.witness.summary


def test_an_undecided_bijection_is_unknown_never_proved():
    mask = 2**40 - 1

    def mix(p, c):  # a bijection of [0, 2^40) (odd multipliers, xorshifts): hard to prove in 1 ms
        x = (c * 0x9E3779B97F4A7C15) & mask
        x = x ^ (x >> 17)
        x = (x * 0xC2B2AE3D27D4EB4F) & mask
        return x ^ (x >> 13)

    assert layout_obligation.bijective(mix, 2**40, 2, 1) == ("unknown", None)


def test_a_minor_dim_that_is_not_a_constant_leaves_the_obligation_unknown():
    p = local_transpose(Swizzle("elem"))
    p = ir.Program(p.name, ("M", "N", "W"), p.tensors, with_shape(p.body, (IConst(T), ISize("W"))))
    verdict = layout_verdict(p)
    assert verdict.status == "unknown" and "minor dim W is not a constant" in verdict.reason
    assert layout_verdict(p, sizes={"W": 8}).proved  # bound: the concrete row is checked


def with_shape(body, shape):
    """``body`` with every declared buffer of ``shape``."""
    class Shape(Mapper):
        def map_buffer(self, b):
            return dataclasses.replace(b, shape=shape)
    return Shape().map(body)


def test_hardware_limits_count_the_padded_shape_of_a_shared_tile():
    p = shared_transpose(Swizzle("elem"))  # 4 x 8 f32 = 128 bytes, of which the used 4 x 4 are 64
    fits = check_program(p, {"M": 10, "N": 7}, target=Target(max_shared_bytes=128))
    assert fits.status("hardware_limits") == "proved" and fits.status("layout") == "proved"
    short = check_program(p, {"M": 10, "N": 7}, target=Target(max_shared_bytes=127))
    [limits] = [r.verdict for r in short if r.kind == "hardware_limits"]
    assert limits.status == "disproved" and "places 128 bytes of shared memory (tile) > 127" in limits.witness.summary


# ----------------------------------------------------------------------------- rendering
@pytest.mark.parametrize("kind", ["elem", "b128"])
def test_c_renders_the_swizzle_and_matches_the_interpreter_bitwise(kind):
    p = local_transpose(Swizzle(kind))
    src = tc.emit(p, target="c")
    column = {"elem": "(i3 ^ (i2 & 7))", "b128": "((((i3 >> 2) ^ (i2 & 1)) << 2) | (i3 & 3))"}[kind]
    assert f"b1_t[((i2 * 8) + {column})] = T0_A[" in src  # the write t[i, j] at row i, column j swizzled
    assert f"= b1_t[((i5 * 8) + {column.replace('i3', 'i4').replace('i2', 'i5')})];" in src  # the read t[j2, i2]
    args, want = transpose_inputs()
    got = tc.compile(p, target="c")(**args)
    ref = tc.run(p, **args)
    assert np.array_equal(got["B"], want) and np.array_equal(ref["B"], want)
    assert got["B"].tobytes() == ref["B"].tobytes()
    report = tc.differential(p, target="c", trials=4, seed=5)
    assert report.matched and all(t.outcome == "match" for t in report.trials), str(report)


def test_under_a_swizzle_padded_slots_hold_data_and_writing_the_padding_clobbers_nothing():
    assert sorted(Swizzle("elem").column(5, c, 8, 4) for c in range(T)) == [4, 5, 6, 7]  # row 5: all in the padding
    p = local_transpose(Swizzle("elem"), load_cols=8)  # every column of t written, the padded ones too
    args, want = transpose_inputs()
    got = tc.compile(p, target="c")(**args)
    assert np.array_equal(got["B"], want) and got["B"].tobytes() == tc.run(p, **args)["B"].tobytes()


def test_swizzling_the_writes_but_not_the_reads_is_caught_by_the_differential(monkeypatch):
    p = local_transpose(Swizzle("elem"))
    good = tc.emit(p, target="c")
    original = Emitter.expr

    def unswizzled_loads(self, e):  # a wrong physical map: loads of a swizzled buffer read row-major
        if isinstance(e, L.Ld) and e.buf in self.layouts:
            saved = self.layouts.pop(e.buf)
            try:
                return original(self, e)
            finally:
                self.layouts[e.buf] = saved
        return original(self, e)

    monkeypatch.setattr(Emitter, "expr", unswizzled_loads)
    assert tc.emit(p, target="c") != good
    report = tc.differential(p, target="c", trials=3, seed=5)
    assert not report.agreed and any(t.outcome == "mismatch" for t in report.trials), str(report)


def test_a_layout_the_buffer_does_not_admit_is_refused_by_the_renderer():
    p = local_transpose(Swizzle("elem"), shape=(T, 12))
    with pytest.raises(LoweringError, match=r"buffer t cannot be stored in swizzle\(elem\): .*power-of-two"):
        tc.emit(p, target="c", allow_unproved=True)


@pytest.mark.parametrize("kind", ["elem", "b128"])
def test_a_swizzled_shared_transpose_on_the_cuda_host_emulation_matches_the_interpreter(kind):
    p = shared_transpose(Swizzle(kind))
    assert layout_verdict(p, sizes={"M": 10, "N": 7}).proved
    src = tc.emit(p, target="cuda-host", allow_unproved=True)
    assert "__shared__ float" in src and "[32];" in src and " ^ " in src
    args, want = transpose_inputs()
    got = compile_unproved(p, target="cuda-host")(**args)
    assert np.array_equal(got["B"], want) and got["B"].tobytes() == tc.run(p, **args)["B"].tobytes()
    report = differential(p, target="cuda-host", trials=3, seed=3)
    assert report.agreed and all(t.outcome == "match" for t in report.trials), str(report)


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed: emitted CUDA cannot be compiled here")
@pytest.mark.parametrize("kind", ["elem", "b128"])
def test_nvcc_compiles_the_swizzled_shared_transpose(kind):
    ptx = nvcc_check(tc.emit(shared_transpose(Swizzle(kind)), target="cuda", allow_unproved=True))
    assert ".entry tc_k0_" in ptx and "xor.b" in ptx


def test_the_lowered_program_and_its_loop_form_read_back_keep_the_layout():
    p = local_transpose(Swizzle("b128"))
    lp = lower(p, {"M": 10, "N": 7})
    [alloc] = [n for n in walk(lp.body) if isinstance(n, Alloc)]
    assert alloc.layout == Swizzle("b128") and "alloc local t: f32[4, 8] swizzle(b128) on stack" in format_lowered(lp)
    [decl] = [d for d in ir.walk(loop_form(lp).program.body) if isinstance(d, L.Decl)]
    assert decl.buf.layout == Swizzle("b128")


def test_the_swizzled_shared_transpose_is_thread_sanitizer_clean():
    args, want = transpose_inputs()
    got = compile_unproved(shared_transpose(Swizzle("b128")), target="cuda-host", sanitize=True)(**args)
    assert np.array_equal(got["B"], want)
