"""The differential harness: the reference interpreter against a compiled backend on random inputs.

Each trial draws sizes (those the schedule binds stay fixed; the others come from
``sizes`` or are drawn in [1, 12]) and random contents for every tensor, outputs included
(a kernel may read what it writes). Floats are standard normal, integers uniform over the
whole range for 8-bit types and over [-1000, 1000] otherwise, bools fair coins. The
interpreter (checked mode) and the compiled kernel run on copies of the same arrays.

Comparison of each written tensor:

- integer and bool dtypes: exactly;
- floats: ``|backend - interp| <= tol * (|interp| + max|interp|)`` elementwise, NaN matching
  NaN and infinities matching by sign, with ``tol = 4 * eps(dtype) * (L + 8)``, where ``eps`` is
  the dtype's unit roundoff (f16 2**-11, bf16 2**-8, f32 2**-24, f64 2**-53) and ``L`` the
  longest chain of updates into one cell: the largest product, over ``Accum`` statements, of
  the extents of the enclosing loops (inside the updated buffer's declaration) whose variable
  does not index the updated cell.
  Backends evaluate every operation in the dtype with the interpreter's roundings; what
  remains is the order of reductions and the last bit of library math functions.

Outcomes of a trial: ``match``; ``mismatch`` (first differing index and both values);
``both rejected`` (both raised ``ExecutionError``: an out-of-bounds access or a zero
divisor on these inputs, which counts as agreement); ``backend error`` (only the backend
raised, or it failed to build); ``invalid`` (only the interpreter raised: the program has no
meaning on these inputs, e.g. a noninterference violation; not a verdict on the backend);
``unsupported`` (the lowering does not handle a construct of the program).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

import numpy as np

from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.dtypes import dtype_of
from tilecert.semantics.errors import ExecutionError
from tilecert.semantics.index import IExpr, evaluate, free_vars
from tilecert.semantics.limits import check_allocation
from tilecert.semantics.interp import prepare_inputs
from tilecert.semantics.loopinterp import interpret_loops

UNIT_ROUNDOFF = {"f16": 2.0**-11, "bf16": 2.0**-8, "f32": 2.0**-24, "f64": 2.0**-53}
TOLERANCE_RULE = "|b - i| <= 4 * eps * (L + 8) * (|i| + max|i|); integers and bools exactly"
SIZE_RANGE = (1, 12)
FAILURES = ("mismatch", "backend error")


@dataclass(frozen=True)
class Mismatch:
    tensor: str
    index: tuple[int, ...]
    interp: Any
    backend: Any
    tolerance: float

    def __str__(self) -> str:
        tol = "exact" if self.tolerance == 0 else f"tol {self.tolerance:.3g}"
        return f"{self.tensor}{list(self.index)}: interpreter {self.interp!r}, backend {self.backend!r} ({tol})"


@dataclass(frozen=True)
class Trial:
    seed: int
    sizes: dict[str, int]
    outcome: str
    mismatch: Optional[Mismatch] = None
    detail: str = ""

    @property
    def agrees(self) -> bool:
        return self.outcome in ("match", "both rejected")

    def __str__(self) -> str:
        text = f"trial seed={self.seed} sizes={self.sizes}: {self.outcome}"
        if self.mismatch is not None:
            text += f" at {self.mismatch}"
        if self.detail:
            text += f" ({self.detail})"
        return text


@dataclass(frozen=True)
class DiffReport:
    kernel: str
    target: str
    trials: tuple[Trial, ...] = field(default_factory=tuple)

    @property
    def matched(self) -> bool:
        """Every trial agreed (and at least one ran)."""
        return bool(self.trials) and all(t.agrees for t in self.trials)

    @property
    def failed(self) -> bool:
        """Some trial is a verdict against the backend (a mismatch, or an error only the backend raised)."""
        return any(t.outcome in FAILURES for t in self.trials)

    @property
    def first_failure(self) -> Optional[Trial]:
        return next((t for t in self.trials if not t.agrees), None)

    def __str__(self) -> str:
        head = f"{self.kernel} on {self.target}: {sum(t.agrees for t in self.trials)}/{len(self.trials)} trials agree"
        bad = self.first_failure
        return head + ("" if bad is None else f"; first failure: {bad}") + f" [{TOLERANCE_RULE}]"


def random_array(rng: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    dt = dtype_of(dtype)
    check_allocation(shape, 8, f"a random {dtype} input")  # drawn as 8-byte values, then converted
    if dt.is_bool:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dt.is_float:
        return rng.standard_normal(shape).astype(dt.storage)
    info = np.iinfo(dt.storage)
    lo, hi = (int(info.min), int(info.max)) if info.bits == 8 else (-1000, 1000)
    return rng.integers(lo, hi, size=shape, endpoint=True).astype(dt.storage)


def chain_length(p: ir.Program, sizes: Mapping[str, int]) -> int:
    """``L``: the longest chain of ``Accum`` updates into one cell, at these sizes (loops outside a
    buffer's declaration do not count: each of their instances updates its own copy)."""
    longest = 1
    at_zero = defaultdict(int)  # an extent that reads outer loops is taken at their first iteration
    declared_at: dict[str, int] = {}

    def walk(block: ir.Block, loops: list[tuple[int, IExpr]]) -> None:
        nonlocal longest
        for st in block.ops:
            if isinstance(st, L.Loop):
                walk(st.body, loops + [(st.var, st.extent)])
            elif isinstance(st, L.If):
                walk(st.body, loops)
            elif isinstance(st, L.Decl):
                declared_at[st.buf.name] = len(loops)
            elif isinstance(st, L.Accum):
                indexed = set().union(*(free_vars(e) for e in st.index))
                n = 1
                for var, extent in loops[declared_at.get(st.buf, 0):]:
                    if (var, 0) not in indexed:
                        n *= max(int(evaluate(extent, sizes, at_zero)), 1)
                longest = max(longest, n)

    walk(p.body, [])
    return longest


def compare(name: str, dtype: str, interp: np.ndarray, backend: np.ndarray, chain: int) -> Optional[Mismatch]:
    """The first element where ``backend`` differs from ``interp`` beyond the tolerance, or None."""
    if dtype not in UNIT_ROUNDOFF:
        bad = interp != backend
        tol = 0.0
    else:
        i, b = interp.astype(np.float64), backend.astype(np.float64)
        tol = 4 * UNIT_ROUNDOFF[dtype] * (chain + 8)
        finite = np.isfinite(i)
        scale = float(np.max(np.abs(i[finite]))) if finite.any() else 0.0
        with np.errstate(invalid="ignore"):
            close = np.abs(b - i) <= tol * (np.abs(i) + scale)
        same_special = (np.isnan(i) & np.isnan(b)) | (np.isinf(i) & (i == b))
        bad = ~(close | same_special)
    if not bad.any():
        return None
    where = tuple(int(x) for x in np.argwhere(bad)[0])
    return Mismatch(name, where, interp[where].item(), backend[where].item(), tol)


def run_trials(program: ir.Program, bound: Mapping[str, int], run_backend: Callable[..., dict[str, np.ndarray]],
               kernel: str, target: str, trials: int, seed: int,
               sizes: Optional[Mapping[str, int]] = None) -> DiffReport:
    """Run ``trials`` random trials of ``program`` through the interpreter and ``run_backend``."""
    results = []
    for t in range(trials):
        rng = np.random.default_rng([seed, t])
        trial_sizes = {s: int(bound[s]) if s in bound else int((sizes or {}).get(s, rng.integers(*SIZE_RANGE,
                                                                                               endpoint=True)))
                       for s in program.sizes}
        arrays = {tn.name: random_array(rng, tn.dtype, tuple(trial_sizes[str(d)] for d in tn.shape))
                  for tn in program.tensors}
        results.append(_trial(program, run_backend, arrays, trial_sizes, seed=t))
    return DiffReport(kernel, target, tuple(results))


def _trial(program: ir.Program, run_backend, arrays: dict[str, np.ndarray], sizes: dict[str, int],
           seed: int) -> Trial:
    interp_err = backend_err = None
    expected = got = None
    dims = {str(d) for t in program.tensors for d in t.shape}
    loose = {s: n for s, n in sizes.items() if s not in dims}  # sizes no tensor shape carries
    try:
        data, bound = prepare_inputs(program, {**{k: v.copy() for k, v in arrays.items()}, **loose})
        interpret_loops(program, bound, data, checked=True)
        expected = {name: data[name] for name in program.outputs}
    except ExecutionError as exc:
        interp_err = exc
    try:
        got = run_backend(**{k: v.copy() for k, v in arrays.items()}, **loose)
    except ExecutionError as exc:
        backend_err = exc
    if interp_err is not None and backend_err is not None:
        return Trial(seed, sizes, "both rejected", detail=interp_err.message)
    if interp_err is not None:
        return Trial(seed, sizes, "invalid", detail=f"the interpreter rejects the program: {interp_err.message}")
    if backend_err is not None:
        return Trial(seed, sizes, "backend error", detail=backend_err.message)
    assert expected is not None and got is not None
    chain = chain_length(program, sizes)
    for tn in program.tensors:
        if tn.written:
            bad = compare(tn.name, tn.dtype, expected[tn.name], got[tn.name], chain)
            if bad is not None:
                return Trial(seed, sizes, "mismatch", bad)
    return Trial(seed, sizes, "match")
