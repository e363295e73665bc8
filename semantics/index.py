"""Index expressions: the pure, integer-valued expressions of execution coordinates.

Extents, view origins and element indices are index expressions over constants, size
parameters and loop coordinates, combined with +, -, *, floor division, modulo, min, max
and comparisons. They are quasi-affine whenever division and modulo are by constants,
which is what the polyhedral checker needs. Constructors fold constants.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Union

import numpy as np

from .errors import ExecutionError


class IExpr:
    """Base of index expressions (frozen dataclasses, compared structurally)."""

    __slots__ = ()


@dataclass(frozen=True)
class IConst(IExpr):
    value: int

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True)
class ISize(IExpr):
    """A size parameter of the program (a tensor extent), possibly symbolic."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class IVar(IExpr):
    """Coordinate ``axis`` of loop region ``region`` (the region's local index)."""

    region: int
    axis: int

    def __str__(self) -> str:
        return f"r{self.region}.{self.axis}"


@dataclass(frozen=True)
class IBin(IExpr):
    """A binary operation; ``op`` is one of ``BIN_OPS``."""

    op: str
    a: IExpr
    b: IExpr

    def __str__(self) -> str:
        if self.op in ("min", "max"):
            return f"{self.op}({self.a}, {self.b})"
        return f"({self.a} {_SYMBOL[self.op]} {self.b})"


@dataclass(frozen=True)
class INot(IExpr):
    a: IExpr

    def __str__(self) -> str:
        return f"!{self.a}"


_SYMBOL = {
    "add": "+", "sub": "-", "mul": "*", "floordiv": "//", "mod": "%",
    "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=", "and": "&&", "or": "||",
}
ARITH_OPS = ("add", "sub", "mul", "floordiv", "mod", "min", "max")
CMP_OPS = ("lt", "le", "gt", "ge", "eq", "ne", "and", "or")
BIN_OPS = ARITH_OPS + CMP_OPS

IntLike = Union[int, np.integer, np.ndarray]

INDEX_OPS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b,
    "min": np.minimum, "max": np.maximum,
    "lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
    "and": np.logical_and, "or": np.logical_or,
}


def ibin(op: str, a: IExpr, b: IExpr) -> IExpr:
    """Build ``a op b``, folding constants and the neutral elements of + and *."""
    if isinstance(a, IConst) and isinstance(b, IConst):
        if op in ("floordiv", "mod") and b.value == 0:
            return IBin(op, a, b)
        value = INDEX_OPS[op](a.value, b.value)
        return IConst(int(value))
    if op == "add":
        if a == IConst(0):
            return b
        if b == IConst(0):
            return a
    if op == "sub" and b == IConst(0):
        return a
    if op == "add" and _recombines(a, b):  # c * (x // c) + x mod c -> x
        return b.a
    if op in ("add", "sub") and isinstance(b, IConst) and isinstance(a, IBin) and a.op in ("add", "sub") \
            and isinstance(a.b, IConst):  # (x +- c1) +- c2 -> x + c
        c = (a.b.value if a.op == "add" else -a.b.value) + (b.value if op == "add" else -b.value)
        return ibin("add", a.a, IConst(c)) if c >= 0 else ibin("sub", a.a, IConst(-c))
    if op == "mul":
        if a == IConst(1):
            return b
        if b == IConst(1):
            return a
        if IConst(0) in (a, b):
            return IConst(0)
    if op == "floordiv" and b == IConst(1):
        return a
    if op == "floordiv" and isinstance(b, IConst) and b.value > 0 and _multiple_plus_small(a, b.value):
        return _multiplicand(a.a if isinstance(a, IBin) and a.op == "add" else a, b.value)  # (x*c + d) // c -> x
    return IBin(op, a, b)


def _recombines(a: IExpr, b: IExpr) -> bool:
    """``a + b`` is ``c * (x // c) + x mod c`` (or ``(x // c) * c + x mod c``) for a constant ``c > 0``: equal
    to ``x`` for every integer ``x`` (floor division and its remainder), so splitting a loop that a fuse
    made (or the reverse) gives back the original index instead of doubling it."""
    if not (isinstance(a, IBin) and a.op == "mul" and isinstance(b, IBin) and b.op == "mod"
            and isinstance(b.b, IConst) and b.b.value > 0):
        return False
    quotient = IBin("floordiv", b.a, b.b)
    return (a.a == b.b and a.b == quotient) or (a.b == b.b and a.a == quotient)


def _multiplicand(e: IExpr, c: int) -> IExpr | None:
    """``x`` when ``e`` is ``x * c`` or ``c * x``, else None."""
    if isinstance(e, IBin) and e.op == "mul":
        if e.b == IConst(c):
            return e.a
        if e.a == IConst(c):
            return e.b
    return None


def _multiple_plus_small(a: IExpr, c: int) -> bool:
    """``a`` is ``x * c + d`` with ``0 <= d < c`` (or ``x * c``): then ``a // c == x`` for every integer ``x``,
    so a ceiling division of a product by its own factor (a split of a fused loop) gives back ``x``."""
    if isinstance(a, IBin) and a.op == "add" and isinstance(a.b, IConst) and 0 <= a.b.value < c:
        return _multiplicand(a.a, c) is not None
    return _multiplicand(a, c) is not None


def cdiv(a: IExpr, b: IExpr) -> IExpr:
    """Ceiling division ``(a + b - 1) // b`` for positive ``b``."""
    return ibin("floordiv", ibin("sub", ibin("add", a, b), IConst(1)), b)


def evaluate(e: IExpr, sizes: Mapping[str, int], coords: Mapping[tuple[int, int], IntLike]) -> IntLike:
    """Evaluate ``e``; loop coordinates may be numpy arrays (evaluated elementwise)."""
    if isinstance(e, IConst):
        return e.value
    if isinstance(e, ISize):
        return sizes[e.name]
    if isinstance(e, IVar):
        return coords[(e.region, e.axis)]
    if isinstance(e, IBin):
        a = evaluate(e.a, sizes, coords)
        b = evaluate(e.b, sizes, coords)
        if e.op in ("floordiv", "mod") and np.any(np.asarray(b) == 0):
            raise ExecutionError(f"index expression {e} divides by zero", hint="check the sizes and tile factors")
        return INDEX_OPS[e.op](a, b)
    if isinstance(e, INot):
        return np.logical_not(evaluate(e.a, sizes, coords))
    raise TypeError(f"not an index expression: {e!r}")


def free_vars(e: IExpr) -> frozenset[tuple[int, int]]:
    """The loop coordinates ``(region, axis)`` that ``e`` reads."""
    if isinstance(e, IVar):
        return frozenset({(e.region, e.axis)})
    if isinstance(e, IBin):
        return free_vars(e.a) | free_vars(e.b)
    if isinstance(e, INot):
        return free_vars(e.a)
    return frozenset()


def size_names(e: IExpr) -> frozenset[str]:
    """The size parameters that ``e`` reads."""
    if isinstance(e, ISize):
        return frozenset({e.name})
    if isinstance(e, IBin):
        return size_names(e.a) | size_names(e.b)
    if isinstance(e, INot):
        return size_names(e.a)
    return frozenset()


def linear(e: IExpr, var: int) -> Optional[tuple[int, IExpr]]:
    """``(k, rest)`` with ``e = k*i + rest`` and ``rest`` free of ``i`` (None if ``e`` is not linear in ``i``)."""
    if (var, 0) not in free_vars(e):
        return 0, e
    if isinstance(e, IVar):
        return 1, IConst(0)
    if isinstance(e, IBin) and e.op in ("add", "sub"):
        a, b = linear(e.a, var), linear(e.b, var)
        if a is None or b is None:
            return None
        sign = 1 if e.op == "add" else -1
        return a[0] + sign * b[0], ibin(e.op, a[1], b[1])
    if isinstance(e, IBin) and e.op == "mul":
        for c, x in ((e.a, e.b), (e.b, e.a)):
            if isinstance(c, IConst):
                inner = linear(x, var)
                return None if inner is None else (c.value * inner[0], ibin("mul", c, inner[1]))
    return None


def substitute(e: IExpr, var: int, value: IExpr) -> IExpr:
    """``e`` with loop variable ``var`` replaced by ``value`` (constants refolded)."""
    return substitute_many(e, {var: value})


def substitute_many(e: IExpr, values: dict[int, IExpr]) -> IExpr:
    """``e`` with every loop variable of ``values`` replaced simultaneously (constants refolded)."""
    if isinstance(e, IVar):
        return values.get(e.region, e) if e.axis == 0 else e
    if isinstance(e, IBin):
        return ibin(e.op, substitute_many(e.a, values), substitute_many(e.b, values))
    if isinstance(e, INot):
        return INot(substitute_many(e.a, values))
    return e


def conj(a: IExpr, b: IExpr) -> IExpr:
    """``a && b``, dropping an operand that is the constant true."""
    if a == IConst(1):
        return b
    if b == IConst(1):
        return a
    return IBin("and", a, b)


def conjuncts(cond: IExpr) -> list[IExpr]:
    """The operands of the ``&&`` chain ``cond``, left to right (``[cond]`` when it is no conjunction)."""
    if isinstance(cond, IBin) and cond.op == "and":
        return conjuncts(cond.a) + conjuncts(cond.b)
    return [cond]


def map_leaves(e: IExpr, leaf: Callable[[IExpr], IExpr]) -> IExpr:
    """``e`` with every leaf ``x`` (a constant, size or coordinate) replaced by ``leaf(x)``, re-folded by ``ibin``."""
    if isinstance(e, IBin):
        return ibin(e.op, map_leaves(e.a, leaf), map_leaves(e.b, leaf))
    if isinstance(e, INot):
        return INot(map_leaves(e.a, leaf))
    return leaf(e)


def const_value(e: IExpr, sizes: Optional[Mapping[str, int]]) -> Optional[int]:
    """The value of ``e`` when it reads no loop variable and only bound sizes (None otherwise)."""
    if free_vars(e) or not size_names(e) <= set(sizes or {}):
        return None
    return int(evaluate(e, dict(sizes or {}), {}))
