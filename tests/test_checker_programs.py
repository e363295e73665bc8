"""Loop-form programs built by hand for the checker's tests, and the hypothesis strategies.

Builders (``loop``, ``assign``, ``accum``, ``decl``, ``guard``, ``barrier``, ``program``)
write loop form directly, the way ``semantics/expand.py`` does; ``transform`` applies a
registered schedule op to a program and simplifies the result as ``Schedule.apply`` does.
``random_program`` / ``random_transform`` draw small loop nests with affine accesses and
a transform of them (an op of the registry, or a hand-made reindexing that may be wrong)
for the brute-force comparisons in ``test_checker_brute.py``. The tests at the end check
the builders themselves against the interpreter.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional, Union

import numpy as np
from hypothesis import strategies as st

from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.errors import TilecertError
from tilecert.semantics.index import IConst, IExpr, ISize, IVar, evaluate, ibin
from tilecert.semantics.loopinterp import interpret_loops
from tilecert.semantics.sched import OPS
from tilecert.semantics.mapper import subst_node
from tilecert.semantics.transform import Piece, Tau, Transformed
from tilecert.semantics.sched.simplify import simplify

Ix = Union[int, str, IExpr]


def ix(e: Ix) -> IExpr:
    """An index expression from an int (constant), a str (size parameter) or an expression."""
    if isinstance(e, IExpr):
        return e
    return IConst(e) if isinstance(e, int) else ISize(e)


def v(var: int) -> IExpr:
    return IVar(var, 0)


def add(a: Ix, b: Ix) -> IExpr:
    return ibin("add", ix(a), ix(b))


def sub(a: Ix, b: Ix) -> IExpr:
    return ibin("sub", ix(a), ix(b))


def mul(a: Ix, b: Ix) -> IExpr:
    return ibin("mul", ix(a), ix(b))


def lt(a: Ix, b: Ix) -> IExpr:
    return ibin("lt", ix(a), ix(b))


def tensor(name: str, shape: tuple[Ix, ...], dtype: str = "i32", written: bool = True) -> ir.TensorDecl:
    dims = tuple(ir.Dim(hash((name, k)) & 0xFFFF, f"{name}{k}") for k in range(len(shape)))
    return ir.TensorDecl(name, dtype, dims, tuple(ix(n) for n in shape), written)


def program(name: str, sizes: tuple[str, ...], tensors: list[ir.TensorDecl], *body: Any) -> ir.Program:
    return ir.Program(name, sizes, tuple(tensors), ir.Block((), tuple(body)))


def loop(var: int, name: str, extent: Ix, *body: Any, kind: str = "serial", binding: Optional[str] = None,
         start: Ix = 0) -> L.Loop:
    return L.Loop(var, name, ix(extent), kind, ir.Block((), tuple(body)), binding, ix(start))


def guard(cond: IExpr, *body: Any) -> L.If:
    return L.If(cond, ir.Block((), tuple(body)))


def ld(buf: str, *index: Ix, dtype: str = "i32") -> L.Ld:
    return L.Ld(buf, tuple(ix(i) for i in index), dtype)


def lit(value: int, dtype: str = "i32") -> L.Lit:
    return L.Lit(value, dtype)


def plus(a: L.SExpr, b: L.SExpr) -> L.Bin:
    return L.Bin("add", a, b, "i32")


def times(a: L.SExpr, b: L.SExpr) -> L.Bin:
    return L.Bin("mul", a, b, "i32")


def assign(buf: str, index: tuple[Ix, ...], value: L.SExpr) -> L.Assign:
    return L.Assign(buf, tuple(ix(i) for i in index), value)


def accum(buf: str, index: tuple[Ix, ...], value: L.SExpr, op: str = "add", policy: str = "unordered_tree") -> L.Accum:
    return L.Accum(buf, tuple(ix(i) for i in index), op, value, policy)


def decl(name: str, shape: tuple[Ix, ...], scope: str = "local", dtype: str = "i32") -> L.Decl:
    return L.Decl(L.Buffer(name, dtype, tuple(ix(n) for n in shape), scope))


def barrier(scope: str = "block") -> L.Barrier:
    return L.Barrier(scope)


def transform(p: ir.Program, op: str, *args: Any, sizes: Optional[dict[str, int]] = None, **kwargs: Any) -> Transformed:
    """Apply registered op ``op`` to ``p``, simplifying the result as ``Schedule.apply`` does."""
    decl = OPS[op]
    kwargs.update({q.name: dict(sizes or {}) for q in decl.supplied})  # what a Schedule supplies: its bound sizes
    t = decl(p, *args, **kwargs)
    return dataclasses.replace(t, program=simplify(t.program, sizes or {}))


def retyped(p: ir.Program, name: str, **changes: Any) -> ir.Program:
    """``p`` with loop ``name`` changed (kind, binding, extent, ...)."""
    def rec(block: ir.Block) -> ir.Block:
        ops = []
        for s in block.ops:
            if isinstance(s, (L.Loop, L.If)):
                s = dataclasses.replace(s, body=rec(s.body))
            if isinstance(s, L.Loop) and s.name == name:
                s = dataclasses.replace(s, **changes)
            ops.append(s)
        return ir.Block(block.args, tuple(ops), block.yields)
    return dataclasses.replace(p, body=rec(p.body))


def run(p: ir.Program, sizes: dict[str, int], seed: int = 0, order: str = "canonical") -> dict[str, np.ndarray]:
    """Interpret ``p`` on random integer inputs; the written tensors."""
    rng = np.random.default_rng(seed)
    arrays = {t.name: rng.integers(-4, 5, size=tuple(int(evaluate(n, sizes, {})) for n in t.shape)).astype(np.int32)
              for t in p.tensors}
    interpret_loops(p, sizes, arrays, order=order, seed=seed, checked=True)
    return {n: arrays[n] for n in p.outputs}


# ----------------------------------------------------------------------------- random programs and transforms
KINDS = ("serial", "parallel", "reduce")


@st.composite
def affine(draw: Any, vars_: list[int], lo: int, hi: int) -> IExpr:
    """A small affine index expression over ``vars_``: coefficients 0 or 1 (rarely -1), offset in [lo, hi]."""
    e: IExpr = IConst(draw(st.integers(lo, hi)))
    for var in vars_:
        c = draw(st.sampled_from([0, 1, 1, 0, -1]) if draw(st.integers(0, 9)) == 0 else st.sampled_from([0, 1]))
        if c:
            e = ibin("add", e, v(var) if c == 1 else ibin("mul", IConst(-1), v(var)))
    return e


@st.composite
def random_program(draw: Any) -> ir.Program:
    """One to three nested loops (some triangular, some guarded, of random kinds) around one or two
    statements on a 1-d or 2-d tensor ``A`` reading ``A`` and ``X``; sometimes the outer loop also
    owns a local buffer ``T`` that a statement fills and another reads."""
    depth = draw(st.integers(1, 3))
    vars_ = list(range(depth))
    rank = draw(st.integers(1, 2))
    body: list[Any] = []
    for _ in range(draw(st.integers(1, 2))):
        index = tuple(draw(affine(vars_, 0, 1)) for _ in range(rank))
        read = tuple(draw(affine(vars_, 0, 2)) for _ in range(rank))
        value = plus(ld("A", *read), ld("X", v(0)))
        if draw(st.booleans()):
            body.append(assign("A", index, value))
        else:
            body.append(accum("A", index, value, draw(st.sampled_from(["add", "max"])),
                              draw(st.sampled_from(["unordered_tree", "ordered_tree", "fold_left"]))))
    owned = depth > 1 and draw(st.integers(0, 2)) == 0
    if owned:  # T[l_last + 0/1] = X[l0]; later A[...] += T[...]
        inner = vars_[1:]
        body.insert(0, assign("T", (draw(affine(inner, 0, 1)),), ld("X", v(0))))
        body.append(accum("A", (v(0),) * rank, ld("T", draw(affine(inner, 0, 1)))))
    if draw(st.booleans()):
        body = [guard(lt(v(vars_[-1]), draw(st.integers(1, 3))), *body)]
    for k in reversed(vars_):
        extent: Ix = "N"
        if k > 0 and draw(st.integers(0, 3)) == 0:
            extent = add(v(k - 1), 1)  # triangular
        if k == 0 and owned:
            body = [decl("T", (mul(2, add("N", 1)),))] + body
        body = [loop(k, f"l{k}", extent, *body, kind=draw(st.sampled_from(KINDS)))]
    shape = tuple(add(mul(3, "N"), 3) for _ in range(rank))
    return program("rand", ("N",), [tensor("A", shape), tensor("X", (add("N", 1),), written=False)], *body)


@st.composite
def random_block_program(draw: Any) -> ir.Program:
    """A grid loop ``g`` over blocks, a shared buffer ``sh`` per block, a thread loop ``t`` (bound to
    block0 or lane, 2 to 4 threads), maybe a serial loop ``k`` inside it, and a few statements:
    stores to ``sh``, loads of ``sh`` into ``B``, barriers (some under guards that depend on the
    thread, on the block or on ``k``)."""
    threads = draw(st.integers(2, 4))
    binding = draw(st.sampled_from(["block0", "lane"]))
    serial = draw(st.booleans())
    vars_ = [1, 2] if serial else [1]
    body: list[Any] = []
    for _ in range(draw(st.integers(2, 5))):
        what = draw(st.sampled_from(["store", "load", "barrier", "guarded"]))
        if what == "store":
            body.append(assign("sh", (draw(affine(vars_, 0, 2)),), ld("A", v(0))))
        elif what == "load":
            body.append(assign("B", (v(0), v(1)), ld("sh", draw(affine(vars_, 0, 2)))))
        else:
            scope = draw(st.sampled_from(["block", "warp"]))
            on = draw(st.sampled_from(vars_ + [0]))
            stmt: Any = barrier(scope)
            body.append(guard(lt(v(on), draw(st.integers(1, 3))), stmt) if what == "guarded" else stmt)
    if serial:
        body = [loop(2, "k", 2, *body)]
    return program("blocks", ("N",), [tensor("A", ("N",), written=False), tensor("B", ("N", threads))],
                   loop(0, "g", "N", decl("sh", (threads + 4,), "shared"),
                        loop(1, "t", threads, *body, kind="parallel", binding=binding),
                        kind="parallel", binding="grid0"))


def _replace_stmt(block: ir.Block, old: Any, new: Any) -> ir.Block:
    ops = []
    for s in block.ops:
        if s is old:
            s = new
        elif isinstance(s, (L.Loop, L.If)):
            s = dataclasses.replace(s, body=_replace_stmt(s.body, old, new))
        ops.append(s)
    return ir.Block(block.args, tuple(ops), block.yields)


OP_CHOICES = ("split", "swap", "fuse", "bind", "partition", "pad", "unroll")
HAND_CHOICES = ("reverse", "kind", "shift", "rehome")


@st.composite
def random_transform(draw: Any, p: ir.Program) -> tuple[ir.Program, Tau, str, tuple]:
    """A transform of ``p``: a registry op (split, swap, fuse, bind, partition, pad, materializing
    unroll) where it applies, or a hand-made one that is often wrong (reverse a loop, change a
    loop's kind, shift one statement's index, move the local buffer's declaration one loop in).
    An op that refuses the program gives the identity. Returns the new program, tau, the choice and
    the op's declarations of the buffers it mints (``Transformed.datamaps``)."""
    loops = list(L.loops(p.body))
    choice = draw(st.sampled_from(OP_CHOICES + HAND_CHOICES))
    banded = [lp for lp in loops if len(lp.body.ops) == 1 and isinstance(lp.body.ops[0], L.Loop)]
    target = draw(st.sampled_from(banded if choice in ("swap", "fuse") and banded else loops))
    inner = target.body.ops[0] if target in banded else None
    decls = [s for s in ir.walk(p.body) if isinstance(s, L.Decl)]
    try:
        if choice == "split":
            tail = draw(st.sampled_from(["guard", "partition"]))
            t = transform(p, "split", target.name, draw(st.integers(1, 3)), tail)
        elif choice in ("swap", "fuse"):
            if inner is None:
                return p, Tau(), "identity", ()
            t = transform(p, choice, target.name, inner.name)
        elif choice == "bind":
            t = transform(p, "bind", target.name, draw(st.sampled_from(["core", "vector", "unrolled"])))
        elif choice == "partition":
            t = transform(p, "partition", target.name, [1], sizes={"N": 3})
        elif choice == "pad":
            t = transform(p, "pad", target.name, draw(st.integers(2, 3)))
        elif choice == "unroll":
            t = transform(p, "unroll", target.name, True, sizes={"N": 3})
        elif choice == "reverse":
            rev = ibin("sub", ibin("sub", target.extent, IConst(1)), v(target.var))
            new = retyped(p, target.name, body=subst_node(target.body, target.var, rev))
            t = Transformed(new, Tau((Piece(((target.var, rev),)),)), ())
        elif choice == "rehome":  # the declaration of T moves into the loop after it (one allocation per iteration)
            if not decls:
                return p, Tau(), "identity", ()
            outer = next(lp for lp in loops if decls[0] in lp.body.ops)
            nxt = next(s for s in outer.body.ops if isinstance(s, L.Loop))
            body = tuple(s for s in outer.body.ops if s is not decls[0])
            moved = dataclasses.replace(nxt, body=ir.Block((), (decls[0],) + nxt.body.ops))
            body = tuple(moved if s is nxt else s for s in body)
            t = Transformed(retyped(p, outer.name, body=ir.Block((), body)), Tau(), ())
        elif choice == "kind":
            t = Transformed(retyped(p, target.name, kind=draw(st.sampled_from(KINDS))), Tau(), ())
        else:
            old = next(s for s in ir.walk(target.body) if isinstance(s, (L.Assign, L.Accum)))
            shift = draw(st.sampled_from([-1, 1]))
            new_stmt = dataclasses.replace(old, index=tuple(ibin("add", e, IConst(shift)) for e in old.index))
            t = Transformed(dataclasses.replace(p, body=_replace_stmt(p.body, old, new_stmt)), Tau(), ())
    except TilecertError:
        return p, Tau(), "identity", ()
    return t.program, t.tau, choice, t.datamaps


# ----------------------------------------------------------------------------- the builders themselves
def test_builders_make_interpretable_programs():
    p = program("copy", ("N",), [tensor("A", ("N",)), tensor("X", ("N",), written=False)],
                loop(0, "i", "N", assign("A", (v(0),), plus(ld("X", v(0)), lit(1))), kind="parallel"))
    out = run(p, {"N": 5}, seed=3)
    rng = np.random.default_rng(3)
    rng.integers(-4, 5, size=5)
    x = rng.integers(-4, 5, size=5)
    assert (out["A"] == x + 1).all()


def test_transform_applies_and_simplifies():
    p = program("t", ("N",), [tensor("A", ("N",))], loop(0, "i", "N", assign("A", (v(0),), lit(1))))
    t = transform(p, "split", "i", 4, sizes={"N": 8})
    assert [lp.name for lp in L.loops(t.program.body)] == ["i.o", "i.i"]
    assert not any(isinstance(s, L.If) for s in ir.walk(t.program.body))  # the guard 4*o + ii < 8 folds
