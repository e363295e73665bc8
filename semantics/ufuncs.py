"""The numpy functions behind the IR's elementwise operations and reducers (shared by both interpreters)."""
import numpy as np

BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide, "floordiv": np.floor_divide,
    "mod": np.mod, "min": np.minimum, "max": np.maximum, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal, "and": np.logical_and, "or": np.logical_or,
}
UNARY = {"neg": np.negative, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "abs": np.abs,
         "not": np.logical_not}
MERGE = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum, "and": np.logical_and,
         "or": np.logical_or}
