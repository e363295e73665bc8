"""Loop form: the element-level part of the IR, on which schedule ops act.

Library expansion (``expand``) rewrites a tile program into loop form: every tile value
becomes a buffer owned by its anchor instance, every tile op a loop nest of scalar
statements. A loop-form program is an ordinary ``Program`` whose body holds these nodes:

- ``Loop``: one loop variable ``IVar(var, 0)`` over ``[0, extent)``; ``kind`` is parallel,
  serial, reduce (iterations combine only through ``Accum``) or pipeline; ``binding`` is an
  optional hardware or rendering choice (grid<slot>, block<slot>, warp, lane, vector,
  unrolled, core, serial). ``name`` is the stable, readable handle schedule ops use.
- ``If``: a guard on a quasi-affine index condition.
- ``Decl``: a buffer allocation (one per instance of the nearest enclosing parallel loop), of a
  ``Buffer`` stored row-major or in a swizzled layout (``semantics.layout``).
- ``Assign``: ``buf[index] = value``; ``Accum``: ``buf[index] = buf[index] <op> value`` under a
  reduction order policy (what reorderings of the updates are admitted).
- ``Barrier``: synchronisation of the participants of a scope (block or warp).
- ``StageBlock``: a pipeline stage subregion (seed 003): an ``If`` whose guard is the constant
  true, so every pass that knows ``If`` runs it as the block it means; it adds the stage's
  identity ``(pipeline, ordinal)`` (``pipeline`` is the tile IR's region id), its label and
  whether its membership was inferred. The body of a pipeline loop is its stage blocks in
  ordinal order (``semantics.pipeline.stages``); passes that rebuild a block keep them with
  ``dataclasses.replace``.
- ``AsyncCopy`` / ``AsyncWait``: an asynchronous copy into a shared ring and the wait that completes it
  (CUDA's ``cp.async`` and ``commit_group`` + ``wait_group(n)`` + ``__syncthreads``), as an ``Assign`` and a block
  ``Barrier`` subclass: every pass, the interpreters and the checker run them as the plain copy and the block
  barrier they mean when each copy's wait comes before any access of its cell (see ``AsyncWait``); the CUDA
  backend renders them as the hardware's asynchronous copy.

Scalar expressions (``Ld``, ``Lit``, ``Ix``, ``Un``, ``Bin``, ``Sel``, ``Cvt``) carry their dtype.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Union

from .errors import NOWHERE, Loc
from .index import IConst, IExpr
from .bindings import SCOPES
from .bindings import scope_of as binding_kind  # noqa: F401  (a binding without its slot)
from .ir import Block, Program, Scalar
from .layout import Swizzle
from .pipeline.plan import ModuloPlan

LOOP_KINDS = ("parallel", "serial", "reduce", "pipeline")
BINDING_KINDS = SCOPES + ("unrolled", "serial")
ACCUM_OPS = ("add", "mul", "max", "min")


# ----------------------------------------------------------------------------- scalar expressions
@dataclass(frozen=True)
class Ld:
    buf: str
    index: tuple[IExpr, ...]
    dtype: str


@dataclass(frozen=True)
class Lit:
    value: Scalar
    dtype: str


@dataclass(frozen=True)
class Ix:
    """The value of an index expression (a coordinate, or a comparison giving bool)."""

    expr: IExpr
    dtype: str


@dataclass(frozen=True)
class Un:
    fn: str
    x: "SExpr"
    dtype: str


@dataclass(frozen=True)
class Bin:
    fn: str
    a: "SExpr"
    b: "SExpr"
    dtype: str


@dataclass(frozen=True)
class Sel:
    cond: "SExpr"
    a: "SExpr"
    b: "SExpr"
    dtype: str


@dataclass(frozen=True)
class Cvt:
    x: "SExpr"
    dtype: str


SExpr = Union[Ld, Lit, Ix, Un, Bin, Sel, Cvt]


# ----------------------------------------------------------------------------- statements
@dataclass(frozen=True)
class Buffer:
    """A buffer: its shape is the declared (possibly padded) one; ``layout`` None is row-major storage, a
    ``Swizzle`` a permutation of each row (``semantics.layout``; values are read and written by logical index)."""

    name: str
    dtype: str
    shape: tuple[IExpr, ...]
    scope: str = "local"
    layout: Optional[Swizzle] = None


@dataclass(frozen=True)
class Decl:
    buf: Buffer
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class Assign:
    buf: str
    index: tuple[IExpr, ...]
    value: SExpr
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class Accum:
    buf: str
    index: tuple[IExpr, ...]
    op: str
    value: SExpr
    policy: str = "unordered_tree"
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class Barrier:
    scope: str = "block"
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class AsyncCopy(Assign):
    """``buf[index] = value`` issued as an asynchronous copy: ``value`` is a load of a tensor element (or ``Sel(c,
    load, 0)``, the zero-fill form) and ``buf`` a shared buffer. It lands in ``buf`` at the latest at the first
    ``AsyncWait`` of its thread that leaves it out of the ``pending`` newest groups; until then the cell holds its
    old content. This is the pending slot of ``semantics.pipeline.realize``'s ``async`` model (``b.inflight[s]``)
    made the hardware's: the copy is the write into the pending slot, the wait's completion the move into the ring.
    """


@dataclass(frozen=True)
class AsyncWait(Barrier):
    """Commit the asynchronous copies a thread issued since its last ``AsyncWait`` as one group, wait until at most
    ``pending`` of its groups are still in flight (the older ones have landed), then a block barrier (which
    publishes the landed cells to the block). ``scope`` is ``block``.

    Run as the copy it completes and the barrier it is, a program means what it runs on CUDA when every thread
    reaches the same waits (they are block barriers) and no cell of a copy is accessed between its issue and the
    wait that completes it; ``lowering.async_copy.wait_pending`` derives ``pending`` from a plan's columns."""

    pending: int = 0


@dataclass(frozen=True)
class If:
    cond: IExpr
    body: Block
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class StageBlock(If):
    """Stage ``ordinal`` of pipeline ``pipeline``: ``cond`` is ``IConst(1)``; ``name`` is a label only."""

    pipeline: int = 0
    ordinal: int = 0
    name: str = ""
    inferred: bool = False


@dataclass(frozen=True)
class Pipelining:
    """A pipeline loop's policy (``window`` 0: the planner chooses, 1: no cross-iteration overlap, N: at most N
    iterations in flight; ``interval`` >= 1) and the modulo plan a schedule set on it (None: none yet; the loop then
    runs in its sequential order)."""

    pipeline: int
    window: int = 2
    interval: int = 1
    plan: Optional[ModuloPlan] = None


@dataclass(frozen=True)
class Loop:
    var: int
    name: str
    extent: IExpr
    kind: str
    body: Block
    binding: Optional[str] = None
    start: IExpr = IConst(0)
    loc: Loc = NOWHERE
    pipeline: Optional[Pipelining] = None


Stmt = Union[Decl, Assign, Accum, Barrier, If, Loop]  # AsyncCopy / AsyncWait are an Assign / a Barrier
STMT_TYPES = (Decl, Assign, Accum, Barrier, If, Loop)
EXPR_TYPES = (Ld, Lit, Ix, Un, Bin, Sel, Cvt)


def is_loop_form(block: Block) -> bool:
    return all(isinstance(op, STMT_TYPES) for op in block.ops)


def loads(e: SExpr) -> Iterator[Ld]:
    """Every load in a scalar expression."""
    if isinstance(e, Ld):
        yield e
    elif isinstance(e, (Un, Cvt)):
        yield from loads(e.x)
    elif isinstance(e, Bin):
        yield from loads(e.a)
        yield from loads(e.b)
    elif isinstance(e, Sel):
        yield from loads(e.cond)
        yield from loads(e.a)
        yield from loads(e.b)


def loops(block: Block) -> Iterator[Loop]:
    """Every loop nested in ``block``, outermost first."""
    for op in block.ops:
        if isinstance(op, Loop):
            yield op
        body = getattr(op, "body", None)
        if body is not None:
            yield from loops(body)


def fresh_var(p: Program) -> Callable[[], int]:
    """A generator of loop variable ids unused in ``p``."""
    used = [lp.var for lp in loops(p.body)]
    counter = [max(used, default=-1) + 1]

    def nxt() -> int:
        counter[0] += 1
        return counter[0] - 1

    return nxt
