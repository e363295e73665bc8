"""Copy elision on the C backend (``backends/c/views.py``): a tile copied whole from a hoisted pack, in the
pack's own row-major order, is declared as a pointer into the pack and its copy nest is not emitted.

End to end, the subjects are the GEMM example with B constant and staged hoisted: with tiles that divide,
the DSL's copy of each B tile reads one contiguous window of the pack (a view); with ragged tiles (the copy
keeps its edge guard) or a pack whose tiles are split into column strips (the window is not contiguous in
the tile's order), the copy is kept. The references are the loop interpreter on the same schedule (the
results must be bitwise equal) and numpy. The rule itself is exercised on hand-built lowered nodes, one
condition broken at a time.
"""
from typing import Optional

import numpy as np
import pytest

import tilecert as tc
from examples.gemm import gemm
from tilecert.backends.c.views import View, pack_view
from tilecert.lowering.program import Alloc, For, Guard, Node, Store
from tilecert.semantics import loopir as L
from tilecert.semantics.index import IConst, IVar, evaluate, ibin

VIEW = "a view of pack B.packed"


def staged(strips: bool = False, **sizes: int) -> tc.Schedule:
    """GEMM with B constant and staged hoisted over the tile copy's loops (``strips``: over 2-column strips)."""
    s = tc.schedule(gemm, **sizes, bm=4, bn=4, bk=4)
    s.constant("B")
    if strips:
        outer, inner = s.split("b.load.N", 2, outer="bno", inner="bni")
        s.reorder([outer, "b.load.K", inner])
        s.stage("B", ["b.load.K", inner], hoisted=True)
    else:
        s.stage("B", ["b.load.K", "b.load.N"], hoisted=True)
    assert s.check().ok
    return s


def results(s: tc.Schedule, sizes: dict[str, int], seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """C's result, the interpreter's and numpy's for inputs drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((sizes["M"], sizes["K"])).astype(np.float32)
    b = rng.standard_normal((sizes["K"], sizes["N"])).astype(np.float32)
    got = np.zeros((sizes["M"], sizes["N"]), np.float32)
    tc.compile(s).run_in_place(A=a, B=b, C=got)
    return got, s.run(A=a, B=b, C=np.zeros_like(got))["C"], a @ b


def kernel_text(s: tc.Schedule) -> str:
    source = tc.compile(s).source
    return source[source.index("void tc_kernel("):]


def test_a_whole_tile_copy_from_the_pack_becomes_a_view_and_computes_the_same():
    sizes = {"M": 8, "N": 8, "K": 12}
    s = staged(**sizes)
    body = kernel_text(s)
    assert body.count(VIEW) == 1 and "b.load.K" not in body and "b.load.N" not in body  # no copy nest left
    assert "a.load.K" in body  # A is no pack: its tile is copied
    for seed in range(2):
        got, interpreted, reference = results(s, sizes, seed)
        assert np.array_equal(got, interpreted)
        assert np.allclose(got, reference, atol=1e-4)


@pytest.mark.parametrize("strips, sizes", [(False, {"M": 6, "N": 7, "K": 9}), (True, {"M": 8, "N": 8, "K": 8})],
                         ids=["ragged tiles: the copy keeps its edge guard", "strips: not the tile's order"])
def test_a_copy_that_is_not_a_whole_window_in_order_is_kept(strips, sizes):
    s = staged(strips, **sizes)
    body = kernel_text(s)
    assert VIEW not in body and "b.load.K" in body
    got, interpreted, reference = results(s, sizes, 0)
    assert np.array_equal(got, interpreted)
    assert np.allclose(got, reference, atol=1e-4)


# ----------------------------------------------------------------------------- the rule on lowered nodes
TILE = Alloc("t", "f32", (IConst(2), IConst(3)), "local", "stack", 0, ())
PACKS = {"P": Alloc("P", "f32", (IConst(4), IConst(2), IConst(3)), "constant", "heap", 0, ())}
U, W, OUTER = IVar(2, 0), IVar(3, 0), IVar(1, 0)


def copy(value: L.SExpr = L.Ld("P", (OUTER, U, W), "f32"), index=(U, W), extents=(2, 3), guard: bool = False,
         buf: str = "t") -> For:
    store: Node = Store(1, buf, index, value, None, ())
    if guard:
        store = Guard(ibin("lt", W, IConst(3)), (store,))
    inner = For(3, "w", IConst(0), IConst(extents[1]), "simd", (store,))
    return For(2, "u", IConst(0), IConst(extents[0]), "serial", (inner,))


def view(rest: tuple[Node, ...], kernel: tuple[Node, ...] = (), tile: Alloc = TILE) -> Optional[View]:
    return pack_view(tile, rest, kernel, PACKS, {})


def test_the_window_starts_where_the_outer_part_of_the_pack_index_points():
    v = view((copy(),))
    assert v is not None and (v.buf, v.pack) == ("t", "P")
    assert [evaluate(v.base, {}, {(1, 0): x}) for x in range(4)] == [0, 6, 12, 18]  # P[x] is 2 x 3 cells


@pytest.mark.parametrize("rest", [
    (copy(L.Ld("P", (OUTER, W, U), "f32"), extents=(2, 3)),),  # the tile's order is not the pack's
    (copy(L.Ld("P", (OUTER, IConst(0), W), "f32")),),  # every row of the tile reads the same pack row
    (copy(L.Cvt(L.Ld("P", (OUTER, U, W), "f32"), "f32")),),  # a conversion
    (copy(L.Ld("A", (OUTER, U, W), "f32")),),  # not a pack
    (copy(guard=True),),  # a guarded copy
    (copy(extents=(2, 2)),),  # covers part of the tile
    (copy(index=(W, U)),),  # the loops index the tile transposed
    (copy(buf="other"),),  # copies into another buffer
    (copy(), Store(2, "t", (IConst(0), IConst(0)), L.Lit(1.0, "f32"), None, ())),  # the tile is written later
    (copy(), For(4, "x", IConst(0), IConst(1), "serial", (TILE,))),  # another tile of the name is declared
], ids=["order", "repeated rows", "conversion", "no pack", "guard", "partial", "transposed", "other buffer",
        "written later", "redeclared"])
def test_anything_else_is_copied_as_written(rest):
    assert view(rest) is None


def test_a_pack_the_kernel_writes_or_a_tile_with_a_layout_is_copied():
    assert view((copy(),), kernel=(Store(3, "P", (IConst(0),) * 3, L.Lit(0.0, "f32"), None, ()),)) is None
    assert view((copy(),), tile=Alloc("t", "f32", (IConst(2), IConst(3)), "local", "stack", 0, (), True,
                                      tc.semantics.layout.Swizzle("elem"))) is None
