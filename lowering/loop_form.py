"""A lowered program read back as a loop-form program, so that the checker's model describes it.

The rendering is one node for one node, and means what the backends emit:

- ``For(var, lo, hi)`` is ``Loop(var, start=lo, extent=hi - lo)`` (clamped at 0 unless evidently
  ``>= 0``) with the scheduled loop's kind and binding: ``lo <= var < hi``, empty when ``hi <= lo``,
  as in C; a loop the lowering kept as it was reads back as the scheduled loop itself;
- ``Guard(cond)`` is ``If(cond)``; ``Seq`` (a braced block) is ``If(1)``, whose body is a
  scope of its own for the buffers it allocates;
- ``Alloc`` is ``Decl`` (zero-initialised, as the backends allocate it; with its layout), ``Sync`` is
  ``Barrier`` (``AsyncWait`` with its ``pending``);
- ``Store`` is ``Assign`` (``AsyncCopy`` for an asynchronous copy), or ``Accum`` with its reducer and the
  scheduled statement's policy.

``LoopForm.source`` maps each rendered leaf (by identity) back to the lowered node it renders,
which carries the scheduled statement it implements (``sid``) and its tau (``origin``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.index import IBin, IConst, IExpr, ISize, ibin

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


def extent(lo: IExpr, hi: IExpr) -> IExpr:
    """The trip count of ``for v in [lo, hi)``: ``hi - lo``, clamped at 0 unless it is evidently >= 0 (the
    loop interpreter, which replays witnesses, refuses a negative extent where C runs no iteration)."""
    n = ibin("sub", hi, lo)
    return n if _nonnegative(n) else ibin("max", IConst(0), n)


def _nonnegative(e: IExpr) -> bool:
    """Whether ``e`` is >= 0 by its form: a constant >= 0, a size, or sums, products, minima, quotients and
    remainders (by positive constants) of such terms, or a maximum with one."""
    if isinstance(e, IConst):
        return e.value >= 0
    if isinstance(e, ISize):
        return True
    if not isinstance(e, IBin):
        return False
    if e.op == "max":
        return _nonnegative(e.a) or _nonnegative(e.b)
    if e.op in ("floordiv", "mod"):
        return _nonnegative(e.a) and isinstance(e.b, IConst) and e.b.value > 0
    return e.op in ("add", "mul", "min") and _nonnegative(e.a) and _nonnegative(e.b)


def _block(body: tuple[Node, ...], source: dict[int, Node]) -> ir.Block:
    return ir.Block((), tuple(_node(n, source) for n in body))


def _node(n: Node, source: dict[int, Node]) -> Any:
    if isinstance(n, For):
        return L.Loop(n.var, n.name, extent(n.lo, n.hi), n.kind, _block(n.body, source), n.binding, n.lo)
    if isinstance(n, Guard):
        return L.If(n.cond, _block(n.body, source))
    if isinstance(n, Seq):
        return L.If(IConst(1), _block(n.body, source))
    if isinstance(n, Alloc):
        leaf: Any = L.Decl(L.Buffer(n.buf, n.dtype, n.shape, n.scope, n.layout))
    elif isinstance(n, Store):
        leaf = (L.AsyncCopy if n.async_copy else L.Assign)(n.buf, n.index, n.value, n.loc) if n.accum is None else \
            L.Accum(n.buf, n.index, n.accum, n.value, n.policy, n.loc)
    else:
        assert isinstance(n, Sync), type(n).__name__
        leaf = L.Barrier(n.scope) if n.pending is None else L.AsyncWait(n.scope, pending=n.pending)
    source[id(leaf)] = n
    return leaf
