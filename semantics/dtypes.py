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
        return _NP[self.name]

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


_FLOAT_RANK = {"f16": 1, "bf16": 1, "f32": 2, "f64": 3}


def widens(src: object, dst: object) -> bool:
    """``dst`` holds every value of ``src`` exactly (a conversion to it and back is the identity): the same
    dtype, or a float widening f16 / bf16 -> f32 / f64, f32 -> f64. Never a narrowing, never between f16 and
    bf16, never an integer / float mix."""
    a, b = dtype_of(src).name, dtype_of(dst).name
    return a == b or (a in _FLOAT_RANK and b in _FLOAT_RANK and _FLOAT_RANK[a] < _FLOAT_RANK[b])


def round_bf16(a: np.ndarray) -> np.ndarray:
    """Round values to the nearest bfloat16 (ties to even), returned in float32; NaN stays NaN.

    float32 input rounds directly. Wider input (float64, wide integers) first goes to
    float32 with round-to-odd, so the two roundings compose to one correct rounding.
    """
    a = np.asarray(a)
    if a.dtype != np.float32:
        a = _to_f32_odd(a) if (a.dtype.kind == "f" and a.dtype.itemsize > 4) or \
            (a.dtype.kind in "iu" and a.dtype.itemsize >= 4) else a.astype(np.float32)
    bits = a.view(np.uint32)
    r = bits >> np.uint32(16)
    r &= np.uint32(1)
    r += np.uint32(0x7FFF)
    r += bits
    r &= np.uint32(0xFFFF0000)
    out = np.asarray(r).view(np.float32)
    nan = np.isnan(a)
    if nan.any():
        out = np.where(nan, a, out)
    return out


def _to_f32_odd(a: np.ndarray) -> np.ndarray:
    """float32 from wider values by round-to-odd (truncate, then set the last bit if inexact)."""
    wide = a.astype(np.float64)
    f = wide.astype(np.float32)
    back = f.astype(np.float64)
    inexact = (back != wide) & ~np.isnan(wide)
    if not inexact.any():
        return f
    bits = f.view(np.uint32).copy()
    over = inexact & (np.abs(back) > np.abs(wide))
    bits[over] -= np.uint32(1)  # the magnitude below: truncation toward zero
    bits[inexact] |= np.uint32(1)
    return bits.view(np.float32)


_NP = {name: np.dtype(s) for name, s in _STORAGE.items()}
_IINFO = {name: np.iinfo(_NP[name]) for name in _STORAGE if name[0] in "iu"}


def store_as(dt: DType, a: np.ndarray | float | int | bool) -> np.ndarray:
    """Convert computed values to the storage of ``dt``: integers wrap, bf16 rounds.

    Returns ``a`` itself (no copy) when it already has the storage dtype (and ``dt`` is
    not bf16): interpreter values are never written in place.
    """
    arr = np.asarray(a)
    name = dt.name
    if name == "bf16":
        return round_bf16(arr)
    st = _NP[name]
    kind = arr.dtype.kind
    if arr.dtype == st:
        return arr
    if kind == "f" and name in _IINFO:
        # truncate toward zero (NaN and infinities give 0), then wrap modulo 2**bits; all
        # in float64, where fmod and the one correcting step by the span are exact
        w = np.trunc(np.nan_to_num(arr.astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0))
        info = _IINFO[name]
        lo, span = float(info.min), 2.0 ** (8 * st.itemsize)
        w = np.fmod(w, span)
        w = np.where(w >= lo + span, w - span, w)
        w = np.where(w < lo, w + span, w)
        return w.astype(np.int64).astype(st)
    return arr.astype(st)  # numpy integer casts wrap modulo 2**bits
