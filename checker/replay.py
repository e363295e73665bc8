"""Witness replay: re-run a disproved verdict's sizes on the interpreter, the definition of meaning.

- ``replay_transform(before, after, sizes)`` runs both programs on the same random integer
  inputs (integers keep every admitted reordering exact) and compares the tensors the
  kernel writes; the transformed program runs in checked mode and in canonical, reversed
  and shuffled instance orders, so a race it introduced shows as an error or a difference.
- ``replay_program(program, sizes)`` runs one program in checked mode and reports the
  error the interpreter raises (a noninterference violation, an out-of-bounds access, a
  barrier some participants miss), if any.

Replays are bounded (``MAX_ELEMENTS`` tensor elements in all, every size at most
``MAX_SIZE``); larger witnesses are reported as not replayed.
"""
from __future__ import annotations

from typing import Mapping, Optional

import numpy as np

from tilecert.semantics import ir
from tilecert.semantics.dtypes import dtype_of
from tilecert.semantics.errors import TilecertError
from tilecert.semantics.index import evaluate
from tilecert.semantics.loopinterp import interpret_loops

MAX_SIZE = 256
MAX_ELEMENTS = 1 << 16
SEEDS = (0, 1, 2)
ORDERS = ("canonical", "reverse", "shuffle")
DEFAULT_SIZE = 3


def complete_sizes(program: ir.Program, sizes: Mapping[str, int]) -> dict[str, int]:
    """``sizes`` with every size of ``program`` it does not bind set to ``DEFAULT_SIZE``."""
    return {n: int(sizes.get(n, DEFAULT_SIZE)) for n in program.sizes} | {k: int(v) for k, v in sizes.items()}


def _inputs(program: ir.Program, sizes: Mapping[str, int], seed: int) -> Optional[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    arrays: dict[str, np.ndarray] = {}
    total = 0
    for t in program.tensors:
        shape = tuple(int(evaluate(n, sizes, {})) for n in t.shape)
        total += int(np.prod(shape)) if shape else 1
        if total > MAX_ELEMENTS or any(n < 0 for n in shape):
            return None
        dt = dtype_of(t.dtype)
        values = rng.integers(0, 2, size=shape) if dt.is_bool else rng.integers(-4, 5, size=shape)
        arrays[t.name] = np.asarray(values).astype(dt.storage)
    return arrays


def _too_large(sizes: Mapping[str, int]) -> Optional[str]:
    big = {n: v for n, v in sizes.items() if v > MAX_SIZE}
    return f"not replayed: sizes {big} exceed {MAX_SIZE}" if big else None


def _run(program: ir.Program, sizes: Mapping[str, int], arrays: dict[str, np.ndarray], order: str,
         seed: int) -> dict[str, np.ndarray]:
    data = {k: v.copy() for k, v in arrays.items()}
    interpret_loops(program, sizes, data, order=order, seed=seed, checked=True)
    return data


def _shown(sizes: Mapping[str, int]) -> str:
    return ", ".join(f"{n}={v}" for n, v in sorted(sizes.items())) or "(none)"


def _fails(exc: Exception) -> str:
    return f"{type(exc).__name__}: {getattr(exc, 'message', None) or exc}"


def replay_transform(before: ir.Program, after: ir.Program, sizes: Mapping[str, int]) -> str:
    """Whether ``before`` and ``after`` compute different results at ``sizes`` (a sentence)."""
    sizes = complete_sizes(before, sizes)
    if (big := _too_large(sizes)) is not None:
        return big
    shown = _shown(sizes)
    for seed in SEEDS:
        arrays = _inputs(before, sizes, seed)
        if arrays is None:
            return f"not replayed: the tensors at sizes {shown} exceed {MAX_ELEMENTS} elements"
        try:
            want = _run(before, sizes, arrays, "canonical", seed)
        except (TilecertError, ArithmeticError, LookupError, ValueError) as exc:
            return f"not replayed: the original program fails at sizes {shown}: {_fails(exc)}"
        for order in ORDERS:
            try:
                got = _run(after, sizes, arrays, order, seed)
            except (TilecertError, ArithmeticError, LookupError, ValueError) as exc:
                return f"CONFIRMED at sizes {shown}: the transformed program fails ({order} order): {_fails(exc)}"
            for name in before.outputs:
                diff = np.argwhere(want[name] != got[name])
                if diff.size:
                    cell = tuple(int(i) for i in diff[0])
                    return (f"CONFIRMED at sizes {shown}, input seed {seed}, {order} order: {name}{list(cell)} is "
                            f"{want[name][cell]} before the transform and {got[name][cell]} after")
    return (f"not confirmed: at sizes {shown} the outputs agree on {len(SEEDS)} random integer inputs in "
            f"{len(ORDERS)} instance orders (the violation did not change these results)")


def replay_program(program: ir.Program, sizes: Mapping[str, int]) -> str:
    """What the interpreter reports running ``program`` at ``sizes`` in checked mode (a sentence)."""
    sizes = complete_sizes(program, sizes)
    if (big := _too_large(sizes)) is not None:
        return big
    shown = _shown(sizes)
    arrays = _inputs(program, sizes, SEEDS[0])
    if arrays is None:
        return f"not replayed: the tensors at sizes {shown} exceed {MAX_ELEMENTS} elements"
    for order in ORDERS:
        try:
            _run(program, sizes, arrays, order, SEEDS[0])
        except (TilecertError, ArithmeticError, LookupError, ValueError) as exc:
            return f"CONFIRMED at sizes {shown} ({order} order): {_fails(exc)}"
    return (f"not confirmed: the interpreter runs the program at sizes {shown} without error (it runs bound "
            "loops in lockstep and does not model barrier phases)")
