"""The CUDA backend: emit CUDA C++ from a lowered program; build it with nvcc for a GPU (target
``cuda``), or with g++ against the host emulation of the CUDA execution model (target
``cuda-host``, ``tc_cuda_emu.h``), so that the same source runs on every machine."""
from __future__ import annotations

from typing import Mapping

from tilecert.checker.gate import Proof
from tilecert.checker.verdict import DISPROVED
from tilecert.lowering.pipeline import Lowering, lower_for
from tilecert.semantics import ir

from ..c import header
from ..c.emit import standalone_main
from .build import build_executable, gpu_present, nvcc_check
from .emit import emit_cuda
from .errors import BarrierError, CudaUnsupported, NoDevice
from .runner import CudaKernel

CUDA_TARGETS = ("cuda", "cuda-host")
PLACEMENT = ("noninterference", "barrier_uniform")  # the obligations that decide a barrier placement


def lowered(program: ir.Program, sizes: Mapping[str, int], proof: Proof) -> tuple[Lowering, str]:
    """The lowering pipeline's result (``lowering.pipeline.lower_for``) and the CUDA source (headed by
    ``header``). ``CudaUnsupported`` when the program with its placed barriers disproves
    ``noninterference`` or ``barrier_uniform`` where the schedule's own check did not (the placement is
    then what is wrong: a barrier the phases need under control that differs between threads)."""
    low = lower_for("cuda", program, sizes)
    stated = {o.kind for o in proof.open if o.status == DISPROVED}
    for r in low.barriers if low.barriers is not None else ():
        if r.kind in PLACEMENT and r.status == DISPROVED and r.kind not in stated:
            witness = "; ".join(r.verdict.witness.lines()) if r.verdict.witness else r.verdict.reason
            raise CudaUnsupported(f"the barriers placed in {program.name} disprove {r.kind}: {witness}",
                                  "a barrier the phases need sits under a guard or loop bound that differs between "
                                  "the threads of a block: move it inside the thread loops, or state the barrier "
                                  "in the program")
    return low, emit_cuda(low.lowered, header("CUDA", low, proof))


def emit(program: ir.Program, sizes: Mapping[str, int], proof: Proof) -> str:
    """Validated CUDA source for ``program`` with ``sizes`` compiled in."""
    return lowered(program, sizes, proof)[1]


def compile_cuda(program: ir.Program, sizes: Mapping[str, int], proof: Proof, target: str = "cuda-host",
                 sanitize: bool = False) -> CudaKernel:
    """Lower, validate, emit and build ``program`` for ``target`` (``cuda-host``: the emulation, with
    ThreadSanitizer when ``sanitize``; ``cuda``: this machine's GPU). The kernel validates each call's
    sizes against the program the pipeline lowered (with its barriers)."""
    low, source = lowered(program, sizes, proof)
    source += "\n" + standalone_main(low.lowered)
    binary = build_executable(source, target, sanitize)
    return CudaKernel(low.program, low.lowered, low.validation, source, binary, target, sanitize)


__all__ = ["CUDA_TARGETS", "emit", "compile_cuda", "CudaKernel", "BarrierError", "CudaUnsupported", "NoDevice",
           "gpu_present", "nvcc_check"]
