"""A pipeline's stages: the explicit cuts, or the rule that infers them, and the stage blocks in loop form.

Explicit cuts (``k.stage(name)``): stage ``k`` is the ops between cut ``k`` and the next; ops before the first
cut must be pure (the builder refuses others).

Inferred (no cut in the body), by dependence depth from loads:

- stage 0, ``load``: every ``ViewLoad`` whose tensor nothing in the pipeline body stores to and whose fallback
  is not a value of the body (its origin is index arithmetic over the loop variables, so it depends on nothing
  the iteration computes);
- stage 1, ``compute``: every other op, in source order.

When either part is empty the body is one inferred stage, ``body``. Moving the loads first preserves the
sequential meaning: they read no value of the iteration and no tensor the iteration writes.
"""
from __future__ import annotations

from typing import Iterator

from .. import ir
from .. import loopir as L


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


def stage_groups(op: ir.Pipeline) -> list[tuple[str, tuple[int, ...], bool]]:
    """``(name, op positions, inferred)`` per stage of the pipeline region ``op``, in ordinal order."""
    ops = op.body.ops
    cuts = [k for k, o in enumerate(ops) if isinstance(o, ir.Stage)]
    if cuts:
        bounds = cuts + [len(ops)]
        return [(ops[c].name, tuple(range(c + 1, bounds[n + 1])), False) for n, c in enumerate(cuts)]
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
