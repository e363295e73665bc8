"""Capture-time handles for values: ``Tile`` (an SSA tile value) and ``Idx`` (an index).

Both overload Python's operators, so kernels read as ordinary arithmetic. Python
numbers mixed with tiles are weakly typed: they take the tile's dtype. An index mixed
with a tile becomes a scalar of the tile's dtype.
"""
from __future__ import annotations

from typing import Any, Union

from . import ir
from .builder import Frame, active
from .dtypes import DType, dtype_of
from .errors import CaptureError, TypeMismatch, caller_loc
from .index import IConst, IExpr, INot, cdiv as _icdiv, ibin
from .typing_rules import broadcast_types


class Idx:
    """An index expression under capture (extents, coordinates, origins)."""

    __slots__ = ("expr",)

    def __init__(self, expr: IExpr) -> None:
        self.expr = expr

    def _bin(self, op: str, other: Any, swap: bool = False) -> Any:
        if isinstance(other, Tile):
            return other._binary(op, self, swap=not swap)
        o = as_index(other)
        if o is None:
            return NotImplemented
        a, b = (o, self.expr) if swap else (self.expr, o)
        return Idx(ibin(op, a, b))

    __add__ = lambda s, o: s._bin("add", o)  # noqa: E731
    __radd__ = lambda s, o: s._bin("add", o, True)  # noqa: E731
    __sub__ = lambda s, o: s._bin("sub", o)  # noqa: E731
    __rsub__ = lambda s, o: s._bin("sub", o, True)  # noqa: E731
    __mul__ = lambda s, o: s._bin("mul", o)  # noqa: E731
    __rmul__ = lambda s, o: s._bin("mul", o, True)  # noqa: E731
    __floordiv__ = lambda s, o: s._bin("floordiv", o)  # noqa: E731
    __rfloordiv__ = lambda s, o: s._bin("floordiv", o, True)  # noqa: E731
    __mod__ = lambda s, o: s._bin("mod", o)  # noqa: E731
    __rmod__ = lambda s, o: s._bin("mod", o, True)  # noqa: E731
    __lt__ = lambda s, o: s._bin("lt", o)  # noqa: E731
    __le__ = lambda s, o: s._bin("le", o)  # noqa: E731
    __gt__ = lambda s, o: s._bin("gt", o)  # noqa: E731
    __ge__ = lambda s, o: s._bin("ge", o)  # noqa: E731
    __eq__ = lambda s, o: s._bin("eq", o)  # type: ignore[assignment]  # noqa: E731
    __ne__ = lambda s, o: s._bin("ne", o)  # type: ignore[assignment]  # noqa: E731
    __hash__ = None  # type: ignore[assignment]

    def __neg__(self) -> "Idx":
        return Idx(ibin("sub", IConst(0), self.expr))

    def __invert__(self) -> "Idx":
        return Idx(INot(self.expr))

    def __and__(self, o: Any) -> Any:
        return self._bin("and", o)

    def __or__(self, o: Any) -> Any:
        return self._bin("or", o)

    def __truediv__(self, o: Any) -> Any:
        raise CaptureError("index expressions use integer division", hint="write // (floor) or tc.cdiv (ceiling)")

    def __bool__(self) -> bool:
        if isinstance(self.expr, IConst):
            return bool(self.expr.value)
        raise CaptureError(f"index expression {self.expr} has no Python truth value at capture",
                           hint="it depends on sizes or coordinates; use tc.where for data choices")

    def __index__(self) -> int:
        if isinstance(self.expr, IConst):
            return self.expr.value
        raise CaptureError(f"index expression {self.expr} is not a compile-time constant",
                           hint="use it as an extent or origin instead of a Python int")

    def __repr__(self) -> str:
        return f"Idx({self.expr})"


def as_index(x: Any) -> IExpr | None:
    """An ``IExpr`` for ints and ``Idx``; None for anything else."""
    if isinstance(x, Idx):
        return x.expr
    if isinstance(x, bool):
        return None
    if isinstance(x, int) or (hasattr(x, "__index__") and not isinstance(x, (Tile, float))):
        try:
            return IConst(int(x.__index__() if not isinstance(x, int) else x))
        except TypeError:
            return None
    return None


def index_expr(x: Any, what: str) -> IExpr:
    e = as_index(x)
    if e is None:
        raise CaptureError(f"{what} must be an int or an index expression, got {type(x).__name__}",
                           hint="data values cannot be used as indices (static control only)")
    return active().check_index(e, what)


def cdiv(a: Any, b: Any) -> Any:
    """Ceiling division of two extents."""
    ea, eb = as_index(a), as_index(b)
    if ea is None or eb is None:
        raise CaptureError("tc.cdiv takes ints or index expressions", hint="cdiv(M, bm)")
    return Idx(_icdiv(ea, eb)) if not (isinstance(a, int) and isinstance(b, int)) else -(-a // b)


_ARITH = {"add", "sub", "mul", "div", "floordiv", "mod", "min", "max"}
_CMP = {"lt", "le", "gt", "ge", "eq", "ne"}


class Tile:
    """A tile value under capture (rank 0 is a scalar)."""

    __slots__ = ("value", "frame")
    __hash__ = object.__hash__

    def __init__(self, value: ir.Value, frame: Frame) -> None:
        self.value = value
        self.frame = frame

    # --------------------------------------------------------------- info
    @property
    def type(self) -> ir.TileType:
        return self.value.type

    @property
    def dtype(self) -> DType:
        return dtype_of(self.value.type.dtype)

    @property
    def shape(self) -> tuple[Any, ...]:
        return tuple(s.value if isinstance(s, IConst) else Idx(s) for s in self.value.type.shape)

    @property
    def dims(self) -> tuple[ir.Dim, ...]:
        return self.value.type.dims

    def use(self, what: str = "operand") -> int:
        active().check_value(self.frame, f"{what} %{self.value.id}")
        return self.value.id

    def __repr__(self) -> str:
        return f"Tile(%{self.value.id}: {self.value.type})"

    def __bool__(self) -> bool:
        raise CaptureError("a tile value has no Python truth value at capture",
                           hint="Python `if`/`and`/`or` cannot branch on data; use tc.where(cond, a, b)")

    def __iter__(self):
        raise CaptureError("tiles are not iterable", hint="use tile ops (reduce, reshape, ...) on the whole tile")

    # --------------------------------------------------------------- arithmetic
    def _binary(self, fn: str, other: Any, swap: bool = False) -> "Tile":
        o = coerce(other, self.dtype)
        a, b = (o, self) if swap else (self, o)
        return binary(fn, a, b)

    def __add__(self, o): return self._binary("add", o)  # noqa: E704
    def __radd__(self, o): return self._binary("add", o, True)  # noqa: E704
    def __sub__(self, o): return self._binary("sub", o)  # noqa: E704
    def __rsub__(self, o): return self._binary("sub", o, True)  # noqa: E704
    def __mul__(self, o): return self._binary("mul", o)  # noqa: E704
    def __rmul__(self, o): return self._binary("mul", o, True)  # noqa: E704
    def __truediv__(self, o): return self._binary("div", o)  # noqa: E704
    def __rtruediv__(self, o): return self._binary("div", o, True)  # noqa: E704
    def __floordiv__(self, o): return self._binary("floordiv", o)  # noqa: E704
    def __rfloordiv__(self, o): return self._binary("floordiv", o, True)  # noqa: E704
    def __mod__(self, o): return self._binary("mod", o)  # noqa: E704
    def __rmod__(self, o): return self._binary("mod", o, True)  # noqa: E704
    def __lt__(self, o): return self._binary("lt", o)  # noqa: E704
    def __le__(self, o): return self._binary("le", o)  # noqa: E704
    def __gt__(self, o): return self._binary("gt", o)  # noqa: E704
    def __ge__(self, o): return self._binary("ge", o)  # noqa: E704
    def __eq__(self, o): return self._binary("eq", o)  # type: ignore[override]  # noqa: E704
    def __ne__(self, o): return self._binary("ne", o)  # type: ignore[override]  # noqa: E704
    def __and__(self, o): return self._binary("and", o)  # noqa: E704
    def __rand__(self, o): return self._binary("and", o, True)  # noqa: E704
    def __or__(self, o): return self._binary("or", o)  # noqa: E704
    def __ror__(self, o): return self._binary("or", o, True)  # noqa: E704
    def __neg__(self): return unary("neg", self)  # noqa: E704
    def __invert__(self): return unary("not", self)  # noqa: E704
    def __abs__(self): return unary("abs", self)  # noqa: E704


def emit_value(op_factory, t: ir.TileType) -> Tile:
    """Create a result value of type ``t``, emit ``op_factory(value)`` and wrap it."""
    b = active()
    v = b.new_value(t)
    b.emit(op_factory(v))
    return Tile(v, b.top)


def constant(value: Any, dtype: DType) -> Tile:
    """A rank-0 tile holding a Python scalar."""
    if dtype.is_int and isinstance(value, float) and not float(value).is_integer():
        raise TypeMismatch(f"the float {value} mixed with a {dtype.name} tile", hint="cast the tile to a float type first")
    if dtype.is_bool and not isinstance(value, bool):
        raise TypeMismatch(f"{value!r} mixed with a bool tile", hint="use True / False")
    py = bool(value) if dtype.is_bool else (int(value) if dtype.is_int else float(value))
    loc = caller_loc()
    return emit_value(lambda v: ir.Full(v, py, loc), ir.TileType(dtype.name))


def coerce(x: Any, dtype: DType) -> Tile:
    """Turn a tile, index or Python scalar into a tile (scalars and indices take ``dtype``)."""
    if isinstance(x, Tile):
        return x
    if isinstance(x, Idx):
        e = active().check_index(x.expr)
        if dtype.is_bool:
            raise TypeMismatch("an index mixed with a bool tile", hint="compare the index first")
        loc = caller_loc()
        return emit_value(lambda v: ir.IndexValue(v, e, loc), ir.TileType(dtype.name))
    if isinstance(x, (bool, int, float)):
        return constant(x, dtype)
    raise TypeMismatch(f"cannot use a {type(x).__name__} as a tile operand", hint="operands are tiles, indices or numbers")


def binary(fn: str, a: Tile, b: Tile) -> Tile:
    da, db = a.dtype, b.dtype
    what = f"`{fn}`"
    if da != db:
        raise TypeMismatch(f"{what} of {da.name} and {db.name} tiles", hint="tc.cast one operand so the dtypes match")
    if fn in _ARITH and da.is_bool:
        raise TypeMismatch(f"{what} on bool tiles", hint="use & | ~ for logic, or cast to an integer type")
    if fn == "div" and da.is_int:
        raise TypeMismatch("`/` on integer tiles", hint="use // (floor division) for integers")
    if fn in ("floordiv", "mod") and not da.is_int:
        raise TypeMismatch(f"{what} needs integer tiles", hint="use / for floats")
    if fn in ("and", "or") and not da.is_bool:
        raise TypeMismatch(f"{what} needs bool tiles", hint="compare first, or use tc.where")
    result_dtype = "bool" if fn in _CMP else da.name
    t = broadcast_types(result_dtype, [a.type, b.type], what)
    ia, ib = a.use(), b.use()
    loc = caller_loc()
    return emit_value(lambda v: ir.Binary(v, fn, ia, ib, loc), t)


def unary(fn: str, x: Tile) -> Tile:
    if not isinstance(x, Tile):
        raise TypeMismatch(f"`{fn}` takes a tile, got {type(x).__name__}",
                           hint="build a tile first, e.g. tc.full(tc.f32, (), value)")
    dt = x.dtype
    if fn in ("exp", "log", "sqrt", "tanh") and not dt.is_float:
        raise TypeMismatch(f"`{fn}` needs a float tile, got {dt.name}", hint="tc.cast to a float type first")
    if fn in ("neg", "abs") and dt.is_bool:
        raise TypeMismatch(f"`{fn}` on a bool tile", hint="use ~ for logical not")
    if fn == "not" and not dt.is_bool:
        raise TypeMismatch("`~` needs a bool tile", hint="compare first")
    ix = x.use()
    loc = caller_loc()
    return emit_value(lambda v: ir.Unary(v, fn, ix, loc), x.type)


TileLike = Union[Tile, Idx, int, float, bool]
