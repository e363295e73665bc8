"""Element types: names, numpy storage, and the rounding rules of the narrow floats.

bf16 has no numpy type: its values are stored in float32 arrays and rounded to the
nearest bf16 value (ties to even) after every operation, which is exactly "f32 compute
with round-to-nearest-even storage". Integer arithmetic wraps (two's complement).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import TilecertError


@dataclass(frozen=True)
class DType:
    """An element type; ``name`` is its identity (``f32``, ``i32``, ``bool``, ...)."""

    name: str

    @property
    def is_float(self) -> bool:
        return self.name in ("f16", "bf16", "f32", "f64")

    @property
    def is_int(self) -> bool:
        return self.name[0] in "iu"

    @property
    def is_bool(self) -> bool:
        return self.name == "bool"

    @property
    def storage(self) -> np.dtype:
        """The numpy dtype that holds values of this type."""
        return np.dtype(_STORAGE[self.name])

    @property
    def itemsize(self) -> int:
        return 2 if self.name == "bf16" else self.storage.itemsize

    def __repr__(self) -> str:
        return self.name


_STORAGE = {
    "bool": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
    "f16": "float16", "bf16": "float32", "f32": "float32", "f64": "float64",
}
DTYPES = {name: DType(name) for name in _STORAGE}
f16, bf16, f32, f64 = DTYPES["f16"], DTYPES["bf16"], DTYPES["f32"], DTYPES["f64"]
i8, i16, i32, i64, u8 = DTYPES["i8"], DTYPES["i16"], DTYPES["i32"], DTYPES["i64"], DTYPES["u8"]
bool_ = DTYPES["bool"]


def dtype_of(x: object) -> DType:
    """Look a dtype up by ``DType``, name, or numpy dtype."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str) and x in DTYPES:
        return DTYPES[x]
    try:
        npd = np.dtype(x)  # type: ignore[arg-type]
    except TypeError:
        npd = None
    for name, storage in _STORAGE.items():
        if npd is not None and name != "bf16" and np.dtype(storage) == npd:
            return DTYPES[name]
    raise TilecertError(f"unknown dtype {x!r}", hint=f"use one of {', '.join(DTYPES)}")


def round_bf16(a: np.ndarray) -> np.ndarray:
    """Round float32 values to the nearest bfloat16 (ties to even); NaN stays NaN."""
    a = np.asarray(a, dtype=np.float32)
    bits = a.view(np.uint32)
    rounded = (bits + (np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1)))) & np.uint32(0xFFFF0000)
    out = rounded.view(np.float32)
    return np.where(np.isnan(a), a, out)


def store_as(dt: DType, a: np.ndarray | float | int | bool) -> np.ndarray:
    """Convert computed values to the storage of ``dt``: integers wrap, bf16 rounds."""
    arr = np.asarray(a)
    if dt.is_int and arr.dtype.kind == "f":
        arr = np.trunc(np.nan_to_num(arr, nan=0.0, posinf=0.0, neginf=0.0))
        info = np.iinfo(dt.storage)
        span = float(info.max) - float(info.min) + 1.0
        arr = np.mod(arr - float(info.min), span) + float(info.min)
        return arr.astype(np.int64).astype(dt.storage)
    if dt.is_int and arr.dtype.kind in "iub":
        return arr.astype(dt.storage)  # numpy integer casts wrap modulo 2**bits
    out = arr.astype(dt.storage)
    return round_bf16(out) if dt.name == "bf16" else out
