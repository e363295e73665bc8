"""Capture-time handles for values: ``Tile`` (an SSA tile value) and ``Idx`` (an index).

Both overload Python's operators, so kernels read as ordinary arithmetic. Python
numbers mixed with tiles are weakly typed: they take the tile's dtype. An index mixed
with a tile becomes a scalar of the tile's dtype.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Callable, Union

import numpy as np

from . import ir
from .builder import Frame, active
from .dtypes import DType, dtype_of
from .errors import CaptureError, TypeMismatch, UnknownAttribute, caller_loc
from .index import IConst, IExpr, INot, cdiv as _icdiv, ibin
from .typing_rules import broadcast_types


# Python protocols with no meaning on capture-time values, with what to write instead
_NO_PROTOCOL = {
    "__float__": ("float()", "a capture-time value has no Python number; keep it a tile (tc.cast changes dtypes)"),
    "__complex__": ("complex()", "tiles have no complex dtype"),
    "__len__": ("len()", "read extents with .shape"),
    "__getitem__": ("[] indexing", "tiles are whole values: load the part you need with A.tile(...).load() or "
                    "reshape / reduce the tile"),
    "__setitem__": ("[] assignment", "tiles are immutable values: build a new one with tc.where(mask, new, old)"),
    "__contains__": ("`in`", "compare with == and reduce the result"),
    "__iter__": ("iteration", "use tile ops (reduce, reshape, ...) on the whole tile"),
    "__reversed__": ("reversed()", "use tile ops on the whole tile"),
    "__matmul__": ("`@`", "use tc.matmul(a, b) (or tc.mma for an accumulator)"),
    "__rmatmul__": ("`@`", "use tc.matmul(a, b) (or tc.mma for an accumulator)"),
    "__pow__": ("`**`", "multiply explicitly (x * x), or use tc.exp(y * tc.log(x))"),
    "__rpow__": ("`**`", "multiply explicitly, or use tc.exp(y * tc.log(x))"),
    "__lshift__": ("`<<`", "shifts are not tile ops: multiply by a power of two"),
    "__rlshift__": ("`<<`", "shifts are not tile ops: multiply by a power of two"),
    "__rshift__": ("`>>`", "shifts are not tile ops: floor-divide by a power of two"),
    "__rrshift__": ("`>>`", "shifts are not tile ops: floor-divide by a power of two"),
    "__xor__": ("`^`", "for bools write a != b"),
    "__rxor__": ("`^`", "for bools write a != b"),
    "__divmod__": ("divmod()", "write a // b and a % b"),
    "__rdivmod__": ("divmod()", "write a // b and a % b"),
    "__round__": ("round()", "there is no rounding tile op; tc.cast to an integer type truncates"),
    "__trunc__": ("math.trunc()", "tc.cast to an integer type truncates toward zero"),
    "__floor__": ("math.floor()", "there is no floor tile op on floats; use // on integer tiles"),
    "__ceil__": ("math.ceil()", "there is no ceil tile op on floats; use tc.cdiv on extents"),
    "__array__": ("conversion to a numpy array", "tiles exist only while the kernel is captured; tc.run returns "
                  "the arrays"),
}


def _refusal(kind: str, what: str, hint: str) -> Callable[..., Any]:
    def refuse(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise CaptureError(f"{what} is not defined on {kind}", hint=hint)
    return refuse


def _no_attribute(self: Any, name: str) -> Any:
    """``UnknownAttribute`` for a missing attribute (numpy-style methods name the tile op to use)."""
    if name.startswith("__"):
        raise AttributeError(name)  # protocol probes (copy, pickle, numpy) see a plain missing attribute
    raise UnknownAttribute(f"{type(self).__name__} values have no attribute {name!r}", hint=_numpy_hint(name))


def _refuse_protocols(cls: type, kind: str, keep: tuple[str, ...] = ()) -> type:
    """Give ``cls`` every method of ``_NO_PROTOCOL`` (but those it defines and ``keep``) as a refusal."""
    for name, (what, hint) in _NO_PROTOCOL.items():
        if name not in cls.__dict__ and name not in keep:
            setattr(cls, name, _refusal(kind, what, hint))
    cls.__getattr__ = _no_attribute  # type: ignore[attr-defined]
    cls.__array_ufunc__ = _array_ufunc  # type: ignore[attr-defined]
    cls.__array_function__ = _array_function  # type: ignore[attr-defined]
    return cls


# numpy ufuncs that are Python operators on capture values (a numpy scalar operand is fine)
_UFUNC_OPERATORS = {
    np.add: operator.add, np.subtract: operator.sub, np.multiply: operator.mul, np.true_divide: operator.truediv,
    np.floor_divide: operator.floordiv, np.remainder: operator.mod, np.less: operator.lt,
    np.less_equal: operator.le, np.greater: operator.gt, np.greater_equal: operator.ge, np.equal: operator.eq,
    np.not_equal: operator.ne,
}
# numpy names with a tile op of another name
_TC_NAME = {"absolute": "abs", "fabs": "abs", "fmax": "maximum", "fmin": "minimum", "dot": "matmul",
            "einsum": "mma", "sum": "reduce", "amax": "reduce", "amin": "reduce", "max": "reduce", "min": "reduce",
            "prod": "reduce", "zeros_like": "zeros", "full_like": "full", "astype": "cast"}
_TC_OPS = {"exp", "log", "sqrt", "tanh", "abs", "maximum", "minimum", "matmul", "mma", "reduce", "zeros", "full",
           "cast", "where", "reshape", "iota"}


def _numpy_hint(name: str) -> str:
    tc_name = _TC_NAME.get(name, name)
    if tc_name in _TC_OPS:
        return f"use tc.{tc_name}(...), the tile op"
    return "tiles are capture-time values, not arrays: use the tile ops (tc.exp, tc.where, tc.reduce, ...)"


def _array_ufunc(self: Any, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
    """numpy ufuncs on capture values: the Python operator for a numpy scalar operand, else a ``CaptureError``."""
    fn = _UFUNC_OPERATORS.get(ufunc)
    if fn is not None and method == "__call__" and not kwargs and len(inputs) == 2 \
            and all(isinstance(x, (Tile, Idx, np.generic)) for x in inputs):
        a, b = (x.item() if isinstance(x, np.generic) else x for x in inputs)
        return fn(a, b)
    if any(isinstance(x, np.ndarray) for x in inputs):
        raise CaptureError(f"numpy array operand of np.{ufunc.__name__} with a capture-time value",
                           hint="numpy arrays cannot enter a kernel: pass them as tensors and load tiles")
    raise CaptureError(f"numpy function np.{ufunc.__name__} on a capture-time value", hint=_numpy_hint(ufunc.__name__))


def _array_function(self: Any, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
    name = getattr(func, "__name__", str(func))
    raise CaptureError(f"numpy function np.{name} on a capture-time value", hint=_numpy_hint(name))


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

    def __float__(self) -> float:
        if isinstance(self.expr, IConst):
            return float(self.expr.value)
        raise CaptureError(f"index expression {self.expr} has no Python number at capture",
                           hint="it depends on sizes or coordinates; use it as an extent or origin")

    def __index__(self) -> int:
        if isinstance(self.expr, IConst):
            return self.expr.value
        raise CaptureError(f"index expression {self.expr} is not a compile-time constant",
                           hint="use it as an extent or origin instead of a Python int")

    def __repr__(self) -> str:
        return f"Idx({self.expr})"


_refuse_protocols(Idx, "index expressions", keep=("__array__",))


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
    if eb == IConst(0):
        raise CaptureError("tc.cdiv by zero", hint="the divisor (a block size?) must be positive, e.g. bm=4")
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
        b = active()
        label = b.value_labels.get(self.value.id)
        b.check_value(self.frame, f"{what} `{label}`" if label else f"{what} %{self.value.id}")
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
    def __int__(self): raise CaptureError("int() is not defined on tiles", hint=_NO_PROTOCOL["__float__"][1])  # noqa: E704
    def __index__(self): raise CaptureError("a tile is not an index", hint="data values cannot be used as indices or extents (static control only)")  # noqa: E704,E501


_refuse_protocols(Tile, "tiles")


def emit_value(op_factory, t: ir.TileType) -> Tile:
    """Create a result value of type ``t``, emit ``op_factory(value)`` and wrap it."""
    b = active()
    v = b.new_value(t)
    b.emit(op_factory(v))
    return Tile(v, b.top)


def scalar(value: Any, dtype: DType, role: str) -> Union[bool, int, float]:
    """``value`` as a Python element of ``dtype`` (``role`` says where it is used, for messages).

    bool takes True / False; the integer types take ints (and integral finite floats) within
    64 bits, wrapped to the width when stored; the float types take any number within the
    float range. Numpy scalars count as the numbers they hold."""
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        value = value.item()
    if not isinstance(value, (bool, int, float)):
        raise TypeMismatch(f"a {type(value).__name__} {role}", hint="use a Python int, float or bool")
    if dtype.is_bool:
        if not isinstance(value, bool):
            raise TypeMismatch(f"{value!r} {role}", hint="use True / False")
        return value
    if dtype.is_int:
        if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
            raise TypeMismatch(f"the float {value} {role}", hint="integers have no NaN, infinity or fraction: "
                               "pass an int, or cast the tile to a float type first")
        if not -2 ** 63 <= int(value) < 2 ** 64:
            raise TypeMismatch(f"the int {int(value)} {role} is beyond 64 bits", hint="pass a value of the dtype's range")
        return int(value)
    try:
        return float(value)
    except OverflowError:
        raise TypeMismatch(f"the int {value} {role} is beyond the float range", hint="pass a finite float") from None


def constant(value: Any, dtype: DType) -> Tile:
    """A rank-0 tile holding a Python scalar."""
    py = scalar(value, dtype, f"mixed with a {dtype.name} tile")
    loc = caller_loc()
    return emit_value(lambda v: ir.Full(v, py, loc), ir.TileType(dtype.name))


def coerce(x: Any, dtype: DType) -> Tile:
    """Turn a tile, index or Python scalar into a tile (scalars and indices take ``dtype``)."""
    if isinstance(x, Tile):
        return x
    if isinstance(x, np.generic) and x.dtype.kind in "biuf":
        x = x.item()  # a numpy scalar is the Python number it holds
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
