"""A lowered program read back as a loop-form program, so that the checker's model describes it.

The rendering is one node for one node, and means what the backends emit:

- ``For(var, lo, hi)`` is ``Loop(var, start=lo, extent=max(0, hi - lo))`` with the scheduled
  loop's kind and binding (so ``lo <= var < hi``, empty when ``hi <= lo``, as in C);
- ``Guard(cond)`` is ``If(cond)``; ``Seq`` (a braced block) is ``If(1)``, whose body is a
  scope of its own for the buffers it allocates;
- ``Alloc`` is ``Decl`` (zero-initialised, as the backends allocate it), ``Sync`` is ``Barrier``;
- ``Store`` is ``Assign``, or ``Accum`` with its reducer and the scheduled statement's policy.

``LoopForm.source`` maps each rendered leaf (by identity) back to the lowered node it renders,
which carries the scheduled statement it implements (``sid``) and its tau (``origin``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.index import IConst, ibin

from .program import Alloc, For, Guard, Lowered, Node, Seq, Store, Sync


@dataclass(frozen=True)
class LoopForm:
    program: ir.Program
    source: dict[int, Node]  # id(loop-form leaf) -> the lowered Alloc / Store / Sync

    def lowered(self, node: Any) -> Node:
        """The lowered node a leaf of ``program`` renders."""
        return self.source[id(node)]


def loop_form(lp: Lowered) -> LoopForm:
    """``lp`` as a loop-form program over the same tensors and sizes."""
    source: dict[int, Node] = {}
    body = _block(lp.body, source)
    return LoopForm(ir.Program(lp.name, lp.sizes, lp.tensors, body), source)


def _block(body: tuple[Node, ...], source: dict[int, Node]) -> ir.Block:
    return ir.Block((), tuple(_node(n, source) for n in body))


def _node(n: Node, source: dict[int, Node]) -> Any:
    if isinstance(n, For):
        extent = ibin("max", IConst(0), ibin("sub", n.hi, n.lo))
        return L.Loop(n.var, n.name, extent, n.kind, _block(n.body, source), n.binding, n.lo)
    if isinstance(n, Guard):
        return L.If(n.cond, _block(n.body, source))
    if isinstance(n, Seq):
        return L.If(IConst(1), _block(n.body, source))
    if isinstance(n, Alloc):
        leaf: Any = L.Decl(L.Buffer(n.buf, n.dtype, n.shape, n.scope))
    elif isinstance(n, Store):
        leaf = L.Assign(n.buf, n.index, n.value, n.loc) if n.accum is None else \
            L.Accum(n.buf, n.index, n.accum, n.value, n.policy, n.loc)
    else:
        assert isinstance(n, Sync), type(n).__name__
        leaf = L.Barrier(n.scope)
    source[id(leaf)] = n
    return leaf
