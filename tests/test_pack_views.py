"""Copy elision on the C backend (``backends/c/views.py``): a tile copied whole from a hoisted pack, through
a mixed-radix bijection of its copy loops, is read from the pack itself, its copy nest not emitted.

End to end, the subjects are the GEMM example with B constant and staged hoisted, over the whole tile or
over 2-column strips of it (a tile column is then a strip digit and a column digit): with tiles that divide,
the DSL's copy of each B tile is elided; with ragged tiles (the copy keeps its edge guard) it is kept. The
references are the loop interpreter on the same schedule (bitwise) and numpy. The rule is exercised on
hand-built lowered nodes, one condition broken at a time, and each forwarded read is checked against the
cell the copy would have stored there by enumerating the copy's loop box; the folding of the inverse's
divisions is checked against evaluation at every point of its ranges.
"""
import itertools
from typing import Optional

import numpy as np
import pytest

import tilecert as tc
from examples.gemm import gemm
from tilecert.backends.c.views import Forwarding, fold, forwarding
from tilecert.lowering.program import Alloc, For, Guard, Node, Store
from tilecert.semantics import loopir as L
from tilecert.semantics.index import IBin, IConst, IExpr, IVar, evaluate, ibin
from tilecert.semantics.layout import Swizzle

ELIDED = "local b: read from pack B.packed"


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


@pytest.mark.parametrize("strips", [False, True], ids=["whole tiles", "2-column strips"])
def test_a_whole_tile_copy_from_the_pack_is_elided_and_computes_the_same(strips):
    sizes = {"M": 8, "N": 8, "K": 12}
    s = staged(strips, **sizes)
    body = kernel_text(s)
    assert body.count(ELIDED) == 1 and "b.load.K" not in body and "local b," not in body  # no copy, no buffer
    assert "a.load.K" in body  # A is no pack: its tile is copied
    if strips:  # the tile's column 0..3 is strip p0 // 2, column p0 mod 2 (p0 unsplit: not folded)
        assert "tc_floordiv_c(" in body and "tc_mod_c(" in body
    for seed in range(2):
        got, interpreted, reference = results(s, sizes, seed)
        assert np.array_equal(got, interpreted)
        assert np.allclose(got, reference, atol=1e-4)


def test_a_copy_that_keeps_its_edge_guard_is_kept():
    sizes = {"M": 6, "N": 7, "K": 9}
    s = staged(**sizes)
    body = kernel_text(s)
    assert ELIDED not in body and "b.load.K" in body
    got, interpreted, reference = results(s, sizes, 0)
    assert np.array_equal(got, interpreted)
    assert np.allclose(got, reference, atol=1e-4)


# ----------------------------------------------------------------------------- the rule on lowered nodes
TILE = Alloc("t", "f32", (IConst(2), IConst(6)), "local", "stack", 0, ())
PACKS = {"P": Alloc("P", "f32", (IConst(4), IConst(3), IConst(2), IConst(2)), "constant", "heap", 0, ())}
OUTER, U, S, W = (IVar(v, 0) for v in (1, 2, 3, 4))
STRIPS = L.Ld("P", (OUTER, S, U, W), "f32")  # P[outer][strip][row][column of the strip]


def copy(value: L.SExpr = STRIPS, index: tuple[IExpr, ...] = (U, ibin("add", ibin("mul", S, IConst(2)), W)),
         extents: tuple[int, int, int] = (2, 3, 2), guard: bool = False, buf: str = "t") -> For:
    """The copy nest ``for u, s, w: buf[index] = value`` over ``extents``."""
    node: Node = Store(1, buf, index, value, None, ())
    if guard:
        node = Guard(ibin("lt", W, IConst(2)), (node,))
    for var, name, n in reversed(list(zip((2, 3, 4), "usw", extents))):
        node = For(var, name, IConst(0), IConst(n), "serial", (node,))
    return node


def forwarded(rest: tuple[Node, ...], kernel: tuple[Node, ...] = (), tile: Alloc = TILE) -> Optional[Forwarding]:
    return forwarding(tile, rest, kernel, PACKS, {})


def stored(nest: For, outer: int) -> dict[tuple[int, ...], tuple[int, ...]]:
    """Tile cell -> the pack cell the copy nest stores there, by running its loop box."""
    loops, node = [], nest
    while isinstance(node, For):
        loops.append(node)
        node = node.body[0]
    out = {}
    for v in itertools.product(*(range(lp.hi.value) for lp in loops)):
        coords = {(1, 0): outer, **{(lp.var, 0): x for lp, x in zip(loops, v)}}
        cell = tuple(int(evaluate(e, {}, coords)) for e in node.index)
        assert cell not in out
        out[cell] = tuple(int(evaluate(e, {}, coords)) for e in node.value.index)
    return out


@pytest.mark.parametrize("nest", [copy(), copy(L.Ld("P", (OUTER, IConst(0), U, W), "f32")),
                                  copy(index=(U, ibin("add", S, ibin("mul", W, IConst(3)))))],
                         ids=["strips", "one pack row for all", "columns strip-minor"])
def test_each_read_is_the_pack_cell_the_copy_stored_there(nest):
    fw = forwarded((nest,))
    assert fw is not None and (fw.buf, fw.pack) == ("t", "P")
    for outer in range(2):
        for (row, col), cell in stored(nest, outer).items():
            index = fw.read((IConst(row), IConst(col)), {})
            assert tuple(int(evaluate(e, {}, {(1, 0): outer})) for e in index) == cell


def test_a_read_by_strip_and_column_loops_folds_the_inverse():
    fw = forwarded((copy(),))
    strip, col = IVar(7, 0), IVar(8, 0)
    index = fw.read((U, ibin("add", ibin("mul", IConst(2), strip), col)), {7: (0, 3), 8: (0, 2)})
    assert index == (OUTER, strip, U, col)
    unfolded = fw.read((U, col), {8: (0, 6)})  # a column loop over the whole tile: the digits stay divisions
    assert unfolded[1] == ibin("floordiv", col, IConst(2)) and unfolded[3] == ibin("mod", col, IConst(2))


@pytest.mark.parametrize("rest", [
    (copy(L.Cvt(STRIPS, "f32")),),  # a conversion
    (copy(L.Ld("A", (OUTER, S, U, W), "f32")),),  # not a pack
    (copy(guard=True),),  # a guarded copy
    (copy(extents=(2, 2, 2)),),  # covers part of the tile
    (copy(index=(U, ibin("add", S, W))),),  # two loops on one digit: not a bijection
    (copy(index=(U, ibin("add", ibin("mul", S, IConst(2)), U))),),  # one loop on two axes
    (copy(buf="other"),),  # copies into another buffer
    (copy(), Store(2, "t", (IConst(0), IConst(0)), L.Lit(1.0, "f32"), None, ())),  # the tile is written later
    (copy(), For(5, "x", IConst(0), IConst(1), "serial", (TILE,))),  # another tile of the name is declared
], ids=["conversion", "no pack", "guard", "partial", "overlapping digits", "shared loop", "other buffer",
        "written later", "redeclared"])
def test_anything_else_is_copied_as_written(rest):
    assert forwarded(rest) is None


def test_a_pack_the_kernel_writes_or_a_tile_with_a_layout_is_copied():
    assert forwarded((copy(),), kernel=(Store(3, "P", (IConst(0),) * 4, L.Lit(0.0, "f32"), None, ()),)) is None
    swizzled = Alloc("t", "f32", (IConst(2), IConst(6)), "local", "stack", 0, (), True, Swizzle("elem"))
    assert forwarded((copy(),), tile=swizzled) is None


@pytest.mark.parametrize("op", ["floordiv", "mod"])
@pytest.mark.parametrize("a, c, ranges, folds", [
    (ibin("add", ibin("mul", IConst(4), IVar(1, 0)), IVar(2, 0)), 4, {1: (0, 3), 2: (0, 4)}, True),
    (ibin("add", ibin("mul", IConst(4), IVar(1, 0)), IVar(2, 0)), 4, {1: (0, 3), 2: (0, 5)}, False),  # y reaches c
    (ibin("sub", ibin("mul", IConst(8), IVar(1, 0)), IVar(2, 0)), 4, {1: (1, 3), 2: (0, 4)}, False),  # y may be < 0
    (ibin("add", ibin("mul", IConst(6), IVar(1, 0)), ibin("mul", IConst(2), IVar(2, 0))), 3, {1: (0, 2), 2: (0, 2)},
     True),
    (ibin("add", ibin("mul", IConst(8), IVar(1, 0)), IConst(3)), 4, {1: (-2, 2)}, True),
    (ibin("add", ibin("mul", IConst(4), IVar(1, 0)), IVar(2, 0)), 4, {1: (0, 3)}, False),  # y's range unknown
])
def test_folding_agrees_with_evaluation_over_the_ranges(op, a, c, ranges, folds):
    e = ibin(op, a, IConst(c))
    folded = fold(e, ranges)
    assert (folded != e) == folds and all(x.op not in ("floordiv", "mod") for x in _bins(folded)) == folds
    for point in itertools.product(*(range(lo, hi) for lo, hi in ranges.values())):
        coords = {(v, 0): x for v, x in zip(ranges, point)}
        coords.setdefault((2, 0), 0)
        assert evaluate(folded, {}, coords) == evaluate(e, {}, coords)


def _bins(e: IExpr) -> list[IBin]:
    return [e, *_bins(e.a), *_bins(e.b)] if isinstance(e, IBin) else []


def test_a_copy_after_nodes_that_do_not_name_the_tile_is_forwarded_and_one_after_a_read_is_not():
    other = Store(4, "u", (IConst(0),), L.Lit(1.0, "f32"), None, ())  # another tile of the stage, written first
    fw = forwarded((other, copy()))
    assert fw is not None and fw.at == 1
    early_read = Store(5, "u", (IConst(0),), L.Ld("t", (IConst(0), IConst(0)), "f32"), None, ())
    assert forwarded((early_read, copy())) is None  # the read sees the tile before its copy: it is kept
