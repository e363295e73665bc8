"""Declared datamaps (``semantics.transform``): the checker verifies each declaration and compares through it.

Legal and illegal twins for ``Copy`` (a read-only staged tile), ``Forward`` and ``Ring`` (a pipelined
copy), each illegal one disproved with a witness that replays as a wrong value on the loop interpreter;
ring verdicts agree with running both programs at small sizes (the brute-force reference); a CSE
temporary is read through whatever its name; every op states only kinds the checker discharges.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import tilecert as tc
from examples import EXAMPLES
from tilecert.checker import check_transform
from tilecert.checker.check import DISCHARGED
from tilecert.checker.replay import replay_transform
from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.index import IConst, IExpr, IVar, ibin
from tilecert.semantics.printer import format_program
from tilecert.semantics.sched import OPS
from tilecert.semantics.transform import Copy, Forward, Kind, Live, Obligation, Ring, Tau, ring_slot

from test_checker_programs import add, assign, decl, guard, ld, lit, loop, lt, plus, program, tensor, times, v

TRANSFORM = (Kind.COVERAGE, Kind.PREFIX_CUT, Kind.DEPENDENCE)


def _verdicts(before, after, datamaps, sizes=None):
    r = check_transform(before, after, Tau(), sizes, datamaps=datamaps, final=False)
    return {kind: r.status(kind) for kind in TRANSFORM + (Kind.DATAMAP,)}, r


def _disproved_and_replayed(r):
    (d,) = r.verdicts(Kind.DATAMAP)
    assert d.status == "disproved" and d.witness.instances, r.explain()
    assert d.witness.replay.startswith("CONFIRMED"), d.witness.lines()
    assert all(r.status(kind) == "unknown" for kind in TRANSFORM)  # nothing is compared through a false declaration
    return d


def test_kind_is_the_one_list_of_obligation_kinds():
    assert Kind.COVERAGE == "coverage" and f"{Kind.DATAMAP}" == "datamap"
    assert Obligation("bounds", "op", "f").kind is Kind.BOUNDS
    with pytest.raises(ValueError):
        Obligation("coverge", "op", "f")
    assert DISCHARGED <= set(Kind)


# ============================================================================ Ring: a pipelined copy
K = 99  # the version variable of the ring declarations


def _consume(value):
    return times(value, lit(2))


def _plain():
    """``for k in [0, N) (serial): out[k] = a[k] * 2``."""
    tensors = [tensor("a", ("N",), written=False), tensor("out", ("N",))]
    return program("ring", ("N",), tensors, loop(0, "k", "N", assign("out", (v(0),), _consume(ld("a", v(0))))))


def _pipelined(versions: int, distance: int, declared_versions: int | None = None):
    """``_plain`` with ``a`` read through a ring of ``versions`` slots, prefetched ``distance`` iterations ahead:

        local buf[versions]
        for p in [0, distance): if p < N: buf[p mod versions] = a[p]                 (fill version p)
        for k in [0, N):
            if k + distance < N: buf[(k + distance) mod versions] = a[k + distance]    (fill version k + distance)
            out[k] = buf[k mod versions] * 2                                         (use version k)

    legal iff ``versions > distance``; the ring is declared with ``declared_versions`` slots (default: the same)."""
    n = declared_versions or versions
    k, p = v(0), v(1)
    ahead = add(k, distance)
    slot = ring_slot(K, n)

    def slot_of(e: IExpr) -> IExpr:
        return ibin("mod", e, IConst(versions))

    prologue = assign("buf", (slot_of(p),), ld("a", p))
    fill = assign("buf", (slot_of(ahead),), ld("a", ahead))
    use = assign("out", (k,), _consume(ld("buf", slot_of(k))))
    tensors = [tensor("a", ("N",), written=False), tensor("out", ("N",))]
    body = [decl("buf", (versions,))]
    if distance:
        body.append(loop(1, "p", distance, guard(lt(p, "N"), prologue)))
    body.append(loop(0, "k", "N", guard(lt(ahead, "N"), fill) if distance else fill, use))
    after = program("ring", ("N",), tensors, *body)
    fills = ((fill, ahead),) + (((prologue, p),) if distance else ())
    ring = Ring("buf", "a", n, K, slot, (), (IVar(K, 0),), fills, ((use, k),))
    return after, ring


def test_a_two_slot_ring_is_proved_for_every_trip_count():
    after, ring = _pipelined(2, 1)
    verdicts, r = _verdicts(_plain(), after, (ring,))
    assert set(verdicts.values()) == {"proved"}, r.explain()
    assert r.symbolic == ("N",)


def test_a_ring_with_too_few_slots_is_disproved_with_a_replaying_witness():
    after, ring = _pipelined(1, 1)  # the prefetch of version k + 1 overwrites the slot version k is read from
    _, r = _verdicts(_plain(), after, (ring,))
    d = _disproved_and_replayed(r)
    assert "overwrites" in d.witness.summary
    assert dict(d.witness.sizes)["N"] >= 2


def test_a_ring_declared_with_other_slots_than_it_fills_is_disproved():
    after, ring = _pipelined(2, 1)
    wrong = dataclasses.replace(ring, slot=ibin("mod", ibin("add", IVar(K, 0), IConst(1)), ring.slot.b))  # (k+1) mod 2
    _, r = _verdicts(_plain(), after, (wrong,))
    (d,) = r.verdicts(Kind.DATAMAP)
    assert d.status == "disproved" and "slot" in d.witness.summary


def test_a_ring_declared_with_more_slots_than_it_allocates_is_refused():
    after, ring = _pipelined(1, 1, declared_versions=2)
    _, r = _verdicts(_plain(), after, (ring,))
    (d,) = r.verdicts(Kind.DATAMAP)
    assert d.status == "disproved" and "declared with 2 slots but allocates [1]" in d.witness.summary


def test_a_ring_access_nobody_declared_is_refused():
    after, ring = _pipelined(2, 1)
    undeclared = dataclasses.replace(ring, fills=ring.fills[1:])  # the prologue's fill left out
    _, r = _verdicts(_plain(), after, (undeclared,))
    (d,) = r.verdicts(Kind.DATAMAP)
    assert d.status == "disproved" and "neither a declared fill nor a use" in d.witness.summary


@pytest.mark.parametrize("versions,distance", [(v_, d) for v_ in (1, 2, 3) for d in (0, 1, 2)])
def test_ring_verdicts_agree_with_running_both_programs(versions, distance):
    """Proved iff the interpreter's outputs agree at every N in [0, 6) (the brute-force reference)."""
    after, ring = _pipelined(versions, distance)
    _, r = _verdicts(_plain(), after, (ring,))
    agree = all(replay_transform(_plain(), after, {"N": n}).startswith("not confirmed") for n in range(6))
    assert agree == (versions > distance)
    assert r.status(Kind.DATAMAP) == ("proved" if agree else "disproved"), r.explain()


# ============================================================================ Copy: a read-only staged tile
def _staged(write_source=False):
    """``for i in [0, N): { for j in [0, M): out[i, j] = a[j] + 1; [a[0] = 7] }``, and the same program with
    ``a`` staged into a local tile ``s`` read by every ``i``: one load, no store-back."""
    tensors = [tensor("a", ("M",)), tensor("out", ("N", "M"))]
    poke = (assign("a", (0,), lit(7)),) if write_source else ()

    def body(src):
        return loop(0, "i", "N", loop(1, "j", "M", assign("out", (v(0), v(1)), plus(ld(src, v(1)), lit(1)))), *poke)

    load = assign("s", (v(2),), ld("a", v(2)))
    before = program("staged", ("N", "M"), tensors, body("a"))
    after = program("staged", ("N", "M"), tensors, decl("s", ("M",)), loop(2, "u", "M", load), body("s"))
    return before, after, Copy("s", "a", (2,), (v(2),), Live(load))


def test_a_read_only_copy_is_proved():
    before, after, copy = _staged()
    verdicts, r = _verdicts(before, after, (copy,))
    assert set(verdicts.values()) == {"proved"}, r.explain()


def test_a_write_to_the_source_of_a_read_only_copy_is_disproved_with_a_replaying_witness():
    before, after, copy = _staged(write_source=True)
    _, r = _verdicts(before, after, (copy,))
    d = _disproved_and_replayed(r)
    assert "writes a cell of a that read-only copy s holds" in d.witness.summary


def test_a_read_only_copy_with_a_wrong_cell_map_is_disproved():
    before, after, copy = _staged()
    _, r = _verdicts(before, after, (dataclasses.replace(copy, cell=(add(v(2), 1),)),))
    (d,) = r.verdicts(Kind.DATAMAP)
    assert d.status == "disproved" and "other than the declared one" in d.witness.summary


# ============================================================================ Forward
def _forwarded(poke: bool):
    """``Y[0] = X[0] + 1; [X[0] = 5;] Y[1] = X[0] * 2`` and the same with ``X[0]`` read once into ``t``."""
    tensors = [tensor("X", (1,)), tensor("Y", (2,))]
    mid = (assign("X", (0,), lit(5)),) if poke else ()

    def uses(src):
        return (assign("Y", (0,), plus(src, lit(1))),) + mid + (assign("Y", (1,), times(src, lit(2))),)

    before = program("fwd", (), tensors, *uses(ld("X", 0)))
    after = program("fwd", (), tensors, decl("t", ()), assign("t", (), ld("X", 0)), *uses(ld("t")))
    return before, after


def test_a_forward_is_proved():
    before, after = _forwarded(poke=False)
    verdicts, r = _verdicts(before, after, (Forward("t", ld("X", 0)),))
    assert set(verdicts.values()) == {"proved"}, r.explain()


def test_a_stale_forward_is_disproved_with_a_replaying_witness():
    before, after = _forwarded(poke=True)
    _, r = _verdicts(before, after, (Forward("t", ld("X", 0)),))
    d = _disproved_and_replayed(r)
    assert "X, read into t, is written" in d.witness.summary


def test_a_cse_temporary_is_read_through_whatever_its_name():
    """The materialized unroll of a broadcast scalar, its temporary renamed (to a name a copy of ``t0`` would
    have, too): proved through its declaration alone."""
    from test_sched_hw_ops import make
    s, _ = make("broadcast", N=8)
    s.unroll("add.add.N", materialize=True)
    t = s.transforms[-1]
    (fwd,) = t.datamaps
    for name in ("t0_u0", "t0_cse", "acc"):
        def rename(node):
            if isinstance(node, ir.Block):
                return ir.Block(node.args, tuple(rename(st) for st in node.ops), node.yields)
            if isinstance(node, L.Decl) and node.buf.name == fwd.buffer:
                return dataclasses.replace(node, buf=dataclasses.replace(node.buf, name=name))
            if isinstance(node, (L.Loop, L.If)):
                return dataclasses.replace(node, body=rename(node.body))
            if isinstance(node, (L.Assign, L.Accum)):
                value = L.Ld(name, (), node.value.dtype) if node.value == L.Ld(fwd.buffer, (), "i32") else node.value
                if isinstance(value, L.Bin):
                    value = dataclasses.replace(value, **{f: L.Ld(name, (), "i32") for f in ("a", "b")
                                                          if getattr(value, f) == L.Ld(fwd.buffer, (), "i32")})
                return dataclasses.replace(node, buf=name if node.buf == fwd.buffer else node.buf, value=value)
            return node

        renamed = dataclasses.replace(s.programs[1], body=rename(s.programs[1].body))
        assert name in format_program(renamed)
        r = check_transform(s.programs[0], renamed, t.tau, s.sizes, datamaps=(Forward(name, fwd.expression),),
                            replay=False)
        assert r.ok, r.explain()


# ============================================================================ stated versus discharged
SAMPLES = {
    "split": [("split", ("acc.mma.p1", 2))],
    "fuse": [("fuse", ("acc.full.p1", "acc.full.p0"))],
    "reorder": [("reorder", (["acc.mma.p0", "acc.mma.p1"],))],
    "swap": [("swap", ("a.load.M", "a.load.K"))],
    "tile": [("tile", (["acc.mma.p1", "acc.mma.p0"], [2, 2]))],
    "insert_unit": [("insert_unit", ("acc.mma.K",))],
    "remove_unit": [("insert_unit", ("acc.mma.K",)), ("remove_unit", ("acc.mma.K.unit",))],
    "coalesce": [("coalesce", (["acc.full.p1", "acc.full.p0"],))],
    "reshape": [("reshape", ("acc.full.p0", [5, 1]))],
    "bind": [("bind", ("nest.0", "grid0"))],
    "unroll": [("unroll", ("acc.mma.p1", True))],
    "partition": [("partition", ("nest.0", [1]))],
    "pad": [("pad", ("a.load.K", 8))],
    "expand_zero": [("expand_zero", ("acc",))],
    "privatize": [("privatize", ("acc", "k"))],
    "merge": [("pad", ("a.load.M", 7)), ("merge", ("a.load.M", "b.load.K"))],
    "fission": [("pad", ("a.load.M", 7)), ("merge", ("a.load.M", "b.load.K")), ("fission", ("a.load.M", "a.load.K"))],
    "stage": [("stage", ("A", ["a.load.M", "a.load.K"]))],
    "constant": [("constant", ("A",))],
    "expand_dim": [("expand_dim", ("acc", ["nest.0", "nest.1"]))],
    "lift_alloc": [("expand_dim", ("acc", ["nest.1"])), ("lift_alloc", ("acc", "nest.1"))],
    "modulo": [("modulo", ("k", 1, {"load": 0, "compute": 1}))],
}
PLAN_KINDS = {Kind.PIPELINE_SCHEDULE, Kind.VERSIONS, Kind.RELEASE}
PENDING = {"modulo": "the checker does not decide the plan obligations yet"} if not PLAN_KINDS <= DISCHARGED else {}


def test_every_op_has_a_sample():
    assert set(SAMPLES) == set(OPS)


@pytest.mark.parametrize("op", [pytest.param(op, marks=pytest.mark.xfail(strict=True, reason=PENDING[op]))
                                if op in PENDING else op for op in sorted(SAMPLES)])
def test_each_op_states_only_kinds_the_checker_discharges(op):
    s = tc.schedule(EXAMPLES["gemm_i32"].kernel, M=4, N=4, K=4)
    for name, args in SAMPLES[op]:
        s.apply(name, *args)
    r = s.check()
    contract = r.contract()
    subject = list(contract)[-1]
    assert op in subject and contract[subject], contract
    stated = set(contract[subject])
    assert stated <= DISCHARGED
    decided = {res.kind for res in r if res.subject == subject}
    assert stated <= decided | {Kind.CONTAINMENT, Kind.HARDWARE_LIMITS} and all(
        any(res.kind == kind for res in r) for kind in stated)
    assert set(contract[subject].values()) == {"proved"}, r.explain()
    assert "stated by the op: " in r.explain()


def test_a_stated_kind_nothing_decides_is_unknown_never_proved():
    p = _plain()
    r = check_transform(p, p, Tau(), listed=(Obligation(Kind.VERSIONS, "op", "every version is read once"),))
    assert r.contract()["transform"] == {Kind.VERSIONS: "unknown"} and not r.ok


def test_the_readme_obligation_table_lists_the_discharged_kinds():
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    table = text[text.index("| obligation | what must hold |"):]
    table = table[:table.index("\n\n")]
    assert [re.match(r"\| `(\w+)` \|", row).group(1) for row in table.splitlines()[2:]] == sorted(
        DISCHARGED, key=list(Kind).index)
