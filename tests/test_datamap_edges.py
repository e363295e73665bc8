"""Edge-guarded and widening loads of declared copies and rings, ``zero_fringe`` claims, unwritten sources.

Hand-built transforms in the three load forms the checker accepts (``tile[u] = source[c]``,
``tile[u] = Cvt(source[c], p)`` with ``p`` a widening, and either one in where-form
``Sel(Ix(g), X, Lit(0))``), each reaching proved, disproved with a witness that replays on the
interpreter, and unknown; the exact round trip a widened tile read back at its source's dtype relies
on, checked on every f16 and bf16 value.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tilecert.checker import check_transform
from tilecert.checker import z3_solve
from tilecert.semantics import loopir as L
from tilecert.semantics.dtypes import DTYPES, dtype_of, widens
from tilecert.semantics.index import IConst, IExpr, IVar, conj, ibin
from tilecert.semantics.loopinterp import interpret_loops
from tilecert.semantics.mapper import Mapper
from tilecert.semantics.transform import Copy, Kind, Live, Ring, Tau, ring_slot

from test_checker_programs import add, assign, decl, guard, ld, lit, loop, lt, mul, plus, program, sub, tensor, v

TRANSFORM = (Kind.COVERAGE, Kind.PREFIX_CUT, Kind.DEPENDENCE)


def _check(before, after, datamaps):
    return check_transform(before, after, Tau(), None, datamaps=datamaps, final=False)


def _disproved(r, kind, replays=True):
    """The one ``kind`` verdict of ``r`` is disproved with instances, replaying as a wrong value or a failure
    when ``replays``; nothing is compared through a false declaration."""
    (d,) = r.verdicts(kind)
    assert d.status == "disproved" and d.witness.instances, r.explain()
    assert d.witness.replay.startswith("CONFIRMED" if replays else "not confirmed"), d.witness.lines()
    if kind == Kind.DATAMAP:
        assert all(r.status(k) == "unknown" for k in TRANSFORM), r.explain()
    assert not r.ok
    return d


def _sel(cond: IExpr, x: L.SExpr, dtype: str) -> L.Sel:
    return L.Sel(L.Ix(cond, "bool"), x, L.Lit(0.0 if dtype_of(dtype).is_float else 0, dtype), dtype)


# ============================================================================ the widening round trip
def test_widens_is_exactly_the_float_widenings():
    wider = {("f16", "f32"), ("f16", "f64"), ("bf16", "f32"), ("bf16", "f64"), ("f32", "f64")}
    for a in DTYPES:
        for b in DTYPES:
            assert widens(a, b) == (a == b or (a, b) in wider), (a, b)


def _round_trip(values: np.ndarray, narrow: str, wide: str) -> np.ndarray:
    """``Cvt(Cvt(x, wide), narrow)`` of every value on the loop interpreter."""
    n = len(values)
    x = L.Ld("x", (v(0),), narrow)
    p = program("trip", (), [tensor("x", (n,), dtype=narrow, written=False), tensor("y", (n,), dtype=narrow)],
                loop(0, "i", n, assign("y", (v(0),), L.Cvt(L.Cvt(x, wide), narrow)), kind="parallel"))
    arrays = {"x": values.copy(), "y": np.zeros_like(values)}
    interpret_loops(p, {}, arrays, checked=True)
    return arrays["y"]


@pytest.mark.parametrize("narrow,wide", [("f16", "f32"), ("f16", "f64"), ("bf16", "f32"), ("bf16", "f64")])
def test_a_widening_converted_back_is_the_identity_on_every_value(narrow, wide):
    """All 65536 bit patterns: a widening and the conversion back give the value itself (NaNs stay NaN)."""
    bits = np.arange(1 << 16, dtype=np.uint32)
    values = bits.astype(np.uint16).view(np.float16) if narrow == "f16" else (bits << 16).view(np.float32)
    back = _round_trip(values, narrow, wide)
    nan = np.isnan(values)
    assert np.array_equal(np.isnan(back), nan)
    assert np.array_equal(back[~nan].view(np.uint16 if narrow == "f16" else np.uint32),
                          values[~nan].view(np.uint16 if narrow == "f16" else np.uint32))


def test_f32_through_f64_and_back_is_the_identity_on_sampled_values():
    bits = np.random.default_rng(0).integers(0, 1 << 32, size=1 << 16, dtype=np.uint64).astype(np.uint32)
    values = bits.view(np.float32)
    back, nan = _round_trip(values, "f32", "f64"), np.isnan(values)
    assert np.array_equal(np.isnan(back), nan) and np.array_equal(back[~nan].view(np.uint32), bits[~nan])


def test_a_narrowing_and_the_widening_back_is_not_the_identity():
    """The reason the simplification is kept to widenings: f32 through f16 and back loses values."""
    values = np.array([1.0 + 2.0 ** -20, 1e6, 70000.0], dtype=np.float32)
    assert not np.array_equal(_round_trip(values, "f32", "f16"), values)


# ============================================================================ Copy, widening load: Cvt(source[c], p)
def _widened(src: str = "f16", tile: str = "f32", cvt: str = "f32", shifted: bool = False, narrowed: bool = False):
    """``for i in [0, M): { out[i] = Cvt(a[i], tile) * 2; h[i] = a[i] }`` and the same with ``a`` staged into a
    local tile ``s`` of dtype ``tile``, loaded ``s[u] = Cvt(a[u], cvt)``: ``out`` reads ``s[i]`` directly, ``h``
    reads it converted back, ``Cvt(s[i], src)``, as a staged tile of another precision is read (both without
    the conversions when ``tile`` is ``src``; ``narrowed``: ``h`` reads ``Cvt(Cvt(s[i], f16), f32)``).
    ``shifted`` loads ``a[M - 1 - u]`` instead."""
    tensors = [tensor("a", ("M",), dtype=src, written=False), tensor("out", ("M",), dtype=tile),
               tensor("h", ("M",), dtype=src)]

    def body(wide: L.SExpr, back: L.SExpr):
        return loop(0, "i", "M", assign("out", (v(0),), L.Bin("mul", wide, L.Lit(2.0, tile), tile)),
                    assign("h", (v(0),), back))

    a_i = ld("a", v(0), dtype=src)
    before = program("w", ("M",), tensors, body(L.Cvt(a_i, tile) if tile != src else a_i, a_i))
    cell = sub(sub("M", 1), v(2)) if shifted else v(2)
    load = assign("s", (v(2),), L.Cvt(ld("a", cell, dtype=src), cvt))
    s_i = ld("s", v(0), dtype=tile)
    back = L.Cvt(L.Cvt(s_i, "f16"), tile) if narrowed else L.Cvt(s_i, src) if tile != src else s_i
    after = program("w", ("M",), tensors, decl("s", ("M",), dtype=tile), loop(2, "u", "M", load), body(s_i, back))
    return before, after, Copy("s", "a", (2,), (v(2),), Live(load))


def test_a_widening_load_is_proved_and_its_round_trip_read_through():
    """``h[i] = Cvt(s[i], f16)`` restores to ``Cvt(Cvt(a[i], f32), f16)``, which is ``a[i]``: proved."""
    before, after, copy = _widened()
    r = _check(before, after, (copy,))
    assert all(r.status(k) == "proved" for k in TRANSFORM + (Kind.DATAMAP,)), r.explain()


@pytest.mark.parametrize("src,wide", [("bf16", "f64"), ("f32", "f64"), ("f32", "f32")])
def test_every_widening_load_is_proved(src, wide):
    before, after, copy = _widened(src, wide, wide)
    assert _check(before, after, (copy,)).ok


def test_a_narrowing_round_trip_in_the_program_is_not_read_away():
    """``Cvt(Cvt(s[i], f16), f32)`` on an f32 tile is not the identity: the programs are not proved equal."""
    before, after, copy = _widened("f32", "f32", "f32", narrowed=True)
    r = _check(before, after, (copy,))
    assert r.status(Kind.DATAMAP) == "proved" and r.status(Kind.COVERAGE) != "proved" and not r.ok, r.explain()


def test_a_widening_load_of_another_cell_is_disproved_with_a_replaying_witness():
    before, after, copy = _widened(shifted=True)
    d = _disproved(_check(before, after, (copy,)), Kind.DATAMAP)
    assert "other than the declared one" in d.witness.summary


@pytest.mark.parametrize("src,tile,cvt", [("f32", "f16", "f16"), ("f64", "f32", "f32"), ("bf16", "f16", "f16"),
                                          ("i32", "f32", "f32"), ("f16", "i32", "i32")])
def test_a_narrowing_or_mixed_conversion_in_a_load_is_refused(src, tile, cvt):
    before, after, copy = _widened(src, tile, cvt)
    r = _check(before, after, (copy,))
    (d,) = r.verdicts(Kind.DATAMAP)
    assert d.status == "disproved" and "not a widening" in d.witness.summary, r.explain()
    assert all(r.status(k) == "unknown" for k in TRANSFORM) and not r.ok


def test_a_widening_load_stored_into_a_tile_of_another_dtype_is_unknown():
    """``s: f32[M]`` loaded ``Cvt(a[u], f64)``: the store narrows again, which restoring would drop."""
    before, after, copy = _widened("f16", "f32", "f64")
    r = _check(before, after, (copy,))
    assert r.status(Kind.DATAMAP) == "unknown" and "the conversion would be lost" in r.explain() and not r.ok


# ============================================================================ Copy, edge-guarded load: Sel(Ix(g), X, 0)
T = 4  # the tile width
IO, II, U = 0, 1, 2


def _edge(g: str = "exact", zero_fringe: bool = True, store_back: bool = False):
    """``for io in [0, B): for ii in [0, 4): if 4 io + ii < M: out[4 io + ii] = a[4 io + ii] + 1`` and the same
    through a tile ``s[4]`` per ``io``, loaded ``s[u] = Sel(g, a[4 io + u], 0)``: ``g`` is the edge guard
    ``4 io + u < M`` (``exact``, its ``0 <=`` half folded), ``4 io + u < M + 1`` (``wide``), ``4 io + u + 1 < M``
    (``narrow``), or absent (``none``: a plain load). ``store_back`` adds ``a[4 io + w] = s[w]`` (``a`` written)."""
    tensors = [tensor("a", ("M",), written=store_back), tensor("out", ("M",))]
    c_ii, c_u = add(mul(v(IO), T), v(II)), add(mul(v(IO), T), v(U))
    edge = {"exact": lt(c_u, "M"), "wide": lt(c_u, add("M", 1)), "narrow": lt(add(c_u, 1), "M")}

    def use(src: str, index: IExpr):
        return loop(II, "ii", T, guard(lt(c_ii, "M"), assign("out", (c_ii,), plus(ld(src, index), lit(1)))))

    before = program("e", ("B", "M"), tensors, loop(IO, "io", "B", use("a", c_ii)))
    load = assign("s", (v(U),), ld("a", c_u) if g == "none" else _sel(edge[g], ld("a", c_u), "i32"))
    store = assign("a", (add(mul(v(IO), T), v(3)),), ld("s", v(3)))
    body = [decl("s", (T,)), loop(U, "u", T, load), use("s", v(II))] + ([loop(3, "w", T, store)] if store_back else [])
    after = program("e", ("B", "M"), tensors, loop(IO, "io", "B", *body))
    return before, after, Copy("s", "a", (U,), (c_u,), Live(load, store if store_back else None), zero_fringe)


def test_an_edge_guarded_zero_fringed_load_is_proved_for_every_size():
    before, after, copy = _edge()
    r = _check(before, after, (copy,))
    assert all(r.status(k) == "proved" for k in TRANSFORM + (Kind.DATAMAP, Kind.ZERO_FRINGE, Kind.BOUNDS)), \
        r.explain()
    assert r.symbolic == ("B", "M")


def test_no_zero_fringe_result_without_the_claim():
    before, after, copy = _edge(zero_fringe=False)
    r = _check(before, after, (copy,))
    assert r.ok and not r.verdicts(Kind.ZERO_FRINGE)


def test_an_edge_guard_one_too_wide_is_disproved_with_a_replaying_witness():
    """At ``4 io + u = M`` the guard holds and the load reads ``a[M]``: the declaration and the claim fail."""
    before, after, copy = _edge("wide")
    r = _check(before, after, (copy,))
    d = _disproved(r, Kind.DATAMAP)
    assert "holds at a cell out of bounds of a" in d.witness.summary
    z = _disproved(r, Kind.ZERO_FRINGE)
    assert "holds at a cell out of bounds" in z.witness.summary and "fails" in z.witness.replay
    assert r.status(Kind.BOUNDS) == "disproved"


def test_an_edge_guard_one_too_narrow_is_disproved_with_a_replaying_witness():
    """At ``4 io + u = M - 1`` the guard fails in bounds: the tile holds 0 where the program reads ``a[M - 1]``."""
    before, after, copy = _edge("narrow")
    r = _check(before, after, (copy,))
    d = _disproved(r, Kind.DATAMAP)
    assert "fails at a cell in bounds of a" in d.witness.summary
    _disproved(r, Kind.ZERO_FRINGE)


def test_an_unguarded_zero_fringed_load_reading_out_of_bounds_is_disproved():
    """No guard: the last tile reads past ``a``. The copy itself holds, the claim does not, and ``bounds`` fails."""
    before, after, copy = _edge("none")
    r = _check(before, after, (copy,))
    assert r.status(Kind.DATAMAP) == "proved", r.explain()
    z = _disproved(r, Kind.ZERO_FRINGE)
    assert "with no edge guard storing 0 there" in z.witness.summary
    assert r.status(Kind.BOUNDS) == "disproved"


def test_an_edge_guarded_load_that_is_stored_back_is_unknown():
    before, after, copy = _edge(store_back=True)
    r = _check(before, after, (copy,))
    assert r.status(Kind.DATAMAP) == "unknown" and r.status(Kind.ZERO_FRINGE) == "unknown", r.explain()
    assert "converts or guards" in r.explain() and not r.ok


def test_an_edge_guard_the_solvers_cannot_decide_is_unknown_never_proved(monkeypatch):
    """A guard written ``(4 io + u)^2 < M^2``, equivalent to the exact one but not affine: with z3 answering
    unknown, the declaration and the claim stay unknown."""
    before, after, copy = _edge()
    c_u = add(mul(v(IO), T), v(U))
    load = assign("s", (v(U),), _sel(lt(mul(c_u, c_u), mul("M", "M")), ld("a", c_u), "i32"))
    after = _replaced(after, copy.live.load, load)
    monkeypatch.setattr(z3_solve, "find_point", lambda names, pos, neg, timeout_ms: ("unknown", {}, "z3 timed out"))
    r = _check(before, after, (dataclasses.replace(copy, live=Live(load)),))
    assert r.status(Kind.DATAMAP) == "unknown" and r.status(Kind.ZERO_FRINGE) == "unknown", r.explain()
    assert "z3 timed out" in r.explain() and not r.ok


def _replaced(p, old, new):
    """``p`` with statement ``old`` (by identity) replaced by ``new``."""
    class Swap(Mapper):
        def map_assign(self, st):
            return new if st is old else st

    return dataclasses.replace(p, body=Swap().map_block(p.body))


def test_a_zero_fringe_claim_on_a_load_not_in_the_program_is_unknown():
    before, after, copy = _edge()
    twin = dataclasses.replace(copy.live.load)
    assert twin == copy.live.load and twin is not copy.live.load
    r = _check(before, after, (dataclasses.replace(copy, live=Live(twin)),))
    assert r.status(Kind.ZERO_FRINGE) == "unknown" and r.status(Kind.DATAMAP) == "unknown" and not r.ok


def test_a_zero_fringed_copy_its_users_write_is_refused():
    """A store-back copy may be written by its users, a zero-fringed one only by its load."""
    before, after, copy = _edge("none", store_back=True)
    (io,) = after.body.ops
    poked = dataclasses.replace(io, body=dataclasses.replace(io.body, ops=io.body.ops + (assign("s", (0,), lit(0)),)))
    r = _check(before, dataclasses.replace(after, body=dataclasses.replace(after.body, ops=(poked,))), (copy,))
    (z,) = r.verdicts(Kind.ZERO_FRINGE)
    assert z.status == "disproved" and "zero-fringed copy s is written by" in z.witness.summary, r.explain()


def _edge2(both_axes: bool):
    """A 2-d staging with a fringe on both axes: ``for io, jo in [0, B): for ii, ji in [0, 2): if in bounds:
    out[2 io + ii, 2 jo + ji] = a[2 io + ii, 2 jo + ji] + 1``, through a tile ``s[2, 2]`` per ``(io, jo)`` loaded
    ``s[u, w] = Sel(g, a[2 io + u, 2 jo + w], 0)``: ``g`` guards both axes, or (``both_axes=False``) the first."""
    IO_, JO, II_, JI, U_, W = 0, 1, 2, 3, 4, 5
    tensors = [tensor("a", ("M", "N"), written=False), tensor("out", ("M", "N"))]
    row, col = (lambda x: add(mul(v(IO_), 2), v(x))), (lambda x: add(mul(v(JO), 2), v(x)))
    g = conj(lt(row(U_), "M"), lt(col(W), "N")) if both_axes else lt(row(U_), "M")

    def use(src: str, index: tuple):
        inside = conj(lt(row(II_), "M"), lt(col(JI), "N"))
        return loop(II_, "ii", 2, loop(JI, "ji", 2, guard(inside, assign("out", (row(II_), col(JI)),
                                                                          plus(ld(src, *index), lit(1))))))

    load = assign("s", (v(U_), v(W)), _sel(g, ld("a", row(U_), col(W)), "i32"))

    def nest(*body):
        return loop(IO_, "io", "B", loop(JO, "jo", "B", *body))

    before = program("e2", ("B", "M", "N"), tensors, nest(use("a", (row(II_), col(JI)))))
    after = program("e2", ("B", "M", "N"), tensors, nest(decl("s", (2, 2)), loop(U_, "u", 2, loop(W, "w", 2, load)),
                                                       use("s", (v(II_), v(JI)))))
    return before, after, Copy("s", "a", (U_, W), (row(U_), col(W)), Live(load), zero_fringe=True)


def test_a_two_axis_edge_guard_is_proved():
    before, after, copy = _edge2(both_axes=True)
    r = _check(before, after, (copy,))
    assert all(r.status(k) == "proved" for k in TRANSFORM + (Kind.DATAMAP, Kind.ZERO_FRINGE, Kind.BOUNDS)), \
        r.explain()


def test_an_edge_guard_missing_an_axis_is_disproved_with_a_replaying_witness():
    before, after, copy = _edge2(both_axes=False)
    r = _check(before, after, (copy,))
    assert "holds at a cell out of bounds of a" in _disproved(r, Kind.DATAMAP).witness.summary
    _disproved(r, Kind.ZERO_FRINGE)


# ============================================================================ the source of a read-only copy
def _anchored(write_source: bool):
    """``for i in [0, N): { for j in [0, M): out[i, j] = a[j] + 1; [a[0] = 7] }`` and the same with ``a`` loaded
    into a tile ``s`` at the start of every ``i`` (the anchor): a write of ``a`` after the uses of one iteration
    and before the load of the next lies in no window of the copy, yet the source is written in the routine."""
    tensors = [tensor("a", ("M",)), tensor("out", ("N", "M"))]
    poke = (assign("a", (0,), lit(7)),) if write_source else ()

    def uses(src):
        return loop(1, "j", "M", assign("out", (v(0), v(1)), plus(ld(src, v(1)), lit(1))))

    load = assign("s", (v(2),), ld("a", v(2)))
    before = program("anchored", ("N", "M"), tensors, loop(0, "i", "N", uses("a"), *poke))
    after = program("anchored", ("N", "M"), tensors,
                    loop(0, "i", "N", decl("s", ("M",)), loop(2, "u", "M", load), uses("s"), *poke))
    return before, after, Copy("s", "a", (2,), (v(2),), Live(load))


def test_a_copy_reloaded_at_every_anchor_iteration_is_proved():
    before, after, copy = _anchored(write_source=False)
    assert _check(before, after, (copy,)).ok


def test_a_write_of_the_source_between_two_anchor_iterations_is_disproved():
    """The witness is the write; the replay honestly finds equal outputs (each load reads the written value)."""
    before, after, copy = _anchored(write_source=True)
    r = _check(before, after, (copy,))
    d = _disproved(r, Kind.DATAMAP, replays=False)
    assert "writes a, the source of read-only copy s" in d.witness.summary
    (write,) = d.witness.instances
    assert write.statement == "a[0] = 7" and dict(write.coords)["i"] < dict(d.witness.sizes)["N"]


# ============================================================================ Ring: widening, edge-guarded fills
K = 99  # the version variable


def _plain_ring():
    """``for k in [0, N): out[k] = Cvt(a[k], f32) * 2`` (``a`` f16)."""
    tensors = [tensor("a", ("N",), dtype="f16", written=False), tensor("out", ("N",), dtype="f32")]
    return program("ring", ("N",), tensors,
                   loop(0, "k", "N", assign("out", (v(0),), _twice(L.Cvt(ld("a", v(0), dtype="f16"), "f32")))))


def _twice(x: L.SExpr) -> L.SExpr:
    return L.Bin("mul", x, L.Lit(2.0, "f32"), "f32")


def _pipelined(versions: int = 2, g: str = "exact", cvt: str = "f32", zero_fringe: bool = True):
    """``_plain_ring`` through an f32 ring of ``versions`` slots, version ``k + 1`` prefetched before version ``k``
    is used, each fill in where-form (no ``if``: the fill past the end stores 0):

        local buf: f32[versions]
        buf[0 mod versions] = Sel(g(0), Cvt(a[0], cvt), 0)                      (fill version 0)
        for k in [0, N):
            buf[(k + 1) mod versions] = Sel(g(k + 1), Cvt(a[k + 1], cvt), 0)    (fill version k + 1)
            out[k] = buf[k mod versions] * 2                                     (use version k)

    ``g(e)`` is ``e < N`` (``exact``) or ``e < N + 1`` (``wide``)."""
    edge = {"exact": lambda e: lt(e, "N"), "wide": lambda e: lt(e, add("N", 1))}[g]

    def fill(e: IExpr) -> L.Assign:
        return assign("buf", (ibin("mod", e, IConst(versions)),),
                      _sel(edge(e), L.Cvt(ld("a", e, dtype="f16"), cvt), "f32"))

    first, ahead = fill(IConst(0)), fill(add(v(0), 1))
    use = assign("out", (v(0),), _twice(ld("buf", ibin("mod", v(0), IConst(versions)), dtype="f32")))
    after = program("ring", ("N",), _plain_ring().tensors, decl("buf", (versions,), dtype="f32"), first,
                    loop(0, "k", "N", ahead, use))
    ring = Ring("buf", "a", versions, K, ring_slot(K, versions), (), (IVar(K, 0),),
                ((first, IConst(0)), (ahead, add(v(0), 1))), ((use, v(0)),), zero_fringe)
    return after, ring


def test_a_two_slot_ring_of_widening_edge_guarded_fills_is_proved():
    after, ring = _pipelined()
    r = _check(_plain_ring(), after, (ring,))
    assert all(r.status(k) == "proved" for k in TRANSFORM + (Kind.DATAMAP, Kind.ZERO_FRINGE, Kind.BOUNDS)), \
        r.explain()
    assert r.symbolic == ("N",)


def test_a_one_slot_ring_is_disproved_with_a_replaying_witness():
    """The prefetch of version ``k + 1`` overwrites the one slot before version ``k`` is read."""
    after, ring = _pipelined(versions=1)
    r = _check(_plain_ring(), after, (ring,))
    d = _disproved(r, Kind.DATAMAP)
    assert "overwrites" in d.witness.summary
    assert r.status(Kind.ZERO_FRINGE) == "proved"  # its fills still store 0 exactly past the end


def test_a_ring_fill_guard_one_too_wide_is_disproved_with_a_replaying_witness():
    after, ring = _pipelined(g="wide")
    r = _check(_plain_ring(), after, (ring,))
    d = _disproved(r, Kind.DATAMAP)
    assert "holds at a cell out of bounds of a" in d.witness.summary
    _disproved(r, Kind.ZERO_FRINGE)


def test_a_ring_fill_converting_to_another_dtype_than_the_ring_is_unknown():
    after, ring = _pipelined(cvt="f64")
    r = _check(_plain_ring(), after, (ring,))
    assert r.status(Kind.DATAMAP) == "unknown" and r.status(Kind.ZERO_FRINGE) == "unknown" and not r.ok


def test_a_ring_fill_whose_select_converts_to_another_dtype_is_unknown():
    """``Sel(g, Cvt(a[e], f32), 0)`` of dtype f16: the select itself rounds what the f32 ring is filled with."""
    after, ring = _pipelined()
    fills = tuple((dataclasses.replace(st, value=dataclasses.replace(st.value, dtype="f16")), e)
                  for st, e in ring.fills)
    for (old, _), (new, _) in zip(ring.fills, fills):
        after = _replaced(after, old, new)
    r = _check(_plain_ring(), after, (dataclasses.replace(ring, fills=fills),))
    assert r.status(Kind.DATAMAP) == "unknown" and "the conversion would be lost" in r.explain() and not r.ok


def test_a_ring_fill_that_narrows_is_refused():
    after, ring = _pipelined(cvt="bf16")  # f16 to bf16 loses values both ways
    r = _check(_plain_ring(), after, (ring,))
    (d,) = r.verdicts(Kind.DATAMAP)
    assert d.status == "disproved" and "not a widening" in d.witness.summary and not r.ok
