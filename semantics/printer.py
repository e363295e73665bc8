"""Render a program as an indented region tree (kind, domain and policy of each region)."""
from __future__ import annotations

from . import loopir as L
from .ir import (Alloc, expect_program, Binary, Block, Cast, Full, IndexValue, Iota, MemLoad, MemStore, Mma, Op, Parallel,
                 Pipeline, Program, Reduce, ReduceExpr, Reshape, Select, Serial, Stage, Unary, ViewLoad,
                 ViewStore, results_of)


def _vals(ids) -> str:
    return ", ".join(f"%{i}" for i in ids)


def _box(exprs) -> str:
    return "[" + ", ".join(str(e) for e in exprs) + "]"


def _op_text(op: Op) -> str:
    if isinstance(op, Full):
        return f"full {op.value!r}"
    if isinstance(op, Iota):
        return f"iota axis={op.axis}"
    if isinstance(op, IndexValue):
        return f"index {op.expr}"
    if isinstance(op, Cast):
        return f"cast %{op.x}"
    if isinstance(op, Unary):
        return f"{op.fn} %{op.x}"
    if isinstance(op, Binary):
        return f"{op.fn} %{op.a}, %{op.b}"
    if isinstance(op, Select):
        return f"select %{op.cond}, %{op.a}, %{op.b}"
    if isinstance(op, ReduceExpr):
        init = f" init=%{op.init}" if op.init is not None else ""
        return f"reduce.{op.combiner} %{op.x} axes={list(op.axes)} policy={op.policy}{init}"
    if isinstance(op, Mma):
        return f"mma %{op.a}, %{op.b}, %{op.c} [{op.spec}]"
    if isinstance(op, Reshape):
        return f"reshape %{op.x}"
    if isinstance(op, ViewLoad):
        fb = f" fallback=%{op.fallback}" if op.fallback is not None else ""
        return f"load {op.tensor}{_box(op.origin)} box {_box(op.extents)} bounds={op.bounds}{fb}"
    if isinstance(op, ViewStore):
        return f"store {op.tensor}{_box(op.origin)} box {_box(op.extents)} <- %{op.value} bounds={op.bounds}"
    if isinstance(op, Alloc):
        return f"alloc m{op.mem} : {op.type} scope={op.scope}"
    if isinstance(op, MemStore):
        return f"mstore m{op.mem} <- %{op.value}"
    if isinstance(op, MemLoad):
        return f"mload m{op.mem}"
    if isinstance(op, Stage):
        return f"stage {op.ordinal} {op.name!r}"
    raise TypeError(type(op).__name__)


def _region_head(op: Op) -> str:
    dom = _box(op.extents)
    if isinstance(op, Parallel):
        bind = f" bind={op.binding}" if op.binding else ""
        return f"parallel r{op.region} {dom}{bind}"
    kind = {Serial: "serial", Pipeline: "pipeline", Reduce: "reduce"}[type(op)]
    extra = ""
    if isinstance(op, Pipeline):
        extra = f" window={op.window} interval={op.interval}"
    if isinstance(op, Reduce):
        extra = f" policy={op.policy}"
    carry = ""
    if op.inits:
        pairs = ", ".join(f"{a} <- %{i}" for a, i in zip(op.body.args, op.inits))
        carry = f" carry({pairs}) -> ({_vals(v.id for v in op.outs)})"
    return f"{kind} r{op.region} {dom}{extra}{carry}"


def sexpr(e: L.SExpr) -> str:
    """A scalar expression of loop form as text."""
    if isinstance(e, L.Ld):
        return f"{e.buf}[{', '.join(str(i) for i in e.index)}]"
    if isinstance(e, L.Lit):
        return repr(e.value)
    if isinstance(e, L.Ix):
        return f"{e.expr}"
    if isinstance(e, L.Un):
        return f"{e.fn}({sexpr(e.x)})"
    if isinstance(e, L.Bin):
        return f"{e.fn}({sexpr(e.a)}, {sexpr(e.b)})"
    if isinstance(e, L.Sel):
        return f"({sexpr(e.cond)} ? {sexpr(e.a)} : {sexpr(e.b)})"
    if isinstance(e, L.Cvt):
        return f"{e.dtype}({sexpr(e.x)})"
    raise TypeError(type(e).__name__)


def _stmt_lines(st, pad: str, depth: int) -> list[str]:
    if isinstance(st, L.Loop):
        bind = f" bind={st.binding}" if st.binding else ""
        dom = f"[{st.extent})" if st.start == L.IConst(0) else f"{st.start} + [{st.extent})"
        head = f"{pad}{st.kind} {st.name} (i{st.var}) in {dom}{bind}:"
        return [head] + _block_lines(st.body, depth + 1)
    if isinstance(st, L.If):
        return [f"{pad}if {st.cond}:"] + _block_lines(st.body, depth + 1)
    if isinstance(st, L.Decl):
        b = st.buf
        return [f"{pad}{b.scope} {b.name}: {b.dtype}[{', '.join(str(x) for x in b.shape)}]"]
    if isinstance(st, L.Assign):
        return [f"{pad}{st.buf}[{', '.join(str(i) for i in st.index)}] = {sexpr(st.value)}"]
    if isinstance(st, L.Accum):
        return [f"{pad}{st.buf}[{', '.join(str(i) for i in st.index)}] {st.op}= {sexpr(st.value)}  ({st.policy})"]
    if isinstance(st, L.Barrier):
        return [f"{pad}barrier {st.scope}"]
    raise TypeError(type(st).__name__)


def _block_lines(block: Block, depth: int) -> list[str]:
    pad = "  " * depth
    lines: list[str] = []
    for op in block.ops:
        if isinstance(op, L.STMT_TYPES):
            lines.extend(_stmt_lines(op, pad, depth))
            continue
        body = getattr(op, "body", None)
        if body is not None:
            lines.append(f"{pad}{_region_head(op)}:")
            lines.extend(_block_lines(body, depth + 1))
            continue
        outs = results_of(op)
        if outs:
            lines.append(f"{pad}{_vals(v.id for v in outs)} = {_op_text(op)} : {outs[0].type}")
        else:
            lines.append(f"{pad}{_op_text(op)}")
    if block.yields:
        lines.append(f"{pad}yield {_vals(block.yields)}")
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
    return "\n".join([head] + _block_lines(p.body, 1))
