"""Bounds on what a request may ask for: sizes, seeds and memory.

- A size is a Python or numpy integer (not a bool, not a float) in ``0 .. 2**63 - 1`` (int64,
  the index type of every backend).
- A seed is a Python or numpy integer (not a bool) in ``0 .. 2**64 - 1``.
- One allocation of an interpreter, a runner or the differential harness may hold at most
  ``max_bytes()`` bytes: ``MAX_BYTES`` when set (in this module), else ``$TILECERT_MAX_BYTES``,
  else 16 GiB. A larger request is a ``ResourceError`` before numpy is asked for the memory.
"""
from __future__ import annotations

import math
import os
from typing import Any, Optional, Sequence

import numpy as np

from .errors import ExecutionError, InputError, Loc, ResourceError, TilecertError
from .jsondata import INT64

DEFAULT_MAX_BYTES = 16 * 2 ** 30
MAX_BYTES: Optional[int] = None  # set to override $TILECERT_MAX_BYTES in this process
ENV = "TILECERT_MAX_BYTES"


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_size(name: str, value: Any, loc: Optional[Loc] = None,
               error: type[TilecertError] = InputError) -> int:
    """``value`` as an int when it is a valid size (``error`` otherwise)."""
    if not _is_int(value):
        raise error(f"size {name} must be an int, got {type(value).__name__} {value!r}", loc,
                    f"pass an int, e.g. {name}=64")
    if not 0 <= int(value) <= INT64[1]:
        raise error(f"size {name} must be in 0 .. 2**63 - 1 (int64), got {int(value)}", loc,
                    "sizes are int64 in every backend")
    return int(value)


def check_seed(seed: Any, loc: Optional[Loc] = None) -> int:
    """``seed`` as an int when it is a valid seed (``InputError`` otherwise)."""
    if not _is_int(seed) or not 0 <= int(seed) < 2 ** 64:
        raise InputError(f"seed must be an int in 0 .. 2**64 - 1, got {type(seed).__name__} {seed!r}", loc,
                         "pass a non-negative int, e.g. seed=0")
    return int(seed)


def max_bytes() -> int:
    """The allocation bound in bytes now (see the module doc)."""
    if MAX_BYTES is not None:
        return MAX_BYTES
    text = os.environ.get(ENV)
    if text is None:
        return DEFAULT_MAX_BYTES
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise InputError(f"${ENV} must be a non-negative number of bytes, got {text!r}", hint=f"e.g. {ENV}=8589934592")
    return value


def check_allocation(shape: Sequence[int], itemsize: int, what: str, loc: Optional[Loc] = None) -> None:
    """Refuse an array of ``shape`` with a negative extent (``ExecutionError``: such an allocation has no
    meaning) or with ``itemsize``-byte elements beyond ``max_bytes()`` (``ResourceError``)."""
    if any(int(s) < 0 for s in shape):
        raise ExecutionError(f"{what} has a negative extent: shape {tuple(int(s) for s in shape)}", loc,
                             "every allocation's extent must be >= 0 at these sizes (the checker's bounds "
                             "obligation proves it)")
    need = math.prod(int(s) for s in shape) * itemsize
    bound = max_bytes()
    if need > bound:
        raise ResourceError(f"{what} of shape {tuple(int(s) for s in shape)} needs {need:,} bytes, over the bound of "
                            f"{bound:,}", loc, f"use smaller sizes, or raise the bound (${ENV} or "
                            "tilecert.semantics.limits.MAX_BYTES)")


def allocatable(shape: tuple[int, ...], itemsize: int, what: str, loc: Optional[Loc] = None) -> tuple[int, ...]:
    """``shape`` itself once ``check_allocation`` accepts it (for use inline where arrays are made)."""
    check_allocation(shape, itemsize, what, loc)
    return shape
