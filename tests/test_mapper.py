"""The mapper base class (semantics/mapper.py): identity when nothing changes, substitution through
every node kind (against an independent field-by-field reference), subclasses, and copies."""
from __future__ import annotations

import dataclasses
from typing import Any, Iterator

import pytest

import tilecert as tc
from examples import EXAMPLES
from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.index import IConst, IExpr, ISize, IVar, conjuncts, free_vars, ibin, substitute
from tilecert.semantics.mapper import Mapper, map_loads, map_node, subst_node
from tilecert.semantics.sched.base import Copier


def program(name: str) -> ir.Program:
    return tc.schedule(EXAMPLES[name].kernel).program


def nodes(node: Any) -> Iterator[Any]:
    """Every dataclass node under ``node`` (itself included), index expressions left whole."""
    if isinstance(node, tuple):
        for x in node:
            yield from nodes(x)
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        yield node
        if not isinstance(node, IExpr):
            for f in dataclasses.fields(node):
                if f.name != "loc":
                    yield from nodes(getattr(node, f.name))


def reference_subst(node: Any, var: int, value: IExpr) -> Any:
    """Substitution by a generic walk over every dataclass field (no knowledge of the node kinds)."""
    if isinstance(node, IExpr):
        return substitute(node, var, value)
    if isinstance(node, tuple):
        return tuple(reference_subst(x, var, value) for x in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        return dataclasses.replace(node, **{f.name: reference_subst(getattr(node, f.name), var, value)
                                            for f in dataclasses.fields(node) if f.name != "loc"})
    return node


def every_kind() -> ir.Block:
    """One block holding each statement kind and each scalar expression kind, all reading loop 7."""
    i = IVar(7, 0)
    ld = L.Ld("A", (ibin("add", i, IConst(1)),), "f32")
    value = L.Sel(L.Ix(ibin("lt", i, ISize("N")), "bool"),
                  L.Bin("add", L.Un("neg", ld, "f32"), L.Cvt(L.Ix(i, "i32"), "f32"), "f32"), L.Lit(0.0, "f32"), "f32")
    body = ir.Block((), (
        L.Decl(L.Buffer("t", "f32", (ibin("add", i, IConst(2)),))),
        L.If(ibin("lt", i, IConst(5)), ir.Block((), (L.Assign("t", (i,), value),))),
        L.Accum("t", (i,), "add", ld),
        L.Barrier("block"),
    ))
    return ir.Block((), (L.Loop(8, "j", ibin("add", i, IConst(3)), "serial", body, None, i),))


# ----------------------------------------------------------------------------- identity
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_nothing_changed_is_the_same_object(name):
    body = program(name).body
    assert Mapper().map_block(body) is body
    assert map_node(body, lambda e: e) is body
    unused = 1 + max(lp.var for lp in L.loops(body))
    assert subst_node(body, unused, IConst(0)) is body


def test_only_the_path_to_a_change_is_rebuilt():
    body = program("gemm").body
    target = next(lp for lp in L.loops(body) if lp.name == "acc.mma.K")
    out = subst_node(body, target.var, IConst(0))
    old, new = list(nodes(body)), list(nodes(out))
    assert len(old) == len(new)
    for a, b in zip(old, new):
        reads = any((target.var, 0) in free_vars(e) for e in nodes(a) if isinstance(e, IExpr))
        assert (a is not b) == reads, f"{type(a).__name__} rebuilt={a is not b} but reads the variable={reads}"


# ----------------------------------------------------------------------------- substitution
def test_substitution_reaches_every_node_kind():
    block = every_kind()
    kinds = {type(n) for n in nodes(block)}
    assert set(L.STMT_TYPES) | set(L.EXPR_TYPES) | {L.Buffer, ir.Block} <= kinds
    out = subst_node(block, 7, IConst(4))
    assert out == reference_subst(block, 7, IConst(4))
    assert not any((7, 0) in free_vars(e) for e in nodes(out) if isinstance(e, IExpr))
    barrier = block.ops[0].body.ops[3]
    assert out.ops[0].body.ops[3] is barrier  # reads no index expression: kept


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_substitution_agrees_with_a_generic_walk(name):
    body = program(name).body
    for lp in L.loops(body):
        value = ibin("add", IVar(lp.var, 0), IConst(1))
        assert subst_node(lp.body, lp.var, value) == reference_subst(lp.body, lp.var, value), lp.name


def test_map_loads_replaces_each_load():
    value = every_kind().ops[0].body.ops[1].body.ops[0].value
    out = map_loads(value, lambda ld: L.Lit(1.0, ld.dtype))
    assert not any(isinstance(n, L.Ld) for n in nodes(out))
    assert sum(isinstance(n, L.Lit) for n in nodes(out)) == 1 + sum(isinstance(n, L.Ld) for n in nodes(value))


def test_conjuncts_flatten_a_chain():
    a, b, c = (ibin("lt", IVar(k, 0), IConst(3)) for k in range(3))
    assert conjuncts(ibin("and", ibin("and", a, b), c)) == [a, b, c]
    assert conjuncts(a) == [a]


# ----------------------------------------------------------------------------- subclasses
class RenameStores(Mapper):
    """Stores to ``C`` go to ``D``; barriers are dropped; each update is preceded by a warp barrier."""

    def map_assign(self, st: L.Assign) -> Any:
        st = super().map_assign(st)
        return self.rebuilt(st, buf="D" if st.buf == "C" else st.buf)

    def map_barrier(self, st: L.Barrier) -> Any:
        return None

    def map_accum(self, st: L.Accum) -> Any:
        return [L.Barrier("warp"), st]


def test_a_subclass_rewrites_drops_and_splices():
    body = every_kind().ops[0].body.ops + program("gemm").body.ops
    before = list(ir.walk(ir.Block((), body)))
    out = list(ir.walk(RenameStores().map_block(ir.Block((), body))))
    old_ids = {id(st) for st in before}
    stores = [(a, b) for a, b in zip([st for st in before if isinstance(st, L.Assign)],
                                     [st for st in out if isinstance(st, L.Assign)])]
    assert len(stores) == sum(isinstance(st, L.Assign) for st in out)
    for a, b in stores:
        assert b.buf == ("D" if a.buf == "C" else a.buf) and b.index == a.index and b.value == a.value
        assert (b is a) == (a.buf != "C")
    assert any(a.buf == "C" for a, _ in stores)
    accums = [st for st in out if isinstance(st, L.Accum)]
    assert accums and all(id(st) in old_ids for st in accums)
    assert [st.scope for st in out if isinstance(st, L.Barrier)] == ["warp"] * len(accums)
    assert len(out) == len(before) - 1 + len(accums)  # the one block barrier dropped


def test_copies_share_no_node():
    p = program("gemm")
    lp = next(lp for lp in L.loops(p.body) if lp.name == "acc.mma.p1")
    copier = Copier(p)
    copies = [copier.copy(lp.body, lp.var, IConst(k), f"c{k}") for k in range(2)]
    ids = [{id(n) for n in nodes(c.body) if not isinstance(n, IExpr)} for c in copies]
    assert not ids[0] & ids[1] and not (ids[0] | ids[1]) & {id(n) for n in nodes(lp.body)}
    for k, c in enumerate(copies):
        assert not any((lp.var, 0) in free_vars(e) for e in nodes(c.body) if isinstance(e, IExpr))
        assert [name for _, _, name in c.loops] == [f"{inner.name}.c{k}" for inner in L.loops(lp.body)]
        renamed = {old: IVar(new, 0) for old, new, _ in c.loops}
        want = lp.body
        for old, value in ((lp.var, IConst(k)), *renamed.items()):
            want = reference_subst(want, old, value)
        assert [st.index for st in ir.walk(c.body) if isinstance(st, L.Accum)] == \
            [st.index for st in ir.walk(want) if isinstance(st, L.Accum)]
