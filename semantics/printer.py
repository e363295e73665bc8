"""Render a program as an indented region tree (kind, domain and policy of each region)."""
from __future__ import annotations

import os
from typing import Callable, Mapping

from . import loopir as L
from .errors import NOWHERE, Loc
from .index import IConst, IExpr, ISize, IVar, map_leaves
from .ir import (Alloc, expect_program, Binary, Block, Cast, Full, IndexValue, Iota, MemLoad, MemStore, Mma, Op, Parallel,
                 Pipeline, Program, Reduce, ReduceExpr, Reshape, Select, Serial, Stage, Unary, ViewLoad,
                 ViewStore, results_of, value_name)
from .names import numbered


class _Names:
    """The printed names of a tile program: values ``%<DSL name>`` and region coordinates as the loops
    expansion makes of them (``nest.0``, ``k``), each made unique by ``names.numbered`` in program order."""

    def __init__(self, body: Block) -> None:
        self.values: dict[int, str] = {}
        self.regions: dict[int, str] = {}
        self.coords: dict[tuple[int, int], str] = {}
        self._visit(body)

    def _fresh(self, table: dict, key: object, base: str) -> None:
        used = set(table.values())
        table[key] = numbered(base, used.__contains__)

    def _visit(self, block: Block) -> None:
        for v in block.args:
            self._fresh(self.values, v.id, v.label or "carry")
        for op in block.ops:
            body = getattr(op, "body", None)
            if isinstance(op, (Parallel, Serial, Pipeline, Reduce)):
                self._fresh(self.regions, op.region, op.name or type(op).__name__.lower())
                label = self.regions[op.region]
                for a in range(len(op.extents)):
                    self.coords[(op.region, a)] = f"{label}.{a}" if len(op.extents) > 1 else label
            if isinstance(body, Block):
                self._visit(body)
            for v in results_of(op):
                self._fresh(self.values, v.id, value_name(op, v))

    def val(self, vid: int) -> str:
        return f"%{self.values.get(vid, vid)}"

    def vals(self, ids) -> str:
        return ", ".join(self.val(i) for i in ids)

    def ix(self, e: IExpr) -> str:
        return str(map_leaves(e, lambda x: ISize(self.coords[(x.region, x.axis)])  # a coordinate's name, as text
                              if isinstance(x, IVar) and (x.region, x.axis) in self.coords else x))

    def box(self, exprs) -> str:
        return "[" + ", ".join(self.ix(e) for e in exprs) + "]"


def _op_text(op: Op, n: _Names) -> str:
    v = n.val
    if isinstance(op, Full):
        return f"full {op.value!r}"
    if isinstance(op, Iota):
        return f"iota axis={op.axis}"
    if isinstance(op, IndexValue):
        return f"index {n.ix(op.expr)}"
    if isinstance(op, Cast):
        return f"cast {v(op.x)}"
    if isinstance(op, Unary):
        return f"{op.fn} {v(op.x)}"
    if isinstance(op, Binary):
        return f"{op.fn} {v(op.a)}, {v(op.b)}"
    if isinstance(op, Select):
        return f"select {v(op.cond)}, {v(op.a)}, {v(op.b)}"
    if isinstance(op, ReduceExpr):
        init = f" init={v(op.init)}" if op.init is not None else ""
        return f"reduce.{op.combiner} {v(op.x)} axes={list(op.axes)} policy={op.policy}{init}"
    if isinstance(op, Mma):
        return f"mma {v(op.a)}, {v(op.b)}, {v(op.c)} [{op.spec}]"
    if isinstance(op, Reshape):
        return f"reshape {v(op.x)}"
    if isinstance(op, ViewLoad):
        fb = f" fallback={v(op.fallback)}" if op.fallback is not None else ""
        return f"load {op.tensor}{n.box(op.origin)} box {n.box(op.extents)} bounds={op.bounds}{fb}"
    if isinstance(op, ViewStore):
        return f"store {op.tensor}{n.box(op.origin)} box {n.box(op.extents)} <- {v(op.value)} bounds={op.bounds}"
    if isinstance(op, Alloc):
        return f"alloc {op.label or 'mem'}(m{op.mem}) : {op.type} scope={op.scope}"
    if isinstance(op, MemStore):
        return f"mstore m{op.mem} <- {v(op.value)}"
    if isinstance(op, MemLoad):
        return f"mload m{op.mem}"
    if isinstance(op, Stage):
        return f"stage {op.ordinal} {op.name!r}"
    raise TypeError(type(op).__name__)


def _region_head(op: Op, n: _Names) -> str:
    dom = n.box(op.extents)
    name = n.regions[op.region]
    if isinstance(op, Parallel):
        bind = f" bind={op.binding}" if op.binding else ""
        return f"parallel {name} {dom}{bind}"
    kind = {Serial: "serial", Pipeline: "pipeline", Reduce: "reduce"}[type(op)]
    extra = ""
    if isinstance(op, Pipeline):
        extra = f" window={op.window} interval={op.interval}"
    if isinstance(op, Reduce):
        extra = f" policy={op.policy}"
    carry = ""
    if op.inits:
        pairs = ", ".join(f"{n.val(a.id)} <- {n.val(i)}" for a, i in zip(op.body.args, op.inits))
        carry = f" carry({pairs}) -> ({n.vals(v.id for v in op.outs)})"
    return f"{kind} {name} {dom}{extra}{carry}"


IndexText = Callable[[IExpr], str]


def sexpr(e: L.SExpr, ix: IndexText = str) -> str:
    """A scalar expression of loop form as text (``ix`` renders its index expressions)."""
    if isinstance(e, L.Ld):
        return f"{e.buf}[{', '.join(ix(i) for i in e.index)}]"
    if isinstance(e, L.Lit):
        return repr(e.value)
    if isinstance(e, L.Ix):
        return ix(e.expr)
    if isinstance(e, L.Un):
        return f"{e.fn}({sexpr(e.x, ix)})"
    if isinstance(e, L.Bin):
        return f"{e.fn}({sexpr(e.a, ix)}, {sexpr(e.b, ix)})"
    if isinstance(e, L.Sel):
        return f"({sexpr(e.cond, ix)} ? {sexpr(e.a, ix)} : {sexpr(e.b, ix)})"
    if isinstance(e, L.Cvt):
        return f"{e.dtype}({sexpr(e.x, ix)})"
    raise TypeError(type(e).__name__)


def _leaf_text(st, pad: str, ix: IndexText) -> str:
    """A statement that is no loop or ``if`` as one line (without its indentation's children)."""
    if isinstance(st, L.Decl):
        b = st.buf
        layout = "" if b.layout is None else f" {b.layout}"
        return f"{pad}{b.scope} {b.name}: {b.dtype}[{', '.join(ix(x) for x in b.shape)}]{layout}"
    if isinstance(st, L.AsyncCopy):
        return f"{pad}{st.buf}[{', '.join(ix(i) for i in st.index)}] = async {sexpr(st.value, ix)}"
    if isinstance(st, L.AsyncWait):
        return f"{pad}async wait (at most {st.pending} pending), barrier {st.scope}"
    if isinstance(st, L.Assign):
        return f"{pad}{st.buf}[{', '.join(ix(i) for i in st.index)}] = {sexpr(st.value, ix)}"
    if isinstance(st, L.Accum):
        return f"{pad}{st.buf}[{', '.join(ix(i) for i in st.index)}] {st.op}= {sexpr(st.value, ix)}  ({st.policy})"
    if isinstance(st, L.Barrier):
        return f"{pad}barrier {st.scope}"
    raise TypeError(type(st).__name__)


def policy_text(lp: L.Loop) -> str:
    """`` window=W interval=I`` for a pipeline loop, with `` plan II=.. theta=(..)`` once a plan is set."""
    if lp.pipeline is None:
        return ""
    q = lp.pipeline
    plan = "" if q.plan is None else f" plan II={q.plan.interval} theta={q.plan.offsets}" + \
        (" (planned)" if q.plan.planned else "")
    return f" window={q.window} interval={q.interval}{plan}"


def stage_text(st: L.StageBlock) -> str:
    """``stage 0 load`` (with `` (inferred)`` when the membership rule chose it)."""
    return f"stage {st.ordinal} {st.name}" + (" (inferred)" if st.inferred else "")


def _stmt_lines(st, pad: str, depth: int, n: _Names) -> list[str]:
    if isinstance(st, L.Loop):
        bind = f" bind={st.binding}" if st.binding else ""
        dom = f"[{st.extent})" if st.start == L.IConst(0) else f"{st.start} + [{st.extent})"
        head = f"{pad}{st.kind} {st.name} (i{st.var}) in {dom}{bind}{policy_text(st)}:"
        return [head] + _block_lines(st.body, depth + 1, n)
    if isinstance(st, L.StageBlock):
        return [f"{pad}{stage_text(st)}:"] + _block_lines(st.body, depth + 1, n)
    if isinstance(st, L.If):
        return [f"{pad}if {st.cond}:"] + _block_lines(st.body, depth + 1, n)
    return [_leaf_text(st, pad, str)]


def _where(loc: Loc) -> str:
    """``file:line`` with the file relative to the working directory when it lies below it."""
    rel = os.path.relpath(loc.file) if os.path.isabs(loc.file) else loc.file
    return f"{loc.file if rel.startswith('..') else rel}:{loc.line}"


def format_nest(p: Program, sizes: Mapping[str, int]) -> str:
    """A loop-form program as its loop nest: each loop as ``kind name [extent]`` with its binding, each
    statement with its loop variables written as their loops' names, ``sizes`` evaluated, and the
    DSL source line (``file:line``) it comes from."""
    names = {lp.var: lp.name for lp in L.loops(p.body)}

    def leaf(e: IExpr) -> IExpr:
        if isinstance(e, IVar) and e.region in names:
            return ISize(names[e.region])  # a loop's name, rendered as text
        if isinstance(e, ISize) and e.name in sizes:
            return IConst(sizes[e.name])
        return e

    def ix(e: IExpr) -> str:
        return str(map_leaves(e, leaf))

    def lines(block: Block, depth: int) -> list[str]:
        pad = "  " * depth
        out: list[str] = []
        for st in block.ops:
            if isinstance(st, L.Loop):
                start = "" if st.start == IConst(0) else f"{ix(st.start)} + "
                bind = f" bind={st.binding}" if st.binding else ""
                out.append(f"{pad}{st.kind} {st.name} [{start}{ix(st.extent)}]{bind}{policy_text(st)}")
                out += lines(st.body, depth + 1)
            elif isinstance(st, L.StageBlock):
                out.append(f"{pad}{stage_text(st)}")
                out += lines(st.body, depth + 1)
            elif isinstance(st, L.If):
                out.append(f"{pad}if {ix(st.cond)}:")
                out += lines(st.body, depth + 1)
            else:
                text = _leaf_text(st, pad, ix)
                loc = getattr(st, "loc", NOWHERE)
                out.append(f"{text}  # {_where(loc)}" if loc.line else text)
        return out

    return "\n".join(lines(p.body, 0))


def _block_lines(block: Block, depth: int, n: _Names) -> list[str]:
    pad = "  " * depth
    lines: list[str] = []
    for op in block.ops:
        if isinstance(op, L.STMT_TYPES):
            lines.extend(_stmt_lines(op, pad, depth, n))
            continue
        body = getattr(op, "body", None)
        if body is not None:
            lines.append(f"{pad}{_region_head(op, n)}:")
            lines.extend(_block_lines(body, depth + 1, n))
            continue
        outs = results_of(op)
        if outs:
            lines.append(f"{pad}{n.vals(v.id for v in outs)} = {_op_text(op, n)} : {outs[0].type}")
        else:
            lines.append(f"{pad}{_op_text(op, n)}")
    if block.yields:
        lines.append(f"{pad}yield {n.vals(block.yields)}")
    return lines


def format_program(p: Program) -> str:
    """The program as text: a signature line, then the indented region tree."""
    expect_program(p, "format_program")
    params = ", ".join(
        f"{t.name}: {t.dtype}[{', '.join(str(s) for s in t.shape)}]{' out' if t.written else ''}" for t in p.tensors
    )
    head = f"kernel {p.name}({params})"
    if p.config:
        head += "  config " + " ".join(f"{k}={v}" for k, v in p.config)
    return "\n".join([head] + _block_lines(p.body, 1, _Names(p.body)))
