"""A compiled CUDA kernel (host emulation or GPU) as a Python callable on numpy arrays.

``CudaKernel`` takes its inputs exactly like the C backend's ``CKernel`` (same checks, same
per-size validation) and runs the executable in a subprocess (the file protocol of
``backends.c.emit.standalone_main``). What the run can report:

- the kernel's own error flag (a zero divisor): ``ExecutionError``, as the C backend;
- a barrier the threads of a block could not pass (emulation): ``BarrierError``, an
  ``ExecutionError`` naming the threads, as the interpreter reports barrier divergence;
- a ThreadSanitizer or UndefinedBehaviorSanitizer report (``sanitize``): ``SanitizerError``
  with the report (a data race between threads of a block), unless a barrier failure came
  first (the threads that skip a divergent barrier race with the others; the divergence is
  the cause that is reported);
- a launch beyond the CUDA limits or another CUDA error: ``BackendError``;
- a constant input changed since the kernel's first call with it: ``StaleConstantError``, as the
  C backend (the launcher computes the hoisted packs as ordinary code on every call, so results
  never come from a stale pack; the refusal keeps the backends' contract one).
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Mapping

import numpy as np

from tilecert.checker.verdict import Report
from tilecert.lowering import Lowered
from tilecert.semantics import ir
from tilecert.semantics.errors import ExecutionError

from ..c.prelude import ERROR_MESSAGES
from ..c.runner import CKernel, run_executable
from ..errors import BackendError, SanitizerError
from .emit import ERR_CUDA, ERR_GEOMETRY
from .errors import BarrierError

BARRIER_CODE = 10001  # cudaErrorTcBarrier in tc_cuda_emu.h
RUN_TIMEOUT_S = 600


class CudaKernel(CKernel):
    """A kernel compiled from CUDA source: call it with numpy arrays (and sizes) like ``tc.run``."""

    def __init__(self, program: ir.Program, lowered: Lowered, validation: Report, source: str, binary: Path,
                 target: str, sanitize: bool) -> None:
        super().__init__(program, lowered, validation, source, binary, sanitize=True)  # always a subprocess
        self.target = target
        self.tsan = sanitize
        self.stderr = ""

    def __repr__(self) -> str:
        return f"<tilecert {self.target} kernel {self.name}{' (sanitized)' if self.tsan else ''}>"

    def _run(self, data: dict[str, np.ndarray], sizes: Mapping[str, int], round_inputs: bool,
             given: Mapping[str, np.ndarray]) -> None:
        self.check_sizes(sizes)
        self.constant_packs(given, [sizes[s] for s in self.lowered.sizes], round_inputs, None)  # run on every call
        env = dict(os.environ, TSAN_OPTIONS="halt_on_error=0:exitcode=86",
                   UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=87")
        try:
            err = run_executable(self.binary, self.lowered, data, [sizes[s] for s in self.lowered.sizes], env,
                                 RUN_TIMEOUT_S, self._check)
        except subprocess.TimeoutExpired:
            raise BackendError(f"kernel {self.name} ran over {RUN_TIMEOUT_S} s on {self.target}", self.program.loc,
                               "a thread that never ends (or a very large launch on the emulation)") from None
        if err == 0:
            return
        if err == ERR_CUDA + BARRIER_CODE:
            raise BarrierError(f"{self._report()} in kernel {self.name}", self.program.loc,
                               "a barrier must be reached by all threads of its block (or warp) or by none; "
                               "move it out of the thread-dependent guard or loop")
        if err >= ERR_CUDA or err == ERR_GEOMETRY:
            raise BackendError(f"kernel {self.name} failed on {self.target}: {self._report()}", self.program.loc,
                               "a launch beyond the CUDA limits needs smaller thread loops (split them) or fewer "
                               "blocks; other CUDA errors are tilecert bugs")
        message, hint = ERROR_MESSAGES.get(err, (f"kernel error {err}", "report this"))
        raise ExecutionError(f"{message} in kernel {self.name}", self.program.loc, hint)

    def _check(self, res: subprocess.CompletedProcess) -> None:
        self.stderr = res.stderr
        if f"tilecert: CUDA error {BARRIER_CODE}:" in res.stderr:
            return  # the barrier failure is the cause; what threads did after it is reported with it
        if self.tsan and "ThreadSanitizer" in res.stderr:
            report = "\n".join(res.stderr.splitlines()[:60])
            kind = "a data race" if "data race" in res.stderr else "a thread error"
            raise SanitizerError(f"the sanitized {self.target} build of {self.name} reports {kind}:\n{report}",
                                 self.program.loc, f"the source is {self.binary.with_suffix('.cu')}")
        if res.returncode != 0:
            raise BackendError(f"the {self.target} executable of {self.name} failed (exit {res.returncode}):\n"
                               + "\n".join(res.stderr.splitlines()[-20:]), self.program.loc,
                               f"the source is {self.binary.with_suffix('.cu')}")

    def _report(self) -> str:
        lines = [line.split(": ", 2)[-1] for line in self.stderr.splitlines() if line.startswith("tilecert:")]
        return "; ".join(lines) or "no report"
