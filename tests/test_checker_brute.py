"""The symbolic checker held against brute-force enumeration and the interpreter, on random programs.

For random small loop nests (``test_checker_programs.random_program``) and random
transforms of them (registry ops, and hand-made reindexings that are often wrong):

- with the size bound, every verdict equals the brute-force one: proved exactly when
  enumerating every instance finds no violation (the programs are affine, so isl decides
  everything and unknown is not expected, except where the correspondence is ambiguous);
- with the size symbolic, a proved verdict meets no counterexample at any small size, and a
  disproved one names sizes at which enumeration finds the violation too;
- when every obligation of a transform is proved, the interpreter computes the same outputs
  before and after, on random integer inputs, in every instance order.

``TILECERT_FULL=1`` runs the long campaigns (``slow``); by default a bounded sample runs.
"""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilecert.checker import check_program, check_transform
from tilecert.checker.brute import (Enumeration, Transform, brute_barrier_uniform, brute_bounds, brute_coverage,
                                    brute_dependence, brute_noninterference, brute_prefix_cut, brute_reduction_policy)
from tilecert.checker.correspondence import correspond
from tilecert.checker.forwarding import through_temporaries
from tilecert.checker.model import Model

from test_checker_programs import (assign, decl, ld, loop, program, random_block_program, random_program,
                                   random_transform, run, tensor)

FULL = os.environ.get("TILECERT_FULL") == "1"
BOUND = {"N": 3}
PROGRAM_CHECKS = {"noninterference": brute_noninterference, "reduction_policy": brute_reduction_policy,
                  "bounds": brute_bounds, "barrier_uniform": brute_barrier_uniform}
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def check_program_agrees(p, sizes):
    r = check_program(p, sizes, replay=False)
    e = Enumeration(Model(p, sizes), sizes)
    for kind, brute in PROGRAM_CHECKS.items():
        found = brute(e)
        assert r.status(kind) == ("disproved" if found else "proved"), (kind, r.explain(), found[:1])
    return r


@settings(max_examples=400 if FULL else 80, **SETTINGS)
@given(random_program())
def test_program_verdicts_equal_brute_force_at_bound_sizes(p):
    check_program_agrees(p, BOUND)


@settings(max_examples=400 if FULL else 60, **SETTINGS)
@given(random_block_program())
def test_barrier_phase_verdicts_equal_brute_force(p):
    check_program_agrees(p, {"N": 2})


@settings(max_examples=200 if FULL else 25, **SETTINGS)
@given(random_program())
def test_symbolic_program_verdicts_hold_at_every_small_size(p):
    r = check_program(p, replay=False)
    for kind, brute in PROGRAM_CHECKS.items():
        status = r.status(kind)
        assert status != "unknown", r.explain()
        if status == "proved":
            for n in range(5):
                assert not brute(Enumeration(Model(p, {"N": n}), {"N": n})), (kind, n)
        else:
            w = r.verdicts(kind)[0].witness
            n = dict(w.sizes).get("N", 3)
            assert brute(Enumeration(Model(p, {"N": n}), {"N": n})), (kind, w.lines())


def check_transform_agrees(p, new, tau, sizes, datamaps=()):
    """Symbolic and brute-force transform verdicts agree; returns the report."""
    r = check_transform(p, new, tau, sizes, replay=False, final=False, datamaps=datamaps)
    c = through_temporaries(correspond(Model(p, sizes), Model(new, sizes), tau, 2000, datamaps), tau, 2000, datamaps)
    if isinstance(c, str):  # temporaries that cannot be read through
        assert r.status("coverage") == "unknown"
        return r
    t = Transform(c, sizes)
    coverage = brute_coverage(t)
    status = r.status("coverage")
    if status == "unknown":
        assert c.ambiguous or c.fresh, r.explain()
        return r
    assert status == ("disproved" if coverage or c.new.problems else "proved"), (r.explain(), coverage[:1])
    if status == "proved":
        for kind, brute in (("dependence", brute_dependence), ("prefix_cut", brute_prefix_cut)):
            found = brute(t)
            if r.status(kind) == "unknown":  # a failure under an ambiguous reading of tau is not a disproof
                assert c.ambiguous and found, (kind, r.explain())
                continue
            assert r.status(kind) == ("disproved" if found else "proved"), (kind, r.explain(), found[:1])
    return r


@settings(max_examples=300 if FULL else 80, **SETTINGS)
@given(st.data())
def test_transform_verdicts_equal_brute_force_at_bound_sizes(data):
    p = data.draw(random_program())
    new, tau, _, datamaps = data.draw(random_transform(p))
    check_transform_agrees(p, new, tau, BOUND, datamaps)


@settings(max_examples=300 if FULL else 60, **SETTINGS)
@given(st.data())
def test_proved_transforms_preserve_the_interpreters_results(data):
    p = data.draw(random_program())
    new, tau, choice, datamaps = data.draw(random_transform(p))
    before = check_program(p, BOUND, replay=False)
    after = check_transform(p, new, tau, BOUND, replay=False, final=False, datamaps=datamaps)
    if not (before.ok and after.ok):
        return
    for seed in range(2):
        want = run(p, BOUND, seed)
        for order in ("canonical", "reverse", "shuffle"):
            got = run(new, BOUND, seed, order)
            assert all(np.array_equal(want[k], got[k]) for k in want), (choice, order, after.explain())


@pytest.mark.slow
@pytest.mark.skipif(not FULL, reason="long campaign: TILECERT_FULL=1")
@settings(max_examples=300, **SETTINGS)
@given(st.data())
def test_symbolic_transform_verdicts_hold_at_every_small_size(data):
    p = data.draw(random_program())
    new, tau, _, datamaps = data.draw(random_transform(p))
    r = check_transform(p, new, tau, replay=False, final=False, datamaps=datamaps)
    for n in range(4):
        bound = check_transform_agrees(p, new, tau, {"N": n}, datamaps)
        for kind in ("coverage", "prefix_cut", "dependence"):
            if r.status(kind) == "proved" and bound.status("coverage") == "proved":
                assert bound.status(kind) == "proved", (kind, n)


# ----------------------------------------------------------------------------- containment and hardware limits
BINDINGS = ("grid0", "grid1", "grid", "block0", "block1", "block2", "block", "warp", "lane", "vector", "core", None)
ALLOWED = {("grid", "block"), ("grid", "warp"), ("grid", "lane"), ("grid", "vector"), ("block", "warp"),
           ("block", "lane"), ("block", "vector"), ("warp", "lane"), ("warp", "vector"), ("lane", "vector"),
           ("core", "vector")}  # the default target's containment order, written out


@st.composite
def bound_nest(draw):
    depth = draw(st.integers(1, 4))
    bindings = [draw(st.sampled_from(BINDINGS)) for _ in range(depth)]
    extents = [draw(st.sampled_from([1, 2, 31, 32, 33, 64, 100, 1024, 1025, 70000, "N"])) for _ in range(depth)]
    shared = draw(st.sampled_from([0, 1024, 12288, 12289]))  # i32 elements: 48 KiB is 12288 of them
    body = [assign("A", (0,), ld("A", 0))]
    for k in reversed(range(depth)):
        inner = ([decl("sh", (shared,), "shared")] if k == 0 and shared else []) + body
        body = [loop(k, f"l{k}", extents[k], *inner, kind="parallel", binding=bindings[k])]
    return program("hw", ("N",), [tensor("A", (1,))], *body), bindings, extents, shared


def _kind(b):
    return b.rstrip("012") if b else None


def _slot(b):
    """The hardware index a binding occupies, written out: grid / block slots (unslotted is slot 0), warp, lane."""
    if _kind(b) in ("grid", "block"):
        return _kind(b) + (b[-1] if b[-1].isdigit() else "0")
    return b if b in ("warp", "lane") else None


def _launch(bindings, shared):
    """The launch of a single nest as the CUDA planner forms it: the depth where it starts (below the host loops
    above the first grid loop) and the depth where its grid nest ends (l0 alone has a second statement, the
    shared declaration, which ends a grid nest)."""
    grids = [k for k, b in enumerate(bindings) if _kind(b) == "grid"]
    if not grids:
        return 0, 0
    end = grids[0] + 1
    while end < len(bindings) and _kind(bindings[end]) == "grid" and not (end == 1 and shared):
        end += 1
    return grids[0], end


def expected_containment(bindings, shared) -> bool:
    bound = [b for b in bindings if _kind(b) in ("grid", "block", "warp", "lane", "vector", "core")]
    for i, outer in enumerate(bound):
        for inner in bound[i + 1:]:
            if _kind(outer) == _kind(inner):  # one scope: distinct slots, or core / vector (which may nest)
                if _kind(outer) in ("grid", "block") and _slot(outer) == _slot(inner):
                    return False
                if _kind(outer) in ("warp", "lane"):
                    return False
                continue
            if (_kind(outer), _kind(inner)) not in ALLOWED:
                return False
    if not any(_slot(b) for b in bindings):
        return True
    start, end = _launch(bindings, shared)
    body = bindings[end:]
    if any(_kind(b) == "grid" for b in body):  # a grid loop among a kernel's statements
        return False
    if any(_slot(b) == "block0" for b in body) and any(b in ("warp", "lane") for b in body):
        return False
    return len({_slot(b) for b in bindings[start:end]}) == end - start


def expected_limits(bindings, extents, shared, n) -> bool:
    if not any(_slot(b) for b in bindings):
        return True
    values = [n if e == "N" else e for e in extents]
    start, end = _launch(bindings, shared)
    ext = {}
    for k in range(start, len(bindings)):
        if _slot(bindings[k]) and not (_kind(bindings[k]) == "grid" and k >= end):  # grid loops of the grid nest
            ext[_slot(bindings[k])] = max(ext.get(_slot(bindings[k]), 0), values[k])
    if ext.get("lane", 0) > 32:
        return False
    grid = [ext.get(f"grid{d}", 1) for d in range(3)]
    lanes = "warp" in ext or "lane" in ext
    x = 32 * ext.get("warp", 1) if lanes else ext.get("block0", 1)
    block = [x, ext.get("block1", 1), ext.get("block2", 1)]
    if any(g > m for g, m in zip(grid, (2 ** 31 - 1, 65535, 65535))) or \
            any(b > m for b, m in zip(block, (1024, 1024, 64))) or block[0] * block[1] * block[2] > 1024:
        return False
    if not shared or start > 0:  # the declaration is host (device) memory when l0 is a host loop
        return True
    dims = {"lane" if d == "warp" else d for d in ext if not d.startswith("grid")} | ({"warp"} if "warp" in ext else set())
    around = {_slot(bindings[0])} & dims  # l0's own thread dimension, when l0 is a thread loop
    if around >= dims:  # every dimension bound around it: thread-private
        return True
    copies = 1
    for d in around:
        copies *= 32 if d == "lane" else ext[d]
    return copies * shared * 4 <= 48 * 1024


@settings(max_examples=300 if FULL else 80, **SETTINGS)
@given(bound_nest(), st.sampled_from([1, 40000]))
def test_containment_and_hardware_limits_match_direct_evaluation(nest, n):
    p, bindings, extents, shared = nest
    r = check_program(p, {"N": n}, replay=False)
    assert r.status("containment") == ("proved" if expected_containment(bindings, shared) else "disproved")
    assert r.status("hardware_limits") == ("proved" if expected_limits(bindings, extents, shared, n) else "disproved")
