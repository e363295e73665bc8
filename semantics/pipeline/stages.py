"""A pipeline's stages: the explicit cuts, or the rule that infers them, and the stage blocks in loop form.

Explicit cuts (``k.stage(name)``): stage ``k`` is the ops between cut ``k`` and the next. The ops before the
first cut, the *prelude*, must be pure index math (``impure_prelude``; capture refuses others): index values
(``k.index()`` as a tile) and elementwise arithmetic, casts, selects and reshapes of them, with numbers mixed
in (no load, no store, no tile constant, no carried value). The prelude belongs to no stage: each stage
recomputes, in front of its own ops and in source order, the prelude ops it uses (directly or through another
prelude op; the last stage also counts the carries' yields), into buffers of its own. A pure op gives the same value wherever it runs
in the iteration, so this keeps the meaning, and no stage reads a buffer another stage wrote for the prelude (no
edge between stages comes from index math).

Inferred (no cut in the body), by dependence depth from loads:

- stage 0, ``load``: every ``ViewLoad`` whose tensor nothing in the pipeline body stores to and whose fallback
  is not a value of the body (its origin is index arithmetic over the loop variables, so it depends on nothing
  the iteration computes);
- stage 1, ``compute``: every other op, in source order.

When either part is empty the body is one inferred stage, ``body``. Moving the loads first preserves the
sequential meaning: they read no value of the iteration and no tensor the iteration writes.
"""
from __future__ import annotations

import dataclasses
from typing import Iterator, Optional, Sequence

from .. import ir
from .. import loopir as L
from ..errors import Loc
from ..index import IExpr


def _stored_tensors(block: ir.Block) -> set[str]:
    out: set[str] = set()
    for op in block.ops:
        if isinstance(op, ir.ViewStore):
            out.add(op.tensor)
        body = getattr(op, "body", None)
        if isinstance(body, ir.Block):
            out |= _stored_tensors(body)
    return out


def _defined(block: ir.Block) -> set[int]:
    out = {v.id for v in block.args}
    for op in block.ops:
        for f in ("out", "outs"):
            got = getattr(op, f, None)
            for v in (got if isinstance(got, tuple) else (got,) if got is not None else ()):
                out.add(v.id)
        body = getattr(op, "body", None)
        if isinstance(body, ir.Block):
            out |= _defined(body)
    return out


PRELUDE_ARITH = (ir.Cast, ir.Unary, ir.Binary, ir.Select, ir.Reshape)
"""Elementwise ops that may stand in a prelude (on index values)."""


def impure_prelude(ops: Sequence[ir.Op]) -> Optional[ir.Op]:
    """The first op of ``ops`` (a pipeline body before its first cut) that is not pure index math (None when all
    are). Pure index math: an ``IndexValue`` (``k.index()`` as a tile); a ``PRELUDE_ARITH`` op whose operands are
    index values or rank-0 constants, at least one an index value (its result is an index value); a rank-0
    ``Full`` (a number mixed into that arithmetic) that such an op reads."""
    index: set[int] = set()
    numbers: dict[int, ir.Op] = {}
    read: set[int] = set()
    for o in ops:
        if isinstance(o, ir.Full) and o.out.type.rank == 0:
            numbers[o.out.id] = o
            continue
        operands = ir.operands_of(o)
        if not (isinstance(o, ir.IndexValue) or isinstance(o, PRELUDE_ARITH) and any(v in index for v in operands)
                and all(v in index or v in numbers for v in operands)):
            return o
        index.add(o.out.id)
        read.update(operands)
    return next((o for v, o in numbers.items() if v not in read), None)


def _with_prelude(ops: tuple, prelude: range, own: range, extra: set[int]) -> tuple[int, ...]:
    """``own`` preceded by the prelude positions whose values ``own``'s ops (or ``extra``) use, directly or through
    another prelude op, in source order."""
    needed = set(extra).union(*(ir.uses(ops[k]) for k in own))
    used: list[int] = []
    for k in reversed(prelude):
        if any(v.id in needed for v in ir.results_of(ops[k])):
            used.append(k)
            needed |= ir.uses(ops[k])
    return tuple(reversed(used)) + tuple(own)


def stage_groups(op: ir.Pipeline) -> list[tuple[str, tuple[int, ...], bool]]:
    """``(name, op positions, inferred)`` per stage of the pipeline region ``op``, in ordinal order; with explicit
    cuts, a stage's positions start with the prelude positions it recomputes (see the module doc)."""
    ops = op.body.ops
    cuts = [k for k, o in enumerate(ops) if isinstance(o, ir.Stage)]
    if cuts:
        bounds = cuts + [len(ops)]
        return [(ops[c].name, _with_prelude(ops, range(cuts[0]), range(c + 1, bounds[n + 1]),
                                            set(op.body.yields) if n == len(cuts) - 1 else set()), False)
                for n, c in enumerate(cuts)]
    stored, defined = _stored_tensors(op.body), _defined(op.body)
    loads = tuple(k for k, o in enumerate(ops) if isinstance(o, ir.ViewLoad) and o.tensor not in stored
                  and (o.fallback is None or o.fallback not in defined))
    rest = tuple(k for k in range(len(ops)) if k not in loads)
    if loads and rest:
        return [("load", loads, True), ("compute", rest, True)]
    return [("body", tuple(range(len(ops))), True)]


def stage_blocks(lp: L.Loop) -> list[L.StageBlock]:
    """The stage blocks directly in the body of pipeline loop ``lp``, in ordinal order (the body is the stages'
    declarations, then these)."""
    return [st for st in lp.body.ops if isinstance(st, L.StageBlock)]


def pipeline_loops(block: ir.Block) -> Iterator[L.Loop]:
    """Every loop with a pipeline policy in ``block``, outermost first."""
    for lp in L.loops(block):
        if lp.pipeline is not None:
            yield lp


def check_stage_structure(program: ir.Program) -> list[str]:
    """The problems of ``program``'s stage structure (empty when well formed).

    Well formed: every loop with a pipeline policy has the body ``[Decl..., StageBlock 0, ..., StageBlock S-1]``
    (S >= 1, ordinals ``0 .. S-1`` in order, each block's ``pipeline`` the loop's), and no ``StageBlock`` stands
    anywhere else. A schedule op that cannot keep this form refuses (``ScheduleError``)."""
    problems: list[str] = []

    def visit(block: ir.Block) -> None:
        for st in block.ops:
            if isinstance(st, L.StageBlock):
                problems.append(f"stage {st.ordinal} ({st.name}) of pipeline {st.pipeline} stands outside the body "
                                "of its pipeline loop")
            if isinstance(st, L.Loop) and st.pipeline is not None:
                problems.extend(_loop_problems(st))
                for inner in st.body.ops:
                    if isinstance(inner, (L.If, L.Loop)):
                        visit(inner.body)
            elif isinstance(st, (L.If, L.Loop)):
                visit(st.body)

    visit(program.body)
    return problems


def _loop_problems(lp: L.Loop) -> list[str]:
    """What breaks ``[Decl..., StageBlock 0 .. S-1]`` in the body of pipeline loop ``lp``."""
    ops = lp.body.ops
    head = 0
    while head < len(ops) and isinstance(ops[head], L.Decl):
        head += 1
    out = [f"pipeline loop {lp.name!r} holds {_what(st)} among its stage blocks" for st in ops[head:]
           if not isinstance(st, L.StageBlock)]
    blocks = stage_blocks(lp)
    if not blocks:
        out.append(f"pipeline loop {lp.name!r} has no stage blocks")
    ordinals = [st.ordinal for st in blocks]
    if ordinals != list(range(len(blocks))):
        out.append(f"the stage blocks of pipeline loop {lp.name!r} have ordinals {ordinals}, not "
                   f"{list(range(len(blocks)))} in order")
    out += [f"stage {st.ordinal} ({st.name}) in pipeline loop {lp.name!r} belongs to pipeline {st.pipeline}, not "
            f"{lp.pipeline.pipeline}" for st in blocks if st.pipeline != lp.pipeline.pipeline]
    return out


def _what(st: object) -> str:
    if isinstance(st, L.Loop):
        return f"loop {st.name!r}"
    if isinstance(st, L.Decl):
        return f"the declaration of {st.buf.name}"
    return f"a {type(st).__name__} statement"


def dissolved(block: ir.Block) -> ir.Block:
    """``block`` with every stage block directly in it replaced by its statements: what stays of a pipeline when an
    op removes its loop (``remove_unit`` of a one-trip pipeline loop, a materializing ``unroll``): without a loop
    there is nothing to overlap, and a stage block runs as the statements it holds."""
    ops = tuple(inner for st in block.ops for inner in (st.body.ops if isinstance(st, L.StageBlock) else (st,)))
    return ir.Block(block.args, ops, block.yields)


def reads(block: ir.Block, buffer: str) -> bool:
    """Whether a statement in ``block`` (at any depth) loads ``buffer``."""
    return any(ld.buf == buffer for st in ir.walk(block) if isinstance(st, (L.Assign, L.Accum))
               for ld in L.loads(st.value))


def around_stages(ops: tuple, front: list, back: list, buffer: str) -> list:
    """The pipeline loop body ``ops`` (``[Decl..., StageBlock...]``) with ``front`` added as if at the start of an
    iteration and ``back`` as if at its end, where ``front`` writes ``buffer`` (a fresh one: nothing else writes
    it) and ``back`` orders what read it (a barrier): the declarations of ``front`` join the body's, the rest of
    ``front`` goes in front of the first stage block that reads ``buffer``, ``back`` at the end of the last stage
    block. Stage blocks run in ordinal order within an iteration, so ``front`` still runs before every read of
    ``buffer`` in it and ``back`` after every one; what runs between the iteration's start and ``front``, or
    between ``back`` and its end, neither reads nor writes ``buffer``."""
    decls = [st for st in front if isinstance(st, L.Decl)]
    head = [st for st in front if not isinstance(st, L.Decl)]
    first = next(k for k, st in enumerate(ops) if isinstance(st, L.StageBlock) and reads(st.body, buffer))
    out = list(ops)
    out[first] = dataclasses.replace(out[first], body=ir.Block((), (*head, *out[first].body.ops)))
    out[-1] = dataclasses.replace(out[-1], body=ir.Block((), (*out[-1].body.ops, *back)))
    return decls + out


def guarded(block: ir.Block, cond: IExpr, loc: Loc) -> ir.Block:
    """``block`` run only where ``cond`` holds: ``if cond { block }``, except that a pipeline loop body
    (``[Decl..., StageBlock...]``) keeps its form, the guard going inside each stage block (a declaration has no
    effect, and every stage block of an iteration sees the same ``cond``)."""
    if not any(isinstance(st, L.StageBlock) for st in block.ops):
        return ir.Block((), (L.If(cond, block, loc),))
    return ir.Block(block.args, tuple(dataclasses.replace(st, body=ir.Block((), (L.If(cond, st.body, loc),)))
                                      if isinstance(st, L.StageBlock) else st for st in block.ops), block.yields)
