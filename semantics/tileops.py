"""The tile operations of the DSL (``tc.zeros``, ``tc.where``, ``tc.reduce``, ``tc.mma``, ...)."""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, Union

from . import ir
from .builder import Frame, active
from .dtypes import DType, dtype_of
from .errors import CaptureError, TypeMismatch, caller_loc
from .index import CMP_OPS, IBin, IConst, INot
from .typing_rules import broadcast_types, mma_spec
from .values import Idx, Tile, binary, coerce, constant, emit_value, index_expr, scalar, unary

DimSpec = Union[ir.Dim, str]


def _shape_type(dtype: Any, shape: Sequence[Any], dims: Optional[Sequence[DimSpec]]) -> ir.TileType:
    dt = dtype_of(dtype)
    if isinstance(shape, (int, Idx)):
        shape = (shape,)
    exts = tuple(index_expr(s, "tile extent") for s in shape)
    for e in exts:
        if isinstance(e, IConst) and e.value < 0:
            raise CaptureError(f"negative tile extent {e.value}", hint="extents are >= 0")
    if dims is None:
        ds = ir.positional_dims(len(exts))
    else:
        if len(dims) != len(exts):
            raise CaptureError(f"{len(dims)} dims for a shape of rank {len(exts)}", hint="give one dim per extent")
        ds = tuple(resolve_dim(d) for d in dims)
        if len(set(ds)) != len(ds):
            raise CaptureError("shape axes must be unique", hint="use distinct dims")
    return ir.TileType(dt.name, ds, exts)


def resolve_dim(d: DimSpec) -> ir.Dim:
    """A Dim handle, or the kernel-local dim with that label."""
    if isinstance(d, ir.Dim):
        return d
    if isinstance(d, str):
        return active().dim(d)
    raise CaptureError(f"not a dim: {d!r}", hint="pass a label string or a Dim from tc.dims / tensor.dim(i)")


def dims(*labels: str) -> tuple[ir.Dim, ...]:
    """Fresh kernel-local dims (labels are for diagnostics only)."""
    b = active()
    return tuple(b.fresh_dim(lbl) for lbl in labels)


def full(dtype: Any, shape: Sequence[Any], value: Union[int, float, bool], dims: Optional[Sequence[DimSpec]] = None) -> Tile:
    """A tile of ``shape`` filled with ``value``."""
    t = _shape_type(dtype, shape, dims)
    py = scalar(value, dtype_of(dtype), f"as a {dtype_of(dtype).name} fill value")
    loc = caller_loc()
    return emit_value(lambda v: ir.Full(v, py, loc), t)


def zeros(dtype: Any, shape: Sequence[Any], dims: Optional[Sequence[DimSpec]] = None) -> Tile:
    return full(dtype, shape, False if dtype_of(dtype).is_bool else 0, dims)


def iota(dtype: Any, shape: Sequence[Any], axis: int = 0, dims: Optional[Sequence[DimSpec]] = None) -> Tile:
    """``out[q] = q[axis]``."""
    t = _shape_type(dtype, shape, dims)
    if not 0 <= axis < t.rank:
        raise CaptureError(f"iota axis {axis} out of range for rank {t.rank}", hint="pick an axis of the shape")
    loc = caller_loc()
    return emit_value(lambda v: ir.Iota(v, axis, loc), t)


def cast(x: Any, dtype: Any) -> Tile:
    dt = dtype_of(dtype)
    if not isinstance(x, Tile):
        x = coerce(x, dt)
        if x.dtype == dt:
            return x
    ix = x.use()
    loc = caller_loc()
    t = ir.TileType(dt.name, x.type.dims, x.type.shape)
    return emit_value(lambda v: ir.Cast(v, ix, loc), t)


def _pick_dtype(*xs: Any) -> DType:
    for x in xs:
        if isinstance(x, Tile):
            return x.dtype
    raise TypeMismatch("at least one operand must be a tile", hint="wrap a number with tc.full(dtype, (), value)")


def where(cond: Any, a: Any, b: Any) -> Tile:
    """``cond ? a : b`` elementwise with broadcasting; ``cond`` must be bool."""
    dt = _pick_dtype(a, b)
    ta, tb = coerce(a, dt), coerce(b, dt)
    if ta.dtype != tb.dtype:
        raise TypeMismatch(f"where of {ta.dtype.name} and {tb.dtype.name}", hint="cast one branch")
    if isinstance(cond, Idx):
        cond = _pred_tile(cond)
    tc_ = coerce(cond, dtype_of("bool"))
    if not tc_.dtype.is_bool:
        raise TypeMismatch(f"where needs a bool condition, got {tc_.dtype.name}", hint="compare to get a bool tile")
    t = broadcast_types(dt.name, [ta.type, tb.type, tc_.type], "where")
    ic, ia, ib = tc_.use(), ta.use(), tb.use()
    loc = caller_loc()
    return emit_value(lambda v: ir.Select(v, ic, ia, ib, loc), t)


def _pred_tile(x: Idx) -> Tile:
    """A bool scalar from an index comparison such as ``k.index() == 0``."""
    if not (isinstance(x.expr, INot) or (isinstance(x.expr, IBin) and x.expr.op in CMP_OPS)):
        raise TypeMismatch(f"where needs a condition, got the index {x.expr}", hint="compare the index, e.g. i < n")
    e = active().check_index(x.expr)
    loc = caller_loc()
    return emit_value(lambda v: ir.IndexValue(v, e, loc), ir.TileType("bool"))


def exp(x: Tile) -> Tile: return unary("exp", x)  # noqa: E704
def log(x: Tile) -> Tile: return unary("log", x)  # noqa: E704
def sqrt(x: Tile) -> Tile: return unary("sqrt", x)  # noqa: E704
def tanh(x: Tile) -> Tile: return unary("tanh", x)  # noqa: E704
def abs(x: Tile) -> Tile: return unary("abs", x)  # noqa: E704,A001


def minimum(a: Any, b: Any) -> Tile:
    dt = _pick_dtype(a, b)
    return binary("min", coerce(a, dt), coerce(b, dt))


def maximum(a: Any, b: Any) -> Tile:
    dt = _pick_dtype(a, b)
    return binary("max", coerce(a, dt), coerce(b, dt))


def _check_policy(policy: str) -> str:
    if policy not in ir.POLICIES:
        raise CaptureError(f"unknown reduction policy {policy!r}", hint=f"use one of {', '.join(ir.POLICIES)}")
    return policy


def reduce(x: Tile, axes: Any, op: Union[str, Callable[[Tile, Tile], Tile]] = "add",
           policy: str = "unordered_tree", init: Any = None) -> Tile:
    """Reduce ``x`` over ``axes`` (ints or dims) with add / max / min / mul or a custom function.

    A custom binary function needs ``init`` (the seed). The result drops the reduced dims.
    """
    if not isinstance(x, Tile):
        raise TypeMismatch("tc.reduce takes a tile", hint="load or build a tile first")
    _check_policy(policy)
    if isinstance(axes, (int, ir.Dim, str)):
        axes = (axes,)
    picked: list[int] = []
    for a in axes:
        if isinstance(a, int):
            if not -x.type.rank <= a < x.type.rank:
                raise CaptureError(f"reduce axis {a} out of range for rank {x.type.rank}", hint="pick an axis of x")
            picked.append(a % x.type.rank)
        else:
            d = resolve_dim(a)
            if d not in x.dims:
                raise CaptureError(f"reduce dim {d} is not a dim of the tile {x.type}", hint="reduce one of its dims")
            picked.append(x.dims.index(d))
    if len(set(picked)) != len(picked):
        raise CaptureError("reduce axes repeat", hint="name each axis once")
    keep = [i for i in range(x.type.rank) if i not in picked]
    t = ir.TileType(x.type.dtype, tuple(x.dims[i] for i in keep), tuple(x.type.shape[i] for i in keep))
    fn_block = None
    if callable(op):
        combiner = "custom"
        fn_block = _capture_combiner(op, x)
        if init is None:
            raise CaptureError("a custom reducer needs init= (the seed)", hint="e.g. tc.reduce(x, 0, f, init=0)")
    elif op in ("add", "max", "min", "mul"):
        combiner = op
        if x.dtype.is_bool:
            raise TypeMismatch(f"reduce {op} over a bool tile", hint="cast to an integer type first")
    else:
        raise CaptureError(f"unknown reducer {op!r}", hint="use add, max, min, mul or a binary function")
    tinit = coerce(init, x.dtype) if init is not None else None
    if tinit is not None and tinit.type != ir.TileType(x.type.dtype):
        raise TypeMismatch("reduce init must be a scalar of the tile's dtype", hint="pass a number")
    iinit = tinit.use() if tinit is not None else None
    ixx = x.use()
    loc = caller_loc()
    return emit_value(lambda v: ir.ReduceExpr(v, ixx, tuple(picked), combiner, policy, iinit, fn_block, loc), t)


def _capture_combiner(fn: Callable[[Tile, Tile], Tile], x: Tile) -> ir.Block:
    b = active()
    frame = b.push(Frame("fn", None, caller_loc()))
    st = ir.TileType(x.type.dtype)
    args = (b.new_value(st), b.new_value(st))
    frame.args = args
    out = fn(Tile(args[0], frame), Tile(args[1], frame))
    if not isinstance(out, Tile) or out.type != st:
        b.pop(frame)
        raise TypeMismatch("a custom reducer must return a scalar tile of its operands' dtype",
                           hint="e.g. lambda a, b: a - b")
    for op in frame.ops:
        if not isinstance(op, (ir.Full, ir.Cast, ir.Unary, ir.Binary, ir.Select)):
            b.pop(frame)
            raise CaptureError("a custom reducer body must be pure elementwise arithmetic",
                               hint="no loads, stores, memories or regions inside a reducer")
    yid = out.use()
    b.pop(frame)
    return ir.Block(args, tuple(frame.ops), (yid,))


def mma(a: Tile, b: Tile, c: Tile) -> Tile:
    """``c + a @ b`` with roles from dim identity; the result has c's type."""
    for name, t in (("a", a), ("b", b), ("c", c)):
        if not isinstance(t, Tile):
            raise TypeMismatch(f"mma operand {name} must be a tile", hint="mma(a, b, acc)")
    if a.dtype != b.dtype and not (a.dtype.is_float and b.dtype.is_float):
        raise TypeMismatch(f"mma of {a.dtype.name} and {b.dtype.name}", hint="cast a and b to one dtype")
    if c.dtype.is_bool:
        raise TypeMismatch("mma accumulator is bool", hint="use a numeric accumulator")
    spec = mma_spec(a.type, b.type, c.type)
    ia, ib, ic = a.use(), b.use(), c.use()
    loc = caller_loc()
    return emit_value(lambda v: ir.Mma(v, ia, ib, ic, spec, loc), c.type)


def matmul(a: Tile, b: Tile) -> Tile:
    """``mma(a, b, zeros)`` with a positional [m, n] accumulator of a's dtype."""
    return mma(a, b, zeros(a.dtype, (a.shape[-2], b.shape[-1])))


def reshape(x: Tile, shape: Sequence[Any], dims: Optional[Sequence[DimSpec]] = None) -> Tile:
    """The same elements in row-major order with a new shape (extents must multiply out)."""
    t = _shape_type(x.dtype, shape, dims)
    if all(isinstance(s, IConst) for s in (*t.shape, *x.type.shape)):
        n_old = 1
        for s in x.type.shape:
            n_old *= s.value
        n_new = 1
        for s in t.shape:
            n_new *= s.value
        if n_old != n_new:
            raise TypeMismatch(f"reshape of {n_old} elements into {n_new}", hint="keep the element count")
    ix = x.use()
    loc = caller_loc()
    return emit_value(lambda v: ir.Reshape(v, ix, loc), t)


__all__ = ["full", "zeros", "iota", "cast", "where", "exp", "log", "sqrt", "tanh", "abs", "minimum", "maximum",
           "reduce", "mma", "matmul", "reshape", "dims", "constant"]
