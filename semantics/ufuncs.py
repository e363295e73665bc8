"""The numpy functions behind the IR's elementwise operations and reducers (shared by both interpreters)."""
from typing import Any

import numpy as np

from .dtypes import DType

BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide, "floordiv": np.floor_divide,
    "mod": np.mod, "min": np.minimum, "max": np.maximum, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal, "and": np.logical_and, "or": np.logical_or,
}
UNARY = {"neg": np.negative, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "abs": np.abs,
         "not": np.logical_not}
MERGE = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum, "and": np.logical_and,
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
