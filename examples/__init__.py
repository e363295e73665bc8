"""The example kernels, and a registry that tests and the demo iterate.

``EXAMPLES`` maps a name to an ``Example`` (a 5-tuple, so ``kernel, make_inputs,
reference, output, exact = EXAMPLES[name]`` works):

- ``kernel``: the ``@tc.kernel``;
- ``make_inputs(rng, **sizes)``: a dict of keyword arguments for ``tc.run`` (every tensor,
  outputs as zeros, and any config value the sizes require); ``sizes`` overrides the
  default extent of each size parameter by name (``M=5, N=7``);
- ``reference(inputs)``: the expected result, computed independently with float64 numpy;
  an array, or a tuple of arrays when ``output`` is a tuple of names;
- ``output``: the name of the tensor the kernel writes, or a tuple of names;
- ``exact``: True when the result must match the reference exactly (integer kernels).

``output_names(entry)`` and ``expected(entry, inputs)`` give the uniform view: a tuple of
names and a dict name -> float64 array. The folder is installed as the package
``tilecert.examples``; ``source_path(name)`` is the file of example module ``name`` wherever
it is installed (``tilecert check`` takes it).
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any, Callable, NamedTuple, Union

import numpy as np

from . import (all_regions as _all_regions, conv2d as _conv2d, elementwise as _elementwise, gemm as _gemm,
               gemm_i32 as _gemm_i32, gemm_scalar as _gemm_scalar, layernorm as _layernorm,
               reduction_policy as _reduction_policy, rmsnorm as _rmsnorm, rowreduce as _rowreduce,
               softmax as _softmax, stencil as _stencil, transpose as _transpose)

# modules of worked schedules (not registry kernels): gemm_gpu.py schedules the GEMM for a GPU shape;
# shift.py and prefix_sum.py hold schedules the checker disproves (the gate refuses them); bad.py a
# kernel that does not capture (the error README.md shows)
SCHEDULE_MODULES = {"gemm_gpu", "shift", "prefix_sum", "bad"}


class Example(NamedTuple):
    kernel: Any
    make_inputs: Callable[..., dict[str, Any]]
    reference: Callable[[dict[str, Any]], Any]
    output: Union[str, tuple[str, ...]]
    exact: bool


def _sizes(defaults: dict[str, int], given: dict[str, int]) -> dict[str, int]:
    unknown = set(given) - set(defaults)
    if unknown:
        raise TypeError(f"unknown size(s) {sorted(unknown)}; this example has {sorted(defaults)}")
    return {**defaults, **given}


def _f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _i32(rng: np.random.Generator, *shape: int, lo: int = -50, hi: int = 50) -> np.ndarray:
    return rng.integers(lo, hi, size=shape, dtype=np.int32)


def _f64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


# ----------------------------------------------------------------------------- gemm (f32 and i32)
def _gemm_inputs(rng, **sizes):
    s = _sizes({"M": 10, "K": 13, "N": 11}, sizes)
    return {"A": _f32(rng, s["M"], s["K"]), "B": _f32(rng, s["K"], s["N"]),
            "C": np.zeros((s["M"], s["N"]), np.float32)}


def _gemm_i32_inputs(rng, **sizes):
    s = _sizes({"M": 10, "K": 13, "N": 11}, sizes)
    return {"A": _i32(rng, s["M"], s["K"]), "B": _i32(rng, s["K"], s["N"]),
            "C": np.zeros((s["M"], s["N"]), np.int32)}


def _gemm_ref(inp):
    return _f64(inp["A"]) @ _f64(inp["B"])


# ----------------------------------------------------------------------------- row reductions
def _rowreduce_inputs(rng, **sizes):
    s = _sizes({"M": 9, "N": 19}, sizes)
    z = np.zeros(s["M"], np.float32)
    return {"A": _f32(rng, s["M"], s["N"]), "S": z, "Mx": z.copy(), "Mn": z.copy()}


def _rowreduce_ref(inp):
    a = _f64(inp["A"])
    return a.sum(axis=1), a.max(axis=1), a.min(axis=1)


def _softmax_inputs(rng, **sizes):
    s = _sizes({"M": 9, "N": 13}, sizes)
    bc = 16
    while bc < s["N"]:
        bc *= 2
    return {"X": 3 * _f32(rng, s["M"], s["N"]), "Y": np.zeros((s["M"], s["N"]), np.float32), "bc": bc}


def _softmax_ref(inp):
    x = _f64(inp["X"])
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _layernorm_inputs(rng, **sizes):
    s = _sizes({"M": 9, "N": 19}, sizes)
    return {"X": 2 * _f32(rng, s["M"], s["N"]) + 1, "gamma": _f32(rng, s["N"]), "beta": _f32(rng, s["N"]),
            "Y": np.zeros((s["M"], s["N"]), np.float32)}


def _layernorm_ref(inp, eps=1e-5):
    x = _f64(inp["X"])
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * _f64(inp["gamma"]) + _f64(inp["beta"])


def _rmsnorm_inputs(rng, **sizes):
    s = _sizes({"M": 9, "N": 19}, sizes)
    return {"X": _f32(rng, s["M"], s["N"]), "gamma": _f32(rng, s["N"]), "Y": np.zeros((s["M"], s["N"]), np.float32)}


def _rmsnorm_ref(inp, eps=1e-6):
    x = _f64(inp["X"])
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps) * _f64(inp["gamma"])


# ----------------------------------------------------------------------------- data movement and stencils
def _transpose_inputs(rng, **sizes):
    s = _sizes({"M": 10, "N": 7}, sizes)
    return {"A": _f32(rng, s["M"], s["N"]), "B": np.zeros((s["N"], s["M"]), np.float32)}


def _transpose_ref(inp):
    return _f64(inp["A"]).T.copy()


def _conv2d_inputs(rng, **sizes):
    s = _sizes({"H": 9, "W": 11, "R": 3, "S": 3}, sizes)
    return {"X": _f32(rng, s["H"], s["W"]), "F": _f32(rng, s["R"], s["S"]),
            "Y": np.zeros((s["H"], s["W"]), np.float32)}


def _conv2d_ref(inp):
    x, f = _f64(inp["X"]), _f64(inp["F"])
    (h, w), (r, s) = x.shape, f.shape
    pr, ps = r // 2, s // 2
    padded = np.zeros((h + r, w + s))
    padded[pr:pr + h, ps:ps + w] = x
    out = np.zeros((h, w))
    for a in range(r):
        for b in range(s):
            out += f[a, b] * padded[a:a + h, b:b + w]
    return out


def _elementwise_inputs(rng, **sizes):
    s = _sizes({"N": 10}, sizes)
    return {"X": _f32(rng, s["N"]), "B": _f32(rng, s["N"]), "Y": np.zeros(s["N"], np.float32)}


def _elementwise_ref(inp, a=2.5):
    return a * _f64(inp["X"]) + _f64(inp["B"])


def _stencil_inputs(rng, **sizes):
    s = _sizes({"H": 9, "W": 7}, sizes)
    return {"X": _i32(rng, s["H"], s["W"]), "Y": np.zeros((s["H"], s["W"]), np.int32)}


def _stencil_ref(inp):
    x = _f64(inp["X"])
    padded = np.pad(x, 1)
    h, w = x.shape
    return (4 * x - padded[:h, 1:w + 1] - padded[2:, 1:w + 1] - padded[1:h + 1, :w] - padded[1:h + 1, 2:])


# ----------------------------------------------------------------------------- all regions, policies
def _all_regions_inputs(rng, **sizes):
    s = _sizes({"M": 9, "K": 10, "N": 11}, sizes)
    return {"A": _f32(rng, s["M"], s["K"]), "B": _f32(rng, s["K"], s["N"]),
            "Y": np.zeros((s["M"], s["N"]), np.float32)}


def _all_regions_ref(inp):
    z = _f64(inp["A"]) @ _f64(inp["B"])
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _reduction_policy_inputs(rng, **sizes):
    s = _sizes({"N": 3}, sizes)
    # by default the [1, 2, 3] of the module doc; random integers when a size is given
    x = np.arange(1, 4, dtype=np.int32) if not sizes else _i32(rng, s["N"], lo=-1000, hi=1000)
    return {"X": x, "Out": np.zeros(4, np.int32)}


def _reduction_policy_ref(inp):
    x = _f64(inp["X"])
    signs = np.where(np.arange(len(x)) % 2 == 0, 1.0, -1.0)
    return np.array([-x.sum(), (signs * x).sum(), x.sum(), x.sum()])


EXAMPLES: dict[str, Example] = {
    "gemm": Example(_gemm.gemm, _gemm_inputs, _gemm_ref, "C", False),
    "gemm_i32": Example(_gemm_i32.gemm_i32, _gemm_i32_inputs, _gemm_ref, "C", True),
    "gemm_scalar": Example(_gemm_scalar.gemm_scalar, _gemm_inputs, _gemm_ref, "C", False),
    "rowreduce": Example(_rowreduce.rowreduce, _rowreduce_inputs, _rowreduce_ref, ("S", "Mx", "Mn"), False),
    "softmax": Example(_softmax.softmax, _softmax_inputs, _softmax_ref, "Y", False),
    "layernorm": Example(_layernorm.layernorm, _layernorm_inputs, _layernorm_ref, "Y", False),
    "rmsnorm": Example(_rmsnorm.rmsnorm, _rmsnorm_inputs, _rmsnorm_ref, "Y", False),
    "transpose": Example(_transpose.transpose, _transpose_inputs, _transpose_ref, "B", True),
    "conv2d": Example(_conv2d.conv2d, _conv2d_inputs, _conv2d_ref, "Y", False),
    "elementwise": Example(_elementwise.elementwise, _elementwise_inputs, _elementwise_ref, "Y", False),
    "stencil": Example(_stencil.stencil, _stencil_inputs, _stencil_ref, "Y", True),
    "all_regions": Example(_all_regions.all_regions, _all_regions_inputs, _all_regions_ref, "Y", False),
    "reduction_policy": Example(_reduction_policy.reduction_policy, _reduction_policy_inputs,
                                _reduction_policy_ref, "Out", True),
}


def source_path(name: str) -> Path:
    """The file of the example module ``name`` (``gemm``, ``shift``, ...) of this package."""
    path = Path(str(resources.files(__name__) / f"{name}.py"))
    if not path.is_file():
        raise KeyError(f"no example module {name!r} in {path.parent}")
    return path


def output_names(entry: Example) -> tuple[str, ...]:
    """The written tensors an example is checked on, as a tuple."""
    return (entry.output,) if isinstance(entry.output, str) else tuple(entry.output)


def expected(entry: Example, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
    """The reference results by output name (float64)."""
    ref = entry.reference(inputs)
    refs = (ref,) if isinstance(entry.output, str) else tuple(ref)
    return {name: np.asarray(r, dtype=np.float64) for name, r in zip(output_names(entry), refs)}


__all__ = ["EXAMPLES", "Example", "output_names", "expected", "source_path"]
