"""A compiled C kernel as a Python callable on numpy arrays.

``CKernel(**arrays_and_sizes)`` checks every array (``backends.arrays.check_array``: a numpy
array of the tensor's storage dtype in native byte order, its rank, C-contiguous, aligned;
shapes consistent with each other, with explicit sizes and with the sizes the schedule bound;
sizes by ``semantics.limits.check_size``), copies the arrays (bf16 values rounded, as the
interpreter stores them), runs the kernel and returns the tensors it writes, by name, like
``tc.run``. ``run_in_place`` runs on the caller's arrays without copying (benchmarks); the
arrays of written tensors must be writable. Arrays and sizes are passed by name only.

When the sizes were left symbolic and translation validation could not prove everything
for all sizes, each new size binding is validated before the first run with it: a
disproved ``bounds`` obligation raises ``ExecutionError`` (the interpreter's verdict on an
out-of-bounds access), anything else short of proved raises ``ValidationError``.

With ``sanitize=True`` the kernel is an AddressSanitizer + UndefinedBehaviorSanitizer
executable run in a subprocess (the sanitizer runtimes cannot be loaded into Python).
"""
from __future__ import annotations

import ctypes
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

import numpy as np

from tilecert.checker.verdict import DISPROVED, Report
from tilecert.lowering import Lowered, ValidationError, validate
from tilecert.lowering.program import Alloc
from tilecert.semantics import ir
from tilecert.semantics.errors import ExecutionError, InputError
from tilecert.semantics.index import evaluate
from tilecert.semantics.inputs import bind_sizes, take_arrays

from ..arrays import check_array
from ..errors import SanitizerError
from . import build
from .emit import PACK_SYMBOL
from .packs import PackCache
from .prelude import ERROR_MESSAGES

_STORAGE = {"bool": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
            "f16": np.float16, "bf16": np.float32, "f32": np.float32, "f64": np.float64}
SANITIZER_TIMEOUT_S = 600


class CKernel:
    """A kernel compiled to C: call it with numpy arrays (and sizes) like ``tc.run``."""

    def __init__(self, program: ir.Program, lowered: Lowered, validation: Report, source: str, binary: Path,
                 sanitize: bool) -> None:
        self.program = program
        self.lowered = lowered
        self.validation = validation
        self.source = source
        self.binary = binary
        self.sanitize = sanitize
        self._checked: dict[tuple[int, ...], None] = {}
        self._fn: Optional[Any] = None
        self._pack_fns: list[Any] = []
        self.pack_cache = PackCache(tuple(dict.fromkeys(r for pk in lowered.packs for r in pk.reads)), self.name,
                                    program.loc)
        self.packs_computed = 0  # how many times this kernel computed its hoisted packs
        if not sanitize:
            lib = build.load(binary)
            sizes = [ctypes.c_int64] * len(lowered.sizes) + [ctypes.POINTER(ctypes.c_int)]
            fn = lib.tc_kernel
            fn.restype = None
            fn.argtypes = [ctypes.c_void_p] * (len(lowered.tensors) + len(lowered.packs)) + sizes
            self._fn = fn
            for k, pk in enumerate(lowered.packs):
                pack = getattr(lib, f"{PACK_SYMBOL}{k}")
                pack.restype = None
                pack.argtypes = [ctypes.c_void_p] * (len(pk.reads) + 1) + sizes
                self._pack_fns.append(pack)
            self._round = lib.tc_round_bf16
            self._round.restype = None
            self._round.argtypes = [ctypes.c_void_p, ctypes.c_int64]

    @property
    def name(self) -> str:
        return self.lowered.name

    def __repr__(self) -> str:
        return f"<tilecert C kernel {self.name} ({'sanitized' if self.sanitize else 'native'})>"

    # ------------------------------------------------------------------ inputs
    def bind(self, kwargs: Mapping[str, Any], in_place: bool = False,
             positional: tuple[Any, ...] = ()) -> tuple[dict[str, np.ndarray], dict[str, int]]:
        """The arrays by tensor name and every size, checked (no copies made; ``in_place``: the
        arrays of written tensors must be writable too; ``positional`` arguments are refused)."""
        p, lp = self.program, self.lowered
        if positional:
            raise InputError(f"kernel {lp.name} takes its arrays and sizes by name, got {len(positional)} positional "
                             "argument(s)", p.loc, f"pass them as keywords: {', '.join(t.name + '=...' for t in lp.tensors)}")
        arrays, rest = take_arrays(lp.tensors, kwargs, p.loc, lambda t, a: check_array(
            t.name, a, np.dtype(_STORAGE[t.dtype]), t.dtype, len(t.shape), p.loc, writable=in_place and t.written))
        sizes = bind_sizes(lp.name, lp.sizes, lp.tensors, arrays, rest, p.loc, lp.bound)
        return arrays, sizes

    def check_sizes(self, sizes: Mapping[str, int]) -> None:
        """Validate the lowering for these sizes unless it is proved for all sizes already."""
        if self.validation.ok:
            return
        key = tuple(sizes[s] for s in self.lowered.sizes)
        if key in self._checked:
            return
        v = validate(self.program, self.lowered, sizes)
        oob = [x for x in v.verdicts("bounds") if x.status == DISPROVED]
        if oob:
            raise ExecutionError(f"{oob[0].witness.summary} for sizes {dict(sizes)}", self.program.loc,
                                 "; ".join(oob[0].witness.lines()[1:]) + "; guard the access or pad the buffer")
        if not v.ok:
            raise ValidationError(v, f"kernel {self.name} with sizes {dict(sizes)}")
        self._checked[key] = None

    # ------------------------------------------------------------------ running
    def __call__(self, *positional: Any, **arrays_and_sizes: Any) -> dict[str, np.ndarray]:
        arrays, sizes = self.bind(arrays_and_sizes, positional=positional)
        data = {name: np.array(a, copy=True, order="C") for name, a in arrays.items()}
        self._run(data, sizes, round_inputs=True, given=arrays)
        return {name: data[name] for name in self.lowered.outputs}

    def run_in_place(self, *positional: Any, **arrays_and_sizes: Any) -> None:
        """Run on the given arrays (which must not overlap); written tensors are updated in place."""
        arrays, sizes = self.bind(arrays_and_sizes, in_place=True, positional=positional)
        names = list(arrays)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                if np.shares_memory(arrays[a], arrays[b]):
                    raise InputError(f"{a} and {b} overlap", self.program.loc, "pass distinct arrays")
        self._run(arrays, sizes, round_inputs=False, given=arrays)

    def _run(self, data: dict[str, np.ndarray], sizes: Mapping[str, int], round_inputs: bool,
             given: Mapping[str, np.ndarray]) -> None:
        """Run on ``data`` (``given``: the caller's arrays, whose identity keys the hoisted packs)."""
        self.check_sizes(sizes)
        size_args = [sizes[s] for s in self.lowered.sizes]
        if self.sanitize:
            self.constant_packs(given, size_args, round_inputs, None)  # the executable computes them
            err = self._run_sanitized(data, size_args)
        else:
            if round_inputs:
                for t in self.lowered.tensors:
                    if t.dtype == "bf16":
                        self._round(data[t.name].ctypes.data, data[t.name].size)
            packs = self.constant_packs(given, size_args, round_inputs, lambda: self._compute_packs(data, size_args))
            flag = ctypes.c_int(0)
            assert self._fn is not None
            self._fn(*[data[t.name].ctypes.data for t in self.lowered.tensors], *[p.ctypes.data for p in packs],
                     *size_args, ctypes.byref(flag))
            err = flag.value
        self._raise(err)

    def _raise(self, err: int) -> None:
        """``ExecutionError`` for a nonzero kernel error flag."""
        if err:
            message, hint = ERROR_MESSAGES.get(err, (f"kernel error {err}", "report this"))
            raise ExecutionError(f"{message} in kernel {self.name}", self.program.loc, hint)

    def constant_packs(self, given: Mapping[str, np.ndarray], size_args: list[int], round_inputs: bool,
                       compute: Optional[Callable[[], tuple[np.ndarray, ...]]]) -> tuple[np.ndarray, ...]:
        """The hoisted packs of this call: those stored for the identity of ``given`` (``StaleConstantError``
        when a constant input changed since it was packed), else ``compute()``, stored. ``compute`` None: the
        packs are computed where the kernel runs, on every call (a subprocess); the inputs are checked alike."""
        if not self.lowered.packs:
            return ()
        extra = (tuple(size_args), round_inputs)
        found = self.pack_cache.get(given, extra)
        if found is not None and compute is not None:
            return found
        self.packs_computed += 1
        packs = compute() if compute is not None else ()
        if found is None:
            self.pack_cache.put(given, extra, packs)
        return packs

    def _compute_packs(self, data: Mapping[str, np.ndarray], size_args: list[int]) -> tuple[np.ndarray, ...]:
        """Run each ``tc_pack_<k>`` into a zeroed buffer of its pack's shape at these sizes."""
        sizes = dict(zip(self.lowered.sizes, size_args))
        packs = []
        for pk, fn in zip(self.lowered.packs, self._pack_fns):
            alloc = self.lowered.body[pk.start]
            assert isinstance(alloc, Alloc)
            shape = tuple(max(int(evaluate(s, sizes, {})), 0) for s in alloc.shape)
            out = np.zeros(shape, np.dtype(_STORAGE[alloc.dtype]))
            flag = ctypes.c_int(0)
            fn(*[data[r].ctypes.data for r in pk.reads], out.ctypes.data, *size_args, ctypes.byref(flag))
            self._raise(flag.value)
            packs.append(out)
        return tuple(packs)

    def _run_sanitized(self, data: dict[str, np.ndarray], size_args: list[int]) -> int:
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=86",
                   UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=87")
        return run_executable(self.binary, self.lowered, data, size_args, env, SANITIZER_TIMEOUT_S,
                              self._check_sanitized)

    def _check_sanitized(self, res: subprocess.CompletedProcess) -> None:
        if res.returncode != 0 or "runtime error" in res.stderr or "Sanitizer" in res.stderr:
            report = "\n".join(res.stderr.splitlines()[:40])
            raise SanitizerError(f"sanitized kernel {self.name} failed (exit {res.returncode}):\n{report}",
                                 self.program.loc, f"the source is {self.binary.with_suffix('.c')}")


def run_executable(binary: Path, lowered: Lowered, data: dict[str, np.ndarray], size_args: list[int],
                   env: Mapping[str, str], timeout: float,
                   check: Callable[[subprocess.CompletedProcess], None]) -> int:
    """Run a ``standalone_main`` executable on ``data`` in a scratch folder. ``check`` sees the
    completed process first (and raises to reject the run); then the written tensors are copied
    back into ``data`` and the kernel's error flag is returned."""
    with tempfile.TemporaryDirectory(prefix="tilecert-") as tmp:
        folder = Path(tmp)
        np.asarray(size_args, np.int64).tofile(folder / "sizes")
        for k, t in enumerate(lowered.tensors):
            data[t.name].tofile(folder / f"t{k}")
        try:
            res = subprocess.run([str(binary), str(folder)], capture_output=True, text=True, env=dict(env),
                                 timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ExecutionError(f"the compiled kernel did not finish within {timeout} s", hint=(
                "a sanitized build is slow: raise the timeout, or look for a loop that does not terminate")) from None
        check(res)
        for k, t in enumerate(lowered.tensors):
            if t.written:
                data[t.name][...] = np.fromfile(folder / f"t{k}", dtype=data[t.name].dtype).reshape(
                    data[t.name].shape)
        return int(np.fromfile(folder / "err", dtype=np.int32)[0])
