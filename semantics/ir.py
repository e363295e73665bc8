"""The tilecert IR: one immutable tree of frozen dataclasses.

A ``Program`` has size parameters, tensors and a body ``Block``. A block is a sequence of
ops, some of which are regions (``Parallel``, ``Serial``, ``Pipeline``, ``Reduce``) with
their own body block. Values are SSA: each op result is a ``Value`` with a program-unique
id and a ``TileType`` (dtype, dims with identity, extents as index expressions; rank 0
is a scalar). Serial, pipeline and reduce regions carry state explicitly: ``inits`` are
the values entering the first iteration, the body's ``args`` name the carried values
inside an iteration, its ``yields`` give the next values (all updated at once), and
``outs`` are the values after the last iteration (the inits for a zero-trip loop).

Memory effects go through tensors (``ViewLoad`` / ``ViewStore``, which cover both tile
views and scalar descent) and explicit memories (``Alloc`` / ``MemStore`` / ``MemLoad``;
one allocation per instance of the nearest enclosing parallel region).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Optional, Union

from .errors import NOWHERE, Loc, TilecertError
from .index import IExpr

Scalar = Union[int, float, bool]

POLICIES = ("unordered_tree", "ordered_tree", "fold_left", "fold_right")
BOUNDS = ("zero", "assume")
MEMORY_SCOPES = ("auto", "local", "shared", "global")
UNARY_FNS = ("neg", "exp", "log", "sqrt", "tanh", "abs", "not")
ARITH_FNS = ("add", "sub", "mul", "div", "floordiv", "mod", "min", "max")
CMP_FNS = ("lt", "le", "gt", "ge", "eq", "ne")
LOGIC_FNS = ("and", "or")
BINARY_FNS = ARITH_FNS + CMP_FNS + LOGIC_FNS
REDUCERS = ("add", "max", "min", "mul", "custom")


@dataclass(frozen=True)
class Dim:
    """A dimension with identity ``id``; ``label`` is for diagnostics only.

    Positional dims (from shapes written as plain extents) have negative ids: the dim at
    position k from the right is ``Dim(-(k + 1))`` in every tile of a kernel, so positional
    shapes broadcast the way array shapes do.
    """

    id: int
    label: str = field(default="", compare=False)

    @property
    def positional(self) -> bool:
        return self.id < 0

    def __str__(self) -> str:
        if self.positional:
            return f"p{-self.id - 1}"
        return self.label or f"d{self.id}"


def positional_dims(rank: int) -> tuple[Dim, ...]:
    return tuple(Dim(-(rank - i), f"positional.{rank - i - 1}") for i in range(rank))


@dataclass(frozen=True)
class TileType:
    """dtype name, dims (identities) and extents; rank 0 is a scalar."""

    dtype: str
    dims: tuple[Dim, ...] = ()
    shape: tuple[IExpr, ...] = ()

    @property
    def rank(self) -> int:
        return len(self.dims)

    def __str__(self) -> str:
        if not self.dims:
            return self.dtype
        inner = ", ".join(f"{d}={s}" for d, s in zip(self.dims, self.shape))
        return f"{self.dtype}[{inner}]"


@dataclass(frozen=True)
class Value:
    """An SSA value; ``label`` is the DSL variable it was first bound to (diagnostics and names only:
    it takes no part in equality or the digest)."""

    id: int
    type: TileType
    label: str = field(default="", compare=False)

    def __str__(self) -> str:
        return f"%{self.id}"


# ----------------------------------------------------------------------------- ops


@dataclass(frozen=True)
class Full:
    """A tile whose every element is ``value`` (``zeros`` is ``Full`` of 0)."""

    out: Value
    value: Scalar
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class Iota:
    """``out[q] = q[axis]``."""

    out: Value
    axis: int
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class IndexValue:
    """A scalar holding the value of an index expression."""

    out: Value
    expr: IExpr
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class Cast:
    out: Value
    x: int
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class Unary:
    out: Value
    fn: str
    x: int
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class Binary:
    """Elementwise ``fn(a, b)`` with broadcasting by dim identity (equal or unit extents)."""

    out: Value
    fn: str
    a: int
    b: int
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class Select:
    out: Value
    cond: int
    a: int
    b: int
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class Block:
    """A sequence of ops; ``args`` are bound by the enclosing construct, ``yields`` end it.

    In loop form (after library expansion) ``ops`` holds ``loopir`` statements instead, which
    that module defines on top of this one (``serialize`` declares the union for checking).
    """

    args: tuple[Value, ...]
    ops: tuple["Op", ...]
    yields: tuple[int, ...] = ()


@dataclass(frozen=True)
class ReduceExpr:
    """Reduce ``x`` over tile ``axes`` with a reducer and an order policy.

    ``combiner`` is a named reducer, or ``custom`` with ``fn`` a block of two scalar args
    yielding one value (fold_left: ``s = fn(s, x)``; fold_right: ``s = fn(x, s)``; trees:
    ``fn(left, right)``). ``init`` is the seed value (required for custom reducers).
    """

    out: Value
    x: int
    axes: tuple[int, ...]
    combiner: str
    policy: str
    init: Optional[int] = None
    fn: Optional[Block] = None
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class Mma:
    """``out = c + sum over contracted dims of a * b`` (inputs converted to c's dtype).

    ``spec`` is an einsum spec over letters, one letter per dim, derived from dim identity
    (or from matmul positions when the operands use positional dims).
    """

    out: Value
    a: int
    b: int
    c: int
    spec: str
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class Reshape:
    """Same elements in row-major order, new extents."""

    out: Value
    x: int
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class ViewLoad:
    """Load the ``extents`` box at ``origin`` of ``tensor`` (a snapshot).

    Out of bounds: ``zero`` fills with 0 (or with the ``fallback`` value), ``assume``
    makes an out-of-bounds access an error. ``out`` keeps the non-unit axes of the box
    (a scalar descent loads a box of unit extents into a rank-0 value).
    """

    out: Value
    tensor: str
    origin: tuple[IExpr, ...]
    extents: tuple[IExpr, ...]
    bounds: str = "zero"
    fallback: Optional[int] = None
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class ViewStore:
    """Store ``value`` into the ``extents`` box at ``origin``; ``perm[i]`` is the value axis
    written along box axis ``i`` (``None`` for a unit axis the value does not have).
    Out-of-bounds cells are skipped under ``zero`` and are an error under ``assume``."""

    tensor: str
    origin: tuple[IExpr, ...]
    extents: tuple[IExpr, ...]
    value: int
    perm: tuple[Optional[int], ...]
    bounds: str = "zero"
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class Alloc:
    """An explicit memory: one allocation per instance of the nearest enclosing parallel."""

    mem: int
    type: TileType
    scope: str = "auto"
    loc: Loc = NOWHERE
    label: str = field(default="", compare=False)  # the DSL variable of the memory (names only)


@dataclass(frozen=True)
class MemStore:
    mem: int
    value: int
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class MemLoad:
    out: Value
    mem: int
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class Stage:
    """A pipeline stage cut: the ops after it (up to the next cut) form stage ``ordinal``."""

    name: str
    ordinal: int
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class Parallel:
    """Independent instances over the box ``extents``; no order between distinct instances."""

    region: int
    extents: tuple[IExpr, ...]
    body: Block
    binding: Optional[str] = None
    name: str = ""
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class Serial:
    """Iterations in lexicographic order over ``extents``, carrying state."""

    region: int
    extents: tuple[IExpr, ...]
    inits: tuple[int, ...]
    body: Block
    outs: tuple[Value, ...]
    name: str = ""
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class Pipeline:
    """Means the sequential order of a serial loop; ``window`` and ``interval`` are policy."""

    region: int
    extents: tuple[IExpr, ...]
    inits: tuple[int, ...]
    body: Block
    outs: tuple[Value, ...]
    window: int = 2
    interval: int = 1
    name: str = ""
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class Reduce:
    """An algebraic fold of the carried states over ``extents`` under ``policy``."""

    region: int
    extents: tuple[IExpr, ...]
    inits: tuple[int, ...]
    body: Block
    outs: tuple[Value, ...]
    policy: str = "unordered_tree"
    name: str = ""
    loc: Loc = NOWHERE


Loop = Union[Serial, Pipeline, Reduce]
Region = Union[Parallel, Serial, Pipeline, Reduce]
Op = Union[Full, Iota, IndexValue, Cast, Unary, Binary, Select, ReduceExpr, Mma, Reshape, ViewLoad,
           ViewStore, Alloc, MemStore, MemLoad, Stage, Parallel, Serial, Pipeline, Reduce]
REGION_KINDS = {Parallel: "parallel", Serial: "serial", Pipeline: "pipeline", Reduce: "reduce"}
LOOP_TYPES = (Serial, Pipeline, Reduce)


@dataclass(frozen=True)
class TensorDecl:
    """A kernel argument: ``shape[i]`` is the size parameter of its dim ``i``."""

    name: str
    dtype: str
    dims: tuple[Dim, ...]
    shape: tuple[IExpr, ...]
    written: bool


@dataclass(frozen=True)
class Program:
    name: str
    sizes: tuple[str, ...]
    tensors: tuple[TensorDecl, ...]
    body: Block
    config: tuple[tuple[str, Scalar], ...] = ()
    loc: Loc = NOWHERE

    def tensor(self, name: str) -> TensorDecl:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tensors if t.written)


def expect_program(obj: object, what: str) -> Program:
    """``obj`` if it is a Program; else a TilecertError naming ``what`` took it."""
    if not isinstance(obj, Program):
        raise TilecertError(f"{what} takes a Program, got {type(obj).__name__}",
                            hint="capture a kernel first: tc.capture(kernel)")
    return obj


def results_of(op: Op) -> tuple[Value, ...]:
    """The values an op defines."""
    if isinstance(op, LOOP_TYPES):
        return op.outs
    out = getattr(op, "out", None)
    return (out,) if out is not None else ()


def operands_of(op: Op) -> tuple[int, ...]:
    """The value ids an op reads (for regions: the inits; bodies are walked separately)."""
    if isinstance(op, LOOP_TYPES):
        return op.inits
    names = {
        Cast: ("x",), Unary: ("x",), Reshape: ("x",), Binary: ("a", "b"), Select: ("cond", "a", "b"),
        ReduceExpr: ("x", "init"), Mma: ("a", "b", "c"), ViewLoad: ("fallback",), ViewStore: ("value",),
        MemStore: ("value",),
    }.get(type(op), ())
    return tuple(v for v in (getattr(op, n) for n in names) if v is not None)


def uses(op: Op) -> set[int]:
    """The value ids ``op`` reads, with everything nested in its body (the body's yields included)."""
    used = set(operands_of(op))
    body = getattr(op, "body", None)
    if isinstance(body, Block):
        for inner in body.ops:
            used |= uses(inner)
        used |= set(body.yields)
    return used


def walk(block: Block) -> Iterator[Op]:
    """Every op of ``block`` and of the regions nested in it, in program order."""
    for op in block.ops:
        yield op
        body = getattr(op, "body", None)
        if body is not None:
            yield from walk(body)


_OP_NAMES = {Full: "full", Iota: "iota", IndexValue: "index", Cast: "cast", Select: "select", ReduceExpr: "reduce",
             Mma: "mma", Reshape: "reshape", ViewLoad: "load", MemLoad: "mload", ViewStore: "store",
             MemStore: "store"}


def op_name(op: Op) -> str:
    """The tile op's DSL name (``add``, ``load``, ``mma``, ...; ``carry`` for a region's carried values)."""
    if isinstance(op, (Unary, Binary)):
        return op.fn
    return _OP_NAMES.get(type(op), "carry")


def value_name(op: Op, v: Value) -> str:
    """The name of ``v``, a result of ``op``: its DSL variable (``v.label``), else the op's name."""
    return v.label or op_name(op)
