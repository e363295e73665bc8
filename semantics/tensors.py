"""Tensor arguments, views, scalar descent and explicit memories."""
from __future__ import annotations

from typing import Any, Optional, Sequence

from . import ir
from .builder import MemInfo, active
from .dtypes import DType, dtype_of
from .errors import CaptureError, TypeMismatch, caller_loc
from .index import IConst, IExpr
from .tileops import _shape_type, resolve_dim
from .typing_rules import store_perm
from .values import Idx, Tile, coerce, emit_value, index_expr


def _check_bounds(bounds: str) -> str:
    if bounds not in ir.BOUNDS:
        raise CaptureError(f"unknown bounds policy {bounds!r}", hint="use 'zero' or 'assume'")
    return bounds


class TensorRef:
    """A kernel's tensor argument (or a retyped view of it from ``with_dims``)."""

    def __init__(self, name: str, dtype: DType, dims: tuple[ir.Dim, ...], shape: tuple[IExpr, ...]) -> None:
        self.name = name
        self.dtype = dtype
        self.dims = dims
        self._shape = shape

    @property
    def shape(self) -> tuple[Idx, ...]:
        return tuple(Idx(s) for s in self._shape)

    @property
    def rank(self) -> int:
        return len(self.dims)

    def dim(self, axis: int) -> ir.Dim:
        """The Dim handle of ``axis``."""
        if not isinstance(axis, int) or isinstance(axis, bool) or not 0 <= axis < self.rank:
            raise CaptureError(f"{self.name}.dim({axis!r}): the rank-{self.rank} tensor has axes 0 .. {self.rank - 1}",
                               hint=f"pick an axis in 0 .. {self.rank - 1}")
        return self.dims[axis]

    def with_dims(self, *dims: Any) -> "TensorRef":
        """The same tensor with other dim identities (a checked retyping, no memory op)."""
        if len(dims) != self.rank:
            raise CaptureError(f"with_dims needs {self.rank} dims for {self.name}, got {len(dims)}",
                               hint="give one dim per axis")
        ds = tuple(resolve_dim(d) for d in dims)
        if len(set(ds)) != len(ds):
            raise CaptureError("with_dims: dims must be distinct", hint="use one dim per axis")
        return TensorRef(self.name, self.dtype, ds, self._shape)

    def _origin(self, origin: Any, what: str) -> tuple[IExpr, ...]:
        if not isinstance(origin, (tuple, list)):
            origin = (origin,)
        if len(origin) != self.rank:
            raise CaptureError(f"{what} of {self.name} needs {self.rank} coordinates, got {len(origin)}",
                               hint="one coordinate per tensor axis")
        return tuple(index_expr(o, f"{what} coordinate") for o in origin)

    def tile(self, origin: Sequence[Any], shape: Sequence[Any], bounds: str = "zero") -> "View":
        """The box of ``shape`` at ``origin`` (no memory effect until load / store)."""
        org = self._origin(origin, "tile origin")
        t = _shape_type(self.dtype, shape if isinstance(shape, (tuple, list)) else (shape,), None)
        if t.rank != self.rank:
            raise CaptureError(f"tile shape of rank {t.rank} for the rank-{self.rank} tensor {self.name}",
                               hint="one extent per tensor axis")
        return View(self, org, t.shape, _check_bounds(bounds), keep_rank=True)

    def at(self, *index: Any, bounds: str = "zero") -> "View":
        """Scalar descent: the element at ``index``."""
        org = self._origin(tuple(index), "element index")
        return View(self, org, tuple(IConst(1) for _ in org), _check_bounds(bounds), keep_rank=False)

    def __getitem__(self, key: Any) -> Any:
        raise CaptureError("tensors are not indexed with []", hint="use A.tile(origin, shape).load() or A.at(i, j).load()")

    def __setitem__(self, key: Any, value: Any) -> None:
        raise CaptureError("assignment into a tensor is not a store", hint="use A.tile(origin, shape).store(tile)")


class View:
    """A box of a tensor; ``load`` reads a snapshot, ``store`` writes (bounds per policy)."""

    def __init__(self, tensor: TensorRef, origin: tuple[IExpr, ...], extents: tuple[IExpr, ...], bounds: str,
                 keep_rank: bool) -> None:
        self.tensor = tensor
        self.origin = origin
        self.extents = extents
        self.bounds = bounds
        self.keep_rank = keep_rank

    def load(self, fallback: Any = None) -> Tile:
        """Load the box; out-of-bounds cells read 0, or ``fallback`` when given."""
        tr = self.tensor
        fb = None
        if fallback is not None:
            ft = coerce(fallback, tr.dtype)
            if ft.type != ir.TileType(tr.dtype.name):
                raise TypeMismatch("a load fallback must be a scalar of the tensor's dtype", hint="pass a number")
            fb = ft.use("fallback")
        if self.keep_rank:
            t = ir.TileType(tr.dtype.name, tr.dims, self.extents)
        else:
            t = ir.TileType(tr.dtype.name)
        loc = caller_loc()
        return emit_value(lambda v: ir.ViewLoad(v, tr.name, self.origin, self.extents, self.bounds, fb, loc), t)

    def store(self, value: Any) -> None:
        """Write ``value`` (a tile of the box's shape, or a scalar) into the box."""
        tr = self.tensor
        b = active()
        tile = coerce(value, tr.dtype)
        if tile.dtype != tr.dtype:
            raise TypeMismatch(f"store of a {tile.dtype.name} tile into the {tr.dtype.name} tensor {tr.name}",
                               hint=f"tc.cast(x, tc.{tr.dtype.name}) first")
        perm = store_perm(tile.type, tr.dims, self.extents, f"store into {tr.name}")
        iv = tile.use("stored value")
        b.written.add(tr.name)
        b.emit(ir.ViewStore(tr.name, self.origin, self.extents, iv, perm, self.bounds, caller_loc()))


class Memory:
    """An explicit memory: one allocation per instance of the nearest enclosing parallel."""

    def __init__(self, info: MemInfo) -> None:
        self.info = info

    def store(self, value: Any) -> None:
        b = active()
        info = self.info
        if not info.owner.open:
            raise CaptureError("memory used outside the scope that owns it", hint="allocate it in this scope")
        tile = coerce(value, dtype_of(info.type.dtype))
        if tile.type.dtype != info.type.dtype or len(tile.type.shape) != len(info.type.shape) or any(
                a != c for a, c in zip(tile.type.shape, info.type.shape)):
            raise TypeMismatch(f"memory store requires a tile of the memory's type {info.type}, got {tile.type}",
                               hint="store a tile with the same dtype and extents")
        if b.top.nearest_parallel() is not info.owner:
            raise CaptureError("writes to ancestor memory from a child parallel are not independent",
                               hint="allocate the memory inside the child parallel, or store from the owner's scope")
        iv = tile.use("stored value")
        b.emit(ir.MemStore(info.mem, iv, caller_loc()))
        b.top.stored_mems.add(info.mem)

    def load(self) -> Tile:
        b = active()
        info = self.info
        if not info.owner.open:
            raise CaptureError("memory used outside the scope that owns it", hint="allocate it in this scope")
        if not any(info.mem in f.stored_mems for f in b.frames):
            raise CaptureError("memory load requires a definite preceding store",
                               hint="store before loading; a store inside a loop that may run zero times does not count")
        loc = caller_loc()
        return emit_value(lambda v: ir.MemLoad(v, info.mem, loc), ir.TileType(info.type.dtype, info.type.dims,
                                                                               info.type.shape))


def memory(dtype: Any, shape: Sequence[Any], scope: str = "auto", dims: Optional[Sequence[Any]] = None) -> Memory:
    """Allocate a memory of ``shape`` owned by the nearest enclosing parallel instance."""
    if scope not in ir.MEMORY_SCOPES:
        raise CaptureError(f"unknown memory scope {scope!r}", hint=f"use one of {', '.join(ir.MEMORY_SCOPES)}")
    b = active()
    t = _shape_type(dtype, shape if isinstance(shape, (tuple, list)) else (shape,), dims)
    mem = b.new_mem()
    owner = b.top.nearest_parallel()
    assert owner is not None
    info = MemInfo(mem, t, owner, caller_loc())
    b.mems[mem] = info
    b.emit(ir.Alloc(mem, t, scope, info.loc))
    return Memory(info)
