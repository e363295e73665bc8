"""The lowered loop program: explicit, backend-neutral, and what the backends emit.

A scheduled loop-form program (``semantics.loopir``) says *what* runs: loops with a kind
and an optional binding, guards, allocations per parallel instance. The lowered program
says *how*, in terms any imperative backend renders directly:

- ``For``: ``for var in [lo, hi)`` with the bounds resolved (start + extent, with guards
  on the loop variable folded into ``lo`` / ``hi``) and a ``mode``: ``serial``,
  ``threads`` (iterations run on OS threads) or ``simd`` (iterations run in vector
  lanes). ``name`` is the scheduled loop's name, kept for the reader.
- ``Guard``: ``if cond`` on a quasi-affine index condition.
- ``Seq``: a labelled group of statements (one copy of an unrolled loop body).
- ``Alloc``: a zero-initialised buffer living from this statement to the end of the
  enclosing body, on the ``stack`` or the ``heap``; its ``scope`` is the memory scope of
  the declaration, its ``layout`` the declaration's (None: row-major; a ``Swizzle``: the
  backends store every access at its physical offset). Every thread that executes the
  statement gets its own copy. ``zeroed`` is False when the fill is proved unobservable
  (``lowering.fill``: every cell is written before it is read), and a backend may then leave
  the buffer uninitialised.
- ``Store``: ``buf[index] = value`` or ``buf[index] op= value`` (``accum``, under the
  scheduled update's reduction ``policy``). ``atomic``: concurrent updates of one cell are
  possible and must be serialised. ``async_copy``: the lowered ``loopir.AsyncCopy`` (a backend with
  asynchronous copies may issue it as one; landing it at once is what it means to every other).

An ``Alloc`` or a ``Store`` is a copy of scheduled statement ``sid`` (its number in the
checker's model of the scheduled program, ``checker.model.Model.statements``: every
``Decl``, ``Assign``, ``Accum`` and ``Barrier`` in program order); ``origin`` maps each
loop variable of that statement to an expression over this program's loop variables
(``tau``: which instance of the scheduled statement a lowered instance performs).
- ``Sync``: a barrier among the participants of a scope; with ``pending`` set, the lowered
  ``loopir.AsyncWait``: commit the asynchronous copies issued since the last one, wait until at
  most ``pending`` groups are in flight, then the barrier.

``Lowered.packs`` names the hoisted constant packs (``lowering.packs``) at the start of the
body: each is the ``Alloc`` at ``body[start]`` and the nodes of its nest up to ``body[stop]``,
so a backend may run them apart from the kernel proper (``kernel_body``).

Scalar expressions are those of loop form (``Ld``, ``Lit``, ``Ix``, ``Un``, ``Bin``, ``Sel``,
``Cvt``) with index expressions over the lowered loop variables.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional, Union

from tilecert.semantics.errors import NOWHERE, Loc, TilecertError
from tilecert.semantics.index import IExpr
from tilecert.semantics.ir import TensorDecl
from tilecert.semantics.layout import Swizzle
from tilecert.semantics.loopir import SExpr

MODES = ("serial", "threads", "simd")
STORAGES = ("stack", "heap")


class LoweringError(TilecertError):
    """A scheduled program cannot be lowered (an unsupported construct or binding)."""


@dataclass(frozen=True)
class For:
    var: int
    name: str
    lo: IExpr
    hi: IExpr
    mode: str
    body: tuple["Node", ...]
    kind: str = "serial"
    binding: Optional[str] = None


@dataclass(frozen=True)
class Guard:
    cond: IExpr
    body: tuple["Node", ...]


@dataclass(frozen=True)
class Seq:
    label: str
    body: tuple["Node", ...]


@dataclass(frozen=True)
class Alloc:
    buf: str
    dtype: str
    shape: tuple[IExpr, ...]
    scope: str
    storage: str
    sid: int
    origin: tuple[tuple[int, IExpr], ...]
    zeroed: bool = True
    layout: Optional[Swizzle] = None


@dataclass(frozen=True)
class Store:
    sid: int
    buf: str
    index: tuple[IExpr, ...]
    value: SExpr
    accum: Optional[str]
    origin: tuple[tuple[int, IExpr], ...]
    atomic: bool = False
    loc: Loc = NOWHERE
    policy: Optional[str] = None
    async_copy: bool = False


@dataclass(frozen=True)
class Sync:
    scope: str
    pending: Optional[int] = None


Node = Union[For, Guard, Seq, Alloc, Store, Sync]


@dataclass(frozen=True)
class Pack:
    """A hoisted constant pack of a lowered body: ``body[start]`` is the ``Alloc`` of buffer ``buf``,
    ``body[start + 1:stop]`` its nest, which loads the constant inputs ``reads``."""

    buf: str
    start: int
    stop: int
    reads: tuple[str, ...]


@dataclass(frozen=True)
class Lowered:
    """A lowered kernel: its signature (sizes, tensors), its body and the hoisted packs that start it."""

    name: str
    sizes: tuple[str, ...]
    tensors: tuple[TensorDecl, ...]
    body: tuple[Node, ...]
    bound: tuple[tuple[str, int], ...] = ()
    packs: tuple[Pack, ...] = ()

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tensors if t.written)

    @property
    def kernel_body(self) -> tuple[Node, ...]:
        """The body after the hoisted packs."""
        return self.body[self.packs[-1].stop:] if self.packs else self.body


def walk(body: tuple[Node, ...]) -> Iterator[Node]:
    """Every node of ``body`` and of the bodies nested in it, in program order."""
    for node in body:
        yield node
        inner = getattr(node, "body", None)
        if inner is not None:
            yield from walk(inner)


def format_lowered(lp: Lowered) -> str:
    """A readable listing of a lowered program (for reports and tests)."""
    lines = [f"lowered {lp.name}({', '.join(t.name for t in lp.tensors)}) sizes={list(lp.sizes)}"]
    packs = {pk.buf for pk in lp.packs}

    def emit(body: tuple[Node, ...], depth: int) -> None:
        pad = "  " * depth
        for node in body:
            if isinstance(node, For):
                lines.append(f"{pad}for {node.name} (i{node.var}) in [{node.lo}, {node.hi}) {node.mode}")
                emit(node.body, depth + 1)
            elif isinstance(node, Guard):
                lines.append(f"{pad}if {node.cond}:")
                emit(node.body, depth + 1)
            elif isinstance(node, Seq):
                lines.append(f"{pad}# {node.label}")
                emit(node.body, depth)
            elif isinstance(node, Alloc):
                shape = ", ".join(map(str, node.shape))
                where = "hoisted pack" if node.buf in packs else f"on {node.storage}"
                fill = "" if node.zeroed else " (no fill: written before read)"
                layout = "" if node.layout is None else f" {node.layout}"
                lines.append(f"{pad}alloc {node.scope} {node.buf}: {node.dtype}[{shape}]{layout} {where}{fill}")
            elif isinstance(node, Store):
                idx = ", ".join(map(str, node.index))
                op = f"{node.accum}=" if node.accum else "="
                note = " (atomic)" if node.atomic else " (async)" if node.async_copy else ""
                lines.append(f"{pad}S{node.sid}: {node.buf}[{idx}] {op} ...{note}")
            else:
                wait = "" if node.pending is None else f" after async wait (at most {node.pending} pending)"
                lines.append(f"{pad}sync {node.scope}{wait}")

    emit(lp.body, 1)
    return "\n".join(lines)
