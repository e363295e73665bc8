"""The numpy functions behind the IR's elementwise operations and reducers (shared by both interpreters).

Float ``min`` / ``max`` are IEEE 754-2019 ``minimum`` / ``maximum``: NaN if either operand is
NaN, ``min(+0, -0) = -0`` and ``max(+0, -0) = +0`` (in either operand order), otherwise the
smaller / larger value. They are associative and commutative, so every reduction order gives
the same value (NaN payloads aside). ``exp``, ``log``, ``sqrt`` and ``tanh`` on floats narrower
than f64 compute the f32 result (evaluated in f64 and rounded once to f32, which is the correctly
rounded f32 value but for f64 results within 2**-29 ulp of an f32 tie), then round once more to
the storage type (f16 / bf16) as C's ``(_Float16)expf(x)`` and ``tc_bf16(expf(x))`` do.
"""
from typing import Any, Callable, Optional

import numpy as np

from .dtypes import DType


class SignedZeroMinMax:
    """IEEE 754-2019 ``minimum`` (``negative_zero_wins``) or ``maximum`` with ufunc-like methods
    (call, ``at``, ``reduce``, ``accumulate``): numpy's NaN-propagating ``np.minimum`` /
    ``np.maximum``, then every float zero result gets its sign by the rule: for ``minimum`` -0 when
    any zero operand is -0, for ``maximum`` +0 when any zero operand is +0."""

    def __init__(self, base: np.ufunc, negative_zero_wins: bool) -> None:
        self.base = base
        self.neg = negative_zero_wins
        self.__name__ = base.__name__

    def _wins(self, x: np.ndarray) -> np.ndarray:
        """Where ``x`` is the zero the rule prefers (-0 for minimum, +0 for maximum)."""
        return (x == 0) & (np.signbit(x) == self.neg)

    def _sign(self, r: np.ndarray, zero_won: np.ndarray) -> np.ndarray:
        """``r`` with each zero given the sign the rule gives it (``zero_won``: the preferred zero took part)."""
        neg = zero_won if self.neg else ~zero_won
        return np.where(r == 0, np.where(neg, -0.0, 0.0).astype(r.dtype), r)

    def __call__(self, a: Any, b: Any, out: Optional[np.ndarray] = None) -> Any:
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype.kind != "f" and b.dtype.kind != "f":
            return self.base(a, b, out=out)
        won = self._wins(a) | self._wins(b)  # before ``out`` may overwrite an operand
        r = self._sign(np.asarray(self.base(a, b)), won)
        if out is None:
            return r
        np.copyto(out, r)
        return out

    def at(self, arr: np.ndarray, index: Any, values: np.ndarray) -> None:
        if arr.dtype.kind != "f":
            self.base.at(arr, index, values)
            return
        won = self._wins(arr)
        np.logical_or.at(won, index, self._wins(np.asarray(values)))
        self.base.at(arr, index, values)
        arr[...] = self._sign(arr, won)

    def reduce(self, items: np.ndarray, axis: int = 0, dtype: Any = None) -> np.ndarray:
        r = self.base.reduce(items, axis=axis, dtype=dtype)
        if items.dtype.kind != "f":
            return r
        return self._sign(np.asarray(r), np.logical_or.reduce(self._wins(items), axis=axis))

    def accumulate(self, items: np.ndarray, axis: int = 0, dtype: Any = None) -> np.ndarray:
        r = self.base.accumulate(items, axis=axis, dtype=dtype)
        if items.dtype.kind != "f":
            return r
        return self._sign(r, np.logical_or.accumulate(self._wins(items), axis=axis))


minimum = SignedZeroMinMax(np.minimum, negative_zero_wins=True)
maximum = SignedZeroMinMax(np.maximum, negative_zero_wins=False)


def _via_f64(fn: np.ufunc) -> Callable[[np.ndarray], np.ndarray]:
    """``fn`` on floats narrower than f64 evaluated in f64 and rounded once to f32 (to the input's
    dtype when it is f16: one more rounding, as C's ``(_Float16)fnf((float)x)``)."""
    def apply(x: Any) -> np.ndarray:
        x = np.asarray(x)
        if x.dtype.kind != "f" or x.dtype.itemsize >= 8:
            return fn(x)
        with np.errstate(all="ignore"):
            return fn(x.astype(np.float64)).astype(np.float32).astype(x.dtype)
    apply.__name__ = fn.__name__
    return apply


BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide, "floordiv": np.floor_divide,
    "mod": np.mod, "min": minimum, "max": maximum, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal, "and": np.logical_and, "or": np.logical_or,
}
UNARY = {"neg": np.negative, "exp": _via_f64(np.exp), "log": _via_f64(np.log), "sqrt": np.sqrt,
         "tanh": _via_f64(np.tanh), "abs": np.abs, "not": np.logical_not}
MERGE = {"add": np.add, "mul": np.multiply, "max": maximum, "min": minimum, "and": np.logical_and,
         "or": np.logical_or}


def identity(fn: str, dt: DType) -> Any:
    """The identity of reducer ``fn`` on ``dt`` (``-`` accumulates negated contributions with ``+``)."""
    if fn in ("add", "sub", "or"):
        return False if dt.is_bool else 0
    if fn in ("mul", "and"):
        return True if dt.is_bool else 1
    if dt.is_float:
        return -np.inf if fn == "max" else np.inf
    info = np.iinfo(dt.storage)
    return info.min if fn == "max" else info.max
