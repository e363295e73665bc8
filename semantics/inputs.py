"""Input binding: the arrays and sizes a kernel runs on, checked once for every runner.

A size gets its value from, in this order: an explicit size argument (a known size name,
checked by ``limits.check_size``), the sizes a schedule binds, then each tensor axis whose
declared extent is that size. Every later source must agree with the first one; a
disagreement is an ``InputError`` naming both sources. The interpreters (``tc.run``,
``Schedule.run``), the differential harness and the C runner all bind through here.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from . import ir
from .dtypes import dtype_of, store_as
from .errors import InputError, Loc
from .limits import check_size


def bind_sizes(kernel: str, size_names: Sequence[str], tensors: Sequence[Any], arrays: Mapping[str, np.ndarray],
               explicit: Mapping[str, Any], loc: Loc, bound: Mapping[str, int] | Sequence[tuple[str, int]] = ()
               ) -> dict[str, int]:
    """Every size value (see the module doc). ``tensors`` have ``name`` and ``shape`` (the extent
    names per axis); ``arrays`` are the checked arrays by tensor name."""
    sizes: dict[str, int] = {}
    where: dict[str, str] = {}

    def bind(name: str, value: int, origin: str) -> None:
        if name in sizes and sizes[name] != value:
            raise InputError(f"size {name} is {sizes[name]} from {where[name]} but {value} from {origin}", loc,
                             "tensors that share a dim name must agree on its extent, and with the sizes given")
        sizes.setdefault(name, value)
        where.setdefault(name, origin)

    for name, value in explicit.items():
        if name not in size_names:
            raise InputError(f"unknown size or argument {name!r} for kernel {kernel}", loc,
                             f"tensors are {[t.name for t in tensors]}, sizes are {list(size_names)}")
        bind(name, check_size(name, value, loc), "the explicit size")
    for name, value in (bound.items() if isinstance(bound, Mapping) else bound):
        bind(name, value, "the schedule")
    for t in tensors:
        arr = arrays[t.name]
        if arr.ndim != len(t.shape):
            raise InputError(f"{t.name} has rank {arr.ndim}; the kernel declares rank {len(t.shape)}", loc,
                             f"pass a {len(t.shape)}-d array")
        for axis, s in enumerate(t.shape):
            bind(str(s), int(arr.shape[axis]), f"{t.name} axis {axis}")
    return sizes


def take_arrays(tensors: Sequence[Any], kwargs: Mapping[str, Any], loc: Loc,
                check: Callable[[Any, Any], np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Each tensor's array from the keyword arguments, through ``check(tensor, value)``, and the
    arguments left (sizes); a missing tensor is an ``InputError``."""
    rest = dict(kwargs)
    arrays: dict[str, np.ndarray] = {}
    for t in tensors:
        if t.name not in rest:
            raise InputError(f"missing array for tensor {t.name}", loc, f"pass {t.name}=numpy_array")
        arrays[t.name] = check(t, rest.pop(t.name))
    return arrays, rest


def prepare_inputs(p: ir.Program, kwargs: Mapping[str, Any], bound: Mapping[str, int] | None = None
                   ) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """The arrays by tensor name (written tensors copied, bf16 values rounded; read-only ones are the
    caller's arrays) and every size, from keyword arguments; ``bound``: sizes a schedule binds."""
    def check(t: ir.TensorDecl, arr: Any) -> np.ndarray:
        if not isinstance(arr, np.ndarray):
            raise InputError(f"{t.name} must be a numpy array, got {type(arr).__name__}", p.loc, "use np.asarray(...)")
        dt = dtype_of(t.dtype)
        if arr.dtype != dt.storage:
            raise InputError(f"{t.name} has dtype {arr.dtype}; the kernel declares {t.dtype}", p.loc,
                             f"pass {t.name}.astype(np.{dt.storage})")
        return store_as(dt, np.array(arr, copy=True) if t.written else arr)

    arrays, rest = take_arrays(p.tensors, kwargs, p.loc, check)
    return arrays, bind_sizes(p.name, p.sizes, p.tensors, arrays, rest, p.loc, bound or {})
