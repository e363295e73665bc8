"""Checks on the arrays a caller hands to compiled code, made before any native code runs.

Native code reads and writes raw memory: an array it is given must be a numpy ndarray of the
tensor's storage dtype in native byte order, of the tensor's rank, C-contiguous and aligned to
its element size; an array the kernel writes in place must also be writable (a read-only
array, a view of immutable ``bytes`` or a read-only ``np.memmap`` would be written through, or
fault). Each violation is an ``InputError`` naming the argument.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tilecert.semantics.errors import InputError, Loc


def check_array(name: str, arr: Any, storage: np.dtype, declared: str, rank: int, loc: Loc,
                writable: bool = False) -> np.ndarray:
    """``arr`` itself when native code may use it as tensor ``name`` (``InputError`` otherwise)."""
    if not isinstance(arr, np.ndarray):
        raise InputError(f"{name} must be a numpy array, got {type(arr).__name__}", loc, "use np.asarray(...)")
    if not arr.dtype.isnative:
        raise InputError(f"{name} has non-native byte order ({arr.dtype.str})", loc,
                         f"pass {name}.astype({arr.dtype.newbyteorder('=').name!r})")
    if arr.dtype != storage:
        raise InputError(f"{name} has dtype {arr.dtype}; the kernel declares {declared}", loc,
                         f"pass {name}.astype(np.{storage.name})")
    if arr.ndim != rank:
        raise InputError(f"{name} has rank {arr.ndim}; the kernel declares rank {rank}", loc,
                         f"pass a {rank}-d array")
    if not arr.flags.c_contiguous:
        raise InputError(f"{name} is not C-contiguous", loc, f"pass np.ascontiguousarray({name})")
    if not arr.flags.aligned:
        raise InputError(f"{name} is not aligned to its {arr.dtype.itemsize}-byte elements", loc,
                         f"pass {name}.copy() (an aligned copy)")
    if writable and not arr.flags.writeable:
        raise InputError(f"{name} is read-only (a read-only array, memmap or a view of bytes) and the kernel "
                         "writes it in place", loc, f"pass a writable array, e.g. {name}.copy(), or call the kernel "
                         "(which returns new arrays) instead of run_in_place")
    return arr
