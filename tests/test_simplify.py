"""The guard simplifier against brute-force enumeration.

Hypothesis draws small loop nests (extents that are constants, sizes, outer loop
variables, some zero, never negative) with random quasi-affine guards (comparisons of affine terms, floor
division and modulo by constants, min / max, ``&&``, ``||``, ``!``, constant conjuncts,
and non-affine products that must be kept) and random selects. Each ``If`` carries a
unique location and a marker update ``Out[k] += ...``; each select has literals no other
select has. After ``simplify`` every rewrite rule is held against the enumerated points
of the original program, for every size value tried (symbolic sizes) or for the bound
one:

- ``if c: B -> B``: ``c`` holds at every point that reaches the guard;
- ``if c: B -> nothing``: ``c`` fails at every point that reaches it;
- ``if a && b: B -> if b: B``: the dropped conjunct holds at every point that reaches it;
- ``c ? x : y -> x`` / ``y``: likewise for the select's condition;
- ``loop [0, 0) -> nothing``: only empty loops (or loops nothing reaches) disappear;

and the simplified program interprets to the same ``Out`` as the original, which in turn
matches the enumeration.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import pytest
from hypothesis import event, given, settings, strategies as st

from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.errors import Loc
from tilecert.semantics.index import IBin, IConst, IExpr, INot, ISize, IVar, conjuncts, evaluate, ibin
from tilecert.semantics.loopinterp import interpret_loops
from tilecert.semantics.sched.simplify import census, simplify

SIZES = ("N", "M")
SIZE_VALUES = (0, 1, 2, 3, 5, 7)
FILE = "<simplify-test>"
CAMPAIGN = max(settings.default.max_examples, 60)


# ---------------------------------------------------------------------------- program generation
@dataclass
class Gen:
    draw: Any
    loops: int = 0
    markers: int = 0
    literal: int = 0
    scope: list[int] = field(default_factory=list)  # loop variables in scope

    def term(self) -> IExpr:
        """An affine (or, rarely, quasi-affine) integer term over the variables in scope and the sizes."""
        atoms: list[IExpr] = [IVar(v, 0) for v in self.scope] + [ISize(s) for s in SIZES]
        e: IExpr = IConst(self.draw(st.integers(-3, 4)))
        for _ in range(self.draw(st.integers(1, 2))):
            coef = self.draw(st.sampled_from([1, 1, 2, -1, 3]))
            e = ibin("add", e, ibin("mul", IConst(coef), self.draw(st.sampled_from(atoms))))
        shape = self.draw(st.sampled_from(["plain", "plain", "floordiv", "mod", "min", "max"]))
        if shape in ("floordiv", "mod"):
            e = ibin(shape, e, IConst(self.draw(st.integers(1, 3))))
        elif shape in ("min", "max"):
            e = ibin(shape, e, self.draw(st.sampled_from(atoms)))
        return e

    def guard(self) -> IExpr:
        """A condition, often a conjunction (whose conjuncts the simplifier may drop one by one)."""
        parts = [self.cond() for _ in range(self.draw(st.integers(1, 3)))]
        out = parts[0]
        for c in parts[1:]:
            out = IBin("and", out, c)
        return out

    def cond(self, depth: int = 2) -> IExpr:
        kind = self.draw(st.sampled_from(["cmp", "cmp", "cmp", "and", "or", "not", "const", "nonaffine"]
                                         if depth > 0 else ["cmp", "cmp", "const", "nonaffine"]))
        if kind == "cmp":
            op = self.draw(st.sampled_from(["lt", "le", "gt", "ge", "eq", "ne"]))
            return IBin(op, self.term(), self.term())
        if kind == "const":
            return IConst(self.draw(st.integers(0, 1)))
        if kind == "nonaffine":  # a product of two variables: isl cannot decide it, so it must stay
            atoms = [IVar(v, 0) for v in self.scope] + [ISize(s) for s in SIZES]
            return IBin("lt", IBin("mul", self.draw(st.sampled_from(atoms)), self.draw(st.sampled_from(atoms))),
                        self.term())
        if kind == "not":
            return INot(self.cond(depth - 1))
        return IBin(kind, self.cond(depth - 1), self.cond(depth - 1))

    def value(self, depth: int = 2) -> L.SExpr:
        """The updated value: selects over leaves that each hold a literal no other leaf has."""
        if depth > 0 and self.draw(st.booleans()):
            return L.Sel(L.Ix(self.guard(), "bool"), self.value(depth - 1), self.value(depth - 1), "i64")
        self.literal += 1
        tag = L.Lit(self.literal, "i64")
        return tag if self.draw(st.booleans()) else L.Bin("add", L.Ix(self.term(), "i64"), tag, "i64")

    def marker(self) -> L.Accum:
        k = self.markers
        self.markers += 1
        return L.Accum("Out", (IConst(k),), "add", self.value(), "unordered_tree", Loc(FILE, k + 1))

    def block(self, depth: int) -> ir.Block:
        stmts: list = [self.marker()]
        for _ in range(self.draw(st.integers(1, 2))):
            kind = self.draw(st.sampled_from(["loop", "if", "if"] if depth > 0 else ["marker"]))
            if kind == "marker":
                stmts.append(self.marker())
            elif kind == "loop":
                stmts.append(self.loop(depth - 1))
            else:
                k = self.markers  # the If's location is its first marker's
                body = self.block(depth - 1)
                stmts.append(L.If(self.guard(), body, Loc(FILE, k + 1)))
        return ir.Block((), tuple(stmts))

    def loop(self, depth: int) -> L.Loop:
        var = self.loops
        self.loops += 1
        outer = [IVar(v, 0) for v in self.scope]
        extent = self.draw(st.sampled_from(
            [IConst(0), IConst(1), IConst(3), ISize("N"), ISize("M"),
             ibin("max", ibin("sub", ISize("N"), IConst(1)), IConst(0)),  # a negative extent is an error
             ibin("floordiv", ibin("add", ISize("M"), IConst(1)), IConst(2))]
            + [ibin("add", v, IConst(1)) for v in outer]))
        start = self.draw(st.sampled_from([IConst(0), IConst(0), IConst(1)] + outer))
        self.scope.append(var)
        body = self.block(depth)
        self.scope.pop()
        kind = self.draw(st.sampled_from(["serial", "reduce"]))
        return L.Loop(var, f"L{var}", extent, kind, body, None, start)


@st.composite
def programs(draw) -> ir.Program:
    g = Gen(draw)
    body = ir.Block((), tuple(g.loop(2) for _ in range(draw(st.integers(1, 2)))))
    out = ir.TensorDecl("Out", "i64", (ir.Dim(0, "K"),), (IConst(g.markers),), True)
    return ir.Program("guards", SIZES, (out,), body)


# ---------------------------------------------------------------------------- enumeration
Env = tuple[dict, dict]  # (sizes, loop coordinates) of one point


@dataclass
class Trace:
    """What enumerating the original program saw."""

    ifs: dict[int, list[tuple[Env, bool]]] = field(default_factory=dict)  # If line -> (point, condition)
    sels: dict[int, list[tuple[Env, bool]]] = field(default_factory=dict)  # id(select) -> (point, condition)
    loops: dict[str, int] = field(default_factory=dict)  # loop name -> entries with at least one iteration


def holds(e: IExpr, env: Env) -> bool:
    return bool(evaluate(e, env[0], env[1]))


def enumerate_program(p: ir.Program, sizes: dict, trace: Trace) -> np.ndarray:
    """``Out`` computed by walking every point of ``p`` in Python, recording each guard and select."""
    out = np.zeros(p.tensors[0].shape[0].value, np.int64)

    def value(e: L.SExpr, env: Env) -> int:
        if isinstance(e, L.Lit):
            return int(e.value)
        if isinstance(e, L.Ix):
            return int(evaluate(e.expr, *env))
        if isinstance(e, L.Bin):
            return value(e.a, env) + value(e.b, env)
        c = holds(e.cond.expr, env)
        trace.sels.setdefault(id(e), []).append((env, c))
        return value(e.a if c else e.b, env)

    def run(block: ir.Block, coords: dict) -> None:
        env = (sizes, coords)
        for stmt in block.ops:
            if isinstance(stmt, L.Accum):
                out[stmt.index[0].value] += value(stmt.value, env)
            elif isinstance(stmt, L.If):
                c = holds(stmt.cond, env)
                trace.ifs.setdefault(stmt.loc.line, []).append((env, c))
                if c:
                    run(stmt.body, coords)
            else:
                start = int(evaluate(stmt.start, *env))
                n = int(evaluate(stmt.extent, *env))
                trace.loops[stmt.name] = trace.loops.get(stmt.name, 0) + (n > 0)
                for i in range(start, start + n):
                    run(stmt.body, {**coords, (stmt.var, 0): i})

    run(p.body, {})
    return out


def interpret(p: ir.Program, sizes: dict) -> np.ndarray:
    arrays = {"Out": np.zeros(p.tensors[0].shape[0].value, np.int64)}
    interpret_loops(p, sizes, arrays, checked=False)
    return arrays["Out"]


# ---------------------------------------------------------------------------- the rules
def literals(e: L.SExpr) -> set:
    if isinstance(e, L.Lit):
        return {e.value}
    if isinstance(e, (L.Sel, L.Bin)):
        return literals(e.a) | literals(e.b)
    return set()


def check_conjuncts(original: IExpr, kept: IExpr, seen: list[tuple[Env, bool]], what: str, fired: set) -> None:
    """Rule ``if a && b -> if b``: the kept conjuncts are original ones; each dropped one always held."""
    assert all(c in conjuncts(original) for c in conjuncts(kept)), f"{what}: {kept} does not come from {original}"
    for c in conjuncts(original):
        if c not in conjuncts(kept):
            fired.add(f"{what}: conjunct dropped")
            bad = [env for env, _ in seen if not holds(c, env)]
            assert not bad, f"{what}: dropped conjunct {c} of {original} fails at {bad[0]}"


def check_folded(cond: IExpr, seen: list[tuple[Env, bool]], always: bool, what: str, fired: set) -> None:
    """Rules ``-> B`` (``always``) and ``-> nothing`` / ``-> y``: the condition is constant where reached."""
    fired.add(f"{what}: {'always' if always else 'never'}{'' if seen else ' (unreached)'}")
    bad = [env for env, c in seen if c != always]
    assert not bad, f"{what}: {cond} folded as {'always' if always else 'never'} true, but not at {bad[0]}"


def check_value(orig: L.SExpr, simp: L.SExpr, trace: Trace, fired: set) -> None:
    """Match a simplified value to the original select by select (leaves carry unique literals)."""
    if not isinstance(orig, L.Sel):
        assert simp == orig
        return
    seen = trace.sels.get(id(orig), [])
    if isinstance(simp, L.Sel) and literals(simp) & literals(orig.a) and literals(simp) & literals(orig.b):
        check_conjuncts(orig.cond.expr, simp.cond.expr, seen, "select", fired)
        check_value(orig.a, simp.a, trace, fired)
        check_value(orig.b, simp.b, trace, fired)
        return
    always = literals(simp) <= literals(orig.a)
    assert always or literals(simp) <= literals(orig.b), f"{simp} is neither branch of {orig}"
    check_folded(orig.cond.expr, seen, always, "select", fired)
    check_value(orig.a if always else orig.b, simp, trace, fired)


def check_rules(p: ir.Program, q: ir.Program, size_sets: list[dict]) -> set[str]:
    """Hold every rewrite from ``p`` to ``q = simplify(p)`` against the points of ``p`` for each size set.

    Returns the rules that fired."""
    trace = Trace()
    fired: set[str] = set()
    for sizes in size_sets:
        want = enumerate_program(p, sizes, trace)
        np.testing.assert_array_equal(interpret(p, sizes), want, err_msg=f"interpreter vs enumeration at {sizes}")
        np.testing.assert_array_equal(interpret(q, sizes), want, err_msg=f"simplified program at {sizes}")
    kept_ifs = {st_.loc.line: st_ for st_ in ir.walk(q.body) if isinstance(st_, L.If)}
    kept_markers = {st_.index[0].value: st_ for st_ in ir.walk(q.body) if isinstance(st_, L.Accum)}
    for stmt in ir.walk(p.body):
        if isinstance(stmt, L.If):
            seen = trace.ifs.get(stmt.loc.line, [])
            if stmt.loc.line in kept_ifs:
                check_conjuncts(stmt.cond, kept_ifs[stmt.loc.line].cond, seen, "if", fired)
            else:  # its body's first marker stayed iff the body was inlined
                check_folded(stmt.cond, seen, stmt.loc.line - 1 in kept_markers, "if", fired)
        elif isinstance(stmt, L.Accum) and stmt.index[0].value in kept_markers:
            check_value(stmt.value, kept_markers[stmt.index[0].value].value, trace, fired)
    kept_loops = {lp.name for lp in L.loops(q.body)}
    for lp in L.loops(p.body):
        if lp.name not in kept_loops:
            fired.add("loop removed")
            assert trace.loops.get(lp.name, 0) == 0, f"loop {lp.name} was removed but it runs"
    return fired


ALL_SIZES = [dict(zip(SIZES, v)) for v in itertools.product(SIZE_VALUES, repeat=len(SIZES))]


# ---------------------------------------------------------------------------- campaigns
@pytest.mark.slow
@settings(max_examples=CAMPAIGN)
@given(programs())
def test_rules_hold_for_every_size_with_symbolic_sizes(p):
    for rule in check_rules(p, simplify(p), ALL_SIZES):
        event(rule)


@pytest.mark.slow
@settings(max_examples=CAMPAIGN)
@given(programs(), st.sampled_from(SIZE_VALUES), st.sampled_from(SIZE_VALUES))
def test_rules_hold_with_bound_sizes(p, n, m):
    sizes = {"N": n, "M": m}
    for rule in check_rules(p, simplify(p, sizes), [sizes]):
        event(rule)


# ---------------------------------------------------------------------------- each rule on a fixed program
I = IVar(0, 0)
N = ISize("N")


def nest(*body, extent: IExpr = N, start: IExpr = IConst(0)) -> ir.Program:
    """``for i in [start, start + extent): body`` with ``Out`` sized for the markers."""
    loop = L.Loop(0, "i", extent, "serial", ir.Block((), tuple(body)), None, start)
    count = sum(isinstance(s, L.Accum) for s in ir.walk(loop.body))
    out = ir.TensorDecl("Out", "i64", (ir.Dim(0, "K"),), (IConst(count),), True)
    return ir.Program("rule", SIZES, (out,), ir.Block((), (loop,)))


def mark(k: int, value: Optional[L.SExpr] = None) -> L.Accum:
    return L.Accum("Out", (IConst(k),), "add", value or L.Bin("add", L.Ix(I, "i64"), L.Lit(k + 1, "i64"), "i64"),
                   "unordered_tree", Loc(FILE, k + 1))


def guard(cond: IExpr, k: int) -> L.If:
    return L.If(cond, ir.Block((), (mark(k),)), Loc(FILE, k + 1))


def lt(a: IExpr, b: IExpr) -> IExpr:
    return IBin("lt", a, b)


SYMBOLIC = [s for s in ALL_SIZES if s["M"] == 0]


@pytest.mark.parametrize("cond,extent,kept,rule", [
    (lt(I, N), N, None, "if: always"),  # the loop bounds prove it
    (IBin("ge", I, N), N, None, "if: never"),
    (IBin("and", lt(I, IConst(4)), lt(I, N)), N, lt(I, IConst(4)), "if: conjunct dropped"),
    (IBin("and", IConst(1), lt(I, IConst(2))), N, lt(I, IConst(2)), "if: conjunct dropped"),  # a constant conjunct
    (lt(I, IConst(5)), N, lt(I, IConst(5)), None),  # true only for N <= 5: stays while N is symbolic
    (lt(IBin("mul", I, I), N), N, lt(IBin("mul", I, I), N), None),  # not quasi-affine: never decided
    (IBin("or", lt(I, IConst(0)), IBin("eq", IBin("mod", I, IConst(2)), IConst(3))), N, None, "if: never"),
    (INot(IConst(0)), N, None, "if: always"),  # a constant condition under not
], ids=["always", "never", "conjunct", "constant-conjunct", "mixed", "non-affine", "mod", "not-constant"])
def test_if_rules(cond, extent, kept, rule):
    p = nest(mark(0), guard(cond, 1), extent=extent)
    q = simplify(p)
    ifs = [s for s in ir.walk(q.body) if isinstance(s, L.If)]
    markers = {s.index[0].value for s in ir.walk(q.body) if isinstance(s, L.Accum)}
    assert [s.cond for s in ifs] == ([kept] if kept is not None else [])
    assert markers == ({0} if rule == "if: never" else {0, 1})
    assert census(q)["ifs"] == len(ifs)
    fired = check_rules(p, q, SYMBOLIC)
    assert fired == ({rule} if rule else set())


def test_bound_sizes_decide_more():
    p = nest(guard(lt(I, IConst(5)), 0))
    assert census(simplify(p))["ifs"] == 1  # mixed for a symbolic N
    for n in (1, 3, 5):  # N <= 5: i < N <= 5 always
        q = simplify(p, {"N": n})
        assert census(q)["ifs"] == 0
        assert check_rules(p, q, [{"N": n, "M": 0}]) == {"if: always"}
    assert census(simplify(p, {"N": 6}))["ifs"] == 1


def test_select_rules():
    pick = L.Sel(L.Ix(lt(I, N), "bool"), L.Lit(10, "i64"), L.Lit(20, "i64"), "i64")
    mixed = L.Sel(L.Ix(IBin("and", lt(I, N), lt(I, IConst(2))), "bool"), L.Lit(30, "i64"), L.Lit(40, "i64"), "i64")
    never = L.Sel(L.Ix(lt(N, I), "bool"), L.Lit(50, "i64"), L.Lit(60, "i64"), "i64")
    p = nest(mark(0, pick), mark(1, mixed), mark(2, never))
    q = simplify(p)
    values = {s.index[0].value: s.value for s in ir.walk(q.body) if isinstance(s, L.Accum)}
    assert values[0] == L.Lit(10, "i64") and values[2] == L.Lit(60, "i64")
    assert values[1] == L.Sel(L.Ix(lt(I, IConst(2)), "bool"), L.Lit(30, "i64"), L.Lit(40, "i64"), "i64")
    assert census(p)["selects"] == 3 and census(q)["selects"] == 1
    assert check_rules(p, q, SYMBOLIC) == {"select: always", "select: never", "select: conjunct dropped"}


def test_empty_loops_are_removed_and_only_they():
    p = nest(mark(0), extent=IConst(0))
    q = simplify(p)
    assert census(q)["loops"] == 0
    assert check_rules(p, q, SYMBOLIC) == {"loop removed"}
    p = nest(mark(0), extent=ibin("sub", N, N))  # not syntactically empty: kept (and runs no iteration)
    assert census(simplify(p))["loops"] == 1


def test_guards_inside_partitioned_ranges():
    """A loop that starts past 0 (a partition segment): ``i >= 2`` always holds in ``[2, N + 2)``."""
    p = nest(guard(IBin("ge", I, IConst(2)), 0), guard(lt(I, IConst(2)), 1), extent=N, start=IConst(2))
    q = simplify(p)
    assert census(q)["ifs"] == 0
    assert {s.index[0].value for s in ir.walk(q.body) if isinstance(s, L.Accum)} == {0}
    assert check_rules(p, q, SYMBOLIC) == {"if: always", "if: never"}


@pytest.mark.parametrize("wrong", ["drop a mixed guard", "drop a reached body", "fold a mixed select"])
def test_the_rule_checks_reject_unsound_rewrites(wrong):
    """The checks above can fail: hand them rewrites no sound simplifier would make."""
    sel = L.Sel(L.Ix(lt(I, IConst(2)), "bool"), L.Lit(10, "i64"), L.Lit(20, "i64"), "i64")
    p = nest(mark(0, sel), guard(lt(I, IConst(2)), 1))
    loop = p.body.ops[0]
    ops = {
        "drop a mixed guard": (mark(0, sel), mark(1)),
        "drop a reached body": (mark(0, sel),),
        "fold a mixed select": (mark(0, L.Lit(10, "i64")), guard(lt(I, IConst(2)), 1)),
    }[wrong]
    q = ir.Program(p.name, p.sizes, p.tensors, ir.Block((), (L.Loop(0, "i", N, "serial", ir.Block((), ops), None,
                                                                     loop.start),)))
    with pytest.raises(AssertionError):
        check_rules(p, q, SYMBOLIC)
