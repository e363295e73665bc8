"""Cooperative copy loads: a tile axis indexed by a mixed-radix combination of loops, other loops pinned.

Hand-built transforms in the two cooperative forms a staged copy takes (``checker.forwarding._transfer``):
chunked, ``for lane in [0, W) bound block0 { for c in [0, E/W) { s[W*c + lane] = a[W*c + lane] } }``, and
lane 0, ``for lane ... { if (lane == 0) { for u { s[u] = a[u] } } }``: each proved and computing what the
unstaged program computes on the interpreter; a wrong chunk count or coefficient disproved with a witness
that replays (a chunked store-back too); an unpinned lane loop unknown (and, unguarded, a race that
noninterference reports).
"""
from __future__ import annotations

import numpy as np
import pytest

from tilecert.checker import check_transform
from tilecert.semantics.index import IConst, ibin
from tilecert.semantics.loopinterp import interpret_loops
from tilecert.semantics.transform import Copy, Kind, Live, Tau

from test_checker_programs import add, assign, barrier, decl, guard, ld, lit, loop, mul, program, tensor, times, v

E, W = 8, 4  # tile extent, lanes
TRANSFORM = (Kind.COVERAGE, Kind.PREFIX_CUT, Kind.DEPENDENCE)
TENSORS = [tensor("a", (E,), written=False), tensor("out", (E,))]


def _use(source: str):
    return loop(0, "i", E, assign("out", (v(0),), times(ld(source, v(0)), lit(2))), binding="block0")


BEFORE = program("coop", (), TENSORS, _use("a"))


def _staged(*load_nest):
    return program("coop", (), TENSORS, decl("s", (E,), scope="shared"), *load_nest, barrier(), _use("s"))


def _chunked(chunks: int = E // W, coefficient: int = W):
    """The chunked form: ``s[coefficient*c + lane]`` over ``chunks`` chunks of the lane loop."""
    u = add(mul(coefficient, v(3)), v(2))
    load = assign("s", (u,), ld("a", u))
    return _staged(loop(2, "lane", W, loop(3, "c", chunks, load), binding="block0")), load


def _lane0(pin=True, cond=None):
    """The lane-0 form: lane 0 runs a plain copy nest (``cond`` replaces the guard ``lane == 0``; ``pin=False``
    drops it)."""
    load = assign("s", (v(3),), ld("a", v(3)))
    nest = loop(3, "u", E, load)
    if pin or cond is not None:
        nest = guard(cond if cond is not None else ibin("eq", v(2), IConst(0)), nest)
    return _staged(loop(2, "lane", W, nest, binding="block0")), load


def _check(after, load):
    return check_transform(BEFORE, after, Tau(), None, datamaps=[Copy("s", "a", (9,), (v(9),), Live(load))],
                           final=False)


def _runs_as_before(after):
    """The staged program computes what the unstaged one computes on the interpreter (an independent reference)."""
    a = np.random.default_rng(1).integers(-50, 50, size=E).astype(np.int32)
    outs = []
    for p in (BEFORE, after):
        arrays = {"a": a.copy(), "out": np.zeros(E, np.int32)}
        interpret_loops(p, {}, arrays, checked=True)
        outs.append(arrays["out"])
    assert np.array_equal(outs[0], outs[1]) and np.array_equal(outs[0], 2 * a)


def _datamap(r):
    (d,) = r.verdicts(Kind.DATAMAP)
    return d


def _disproved(r):
    d = _datamap(r)
    assert d.status == "disproved" and d.witness.instances, r.explain()
    assert d.witness.replay.startswith("CONFIRMED"), d.witness.lines()
    assert all(r.status(k) == "unknown" for k in TRANSFORM), r.explain()  # nothing compared through it
    return d


@pytest.mark.parametrize("form", [_chunked, _lane0], ids=["chunked", "lane0"])
def test_a_cooperative_load_is_proved(form):
    after, load = form()
    r = _check(after, load)
    assert _datamap(r).status == "proved", r.explain()
    assert all(r.status(k) == "proved" for k in TRANSFORM + (Kind.NONINTERFERENCE,)), r.explain()
    _runs_as_before(after)


def test_a_chunk_too_many_writes_out_of_the_tile_and_is_disproved():
    after, load = _chunked(chunks=E // W + 1)
    d = _disproved(_check(after, load))
    assert "out of bounds of s" in d.witness.summary


def test_an_overlapping_chunk_coefficient_is_disproved():
    """``c + lane``: lanes overlap and cells ``W + 1 ..`` are never loaded; the inverse of the mixed-radix
    reading does not give the instances back, or a use reads an unloaded cell."""
    after, load = _chunked(coefficient=1)
    assert _disproved(_check(after, load)).witness.instances


def test_a_lane0_nest_without_its_guard_is_unknown_and_a_race():
    """Every lane copies every cell: the values are right, but the lane loop indexes no tile axis and is
    pinned by nothing, so the rule does not apply; noninterference reports the lanes' writes to the shared
    tile."""
    after, load = _lane0(pin=False)
    r = _check(after, load)
    d = _datamap(r)
    assert d.status == "unknown" and "pinned" in d.reason, r.explain()
    (ni,) = r.verdicts(Kind.NONINTERFERENCE)
    assert ni.status == "disproved" and ni.witness.replay.startswith("CONFIRMED"), r.explain()
    assert not r.ok


def test_a_lane_loop_bounded_but_not_pinned_by_an_equality_is_unknown():
    after, load = _lane0(cond=ibin("lt", v(2), IConst(1)))
    r = _check(after, load)
    assert _datamap(r).status == "unknown" and not r.ok, r.explain()


def _read_write(store_chunks: int = E // W):
    """``out[i] = out[i] * 2`` through a local tile loaded and stored back in the chunked form (the store-back
    over ``store_chunks`` chunks)."""
    double = loop(0, "i", E, assign("out", (v(0),), times(ld("out", v(0)), lit(2))))
    before = program("coop", (), [tensor("out", (E,))], double)
    load = assign("s", (add(mul(W, v(3)), v(2)),), ld("out", add(mul(W, v(3)), v(2))))
    store = assign("out", (add(mul(W, v(5)), v(4)),), ld("s", add(mul(W, v(5)), v(4))))
    after = program("coop", (), [tensor("out", (E,))], decl("s", (E,)),
                    loop(2, "lane", W, loop(3, "c", E // W, load)),
                    loop(0, "i", E, assign("s", (v(0),), times(ld("s", v(0)), lit(2)))),
                    loop(4, "lane", W, loop(5, "c", store_chunks, store)))
    return check_transform(before, after, Tau(), None, final=False,
                                   datamaps=[Copy("s", "out", (9,), (v(9),), Live(load, store))])


def test_a_chunked_load_and_store_back_is_proved():
    r = _read_write()
    assert _datamap(r).status == "proved" and all(r.status(k) == "proved" for k in TRANSFORM), r.explain()


def test_a_store_back_that_skips_a_chunk_is_disproved():
    r = _read_write(store_chunks=E // W - 1)
    assert "not stored back" in _disproved(r).witness.summary
