"""The CUDA backend: emit CUDA C++ from a lowered program; build it with nvcc for a GPU (target
``cuda``), or with g++ against the host emulation of the CUDA execution model (target
``cuda-host``, ``tc_cuda_emu.h``), so that the same source runs on every machine."""
from __future__ import annotations

from typing import Mapping

from tilecert.checker.gate import Proof
from tilecert.checker.verdict import Report
from tilecert.lowering import Lowered
from tilecert.semantics import ir

from ..c import header, validated
from ..c.emit import standalone_main
from .build import build_executable, gpu_present, nvcc_check
from .emit import emit_cuda
from .errors import BarrierError, CudaUnsupported, NoDevice
from .runner import CudaKernel

CUDA_TARGETS = ("cuda", "cuda-host")


def lowered(program: ir.Program, sizes: Mapping[str, int], proof: Proof) -> tuple[Lowered, Report, str]:
    """The lowering (participants as threads), the checker's report on it and the CUDA source (headed by ``header``)."""
    lp, validation = validated(program, sizes, threads=True)
    return lp, validation, emit_cuda(lp, header("CUDA", lp, proof, validation))


def emit(program: ir.Program, sizes: Mapping[str, int], proof: Proof) -> str:
    """Validated CUDA source for ``program`` with ``sizes`` compiled in."""
    return lowered(program, sizes, proof)[2]


def compile_cuda(program: ir.Program, sizes: Mapping[str, int], proof: Proof, target: str = "cuda-host",
                 sanitize: bool = False) -> CudaKernel:
    """Lower, validate, emit and build ``program`` for ``target`` (``cuda-host``: the emulation, with
    ThreadSanitizer when ``sanitize``; ``cuda``: this machine's GPU)."""
    lp, validation, source = lowered(program, sizes, proof)
    source += "\n" + standalone_main(lp)
    binary = build_executable(source, target, sanitize)
    return CudaKernel(program, lp, validation, source, binary, target, sanitize)


__all__ = ["CUDA_TARGETS", "emit", "compile_cuda", "CudaKernel", "BarrierError", "CudaUnsupported", "NoDevice",
           "gpu_present", "nvcc_check"]
