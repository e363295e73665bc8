"""The C backend: emit C99 + OpenMP from a lowered program, compile it, run it through ctypes."""
from __future__ import annotations

from typing import Mapping

from tilecert.checker.gate import Proof
from tilecert.lowering.pipeline import Lowering, lower_for
from tilecert.semantics import ir

from ..text import c_comment
from . import build
from .emit import emit_c, standalone_main
from .runner import CKernel
from .shared_staging import refuse_shared_staging


def header(backend: str, low: Lowering, proof: Proof) -> str:
    """The comment block every emitted source starts with: what the checker proved of the schedule
    (``Proof.lines``: counts, then a ``NOT PROVED`` line per open obligation), what it proved of the
    kernel with its placed barriers (CUDA), and, separately, of the lowering (a lowering not proved
    for all sizes is validated again per call for concrete sizes). Every line goes through ``c_comment``."""
    lines = [f"tilecert {backend} backend: kernel {low.lowered.name}"] + proof.lines()
    if low.barriers is not None:
        lines += Proof.of(low.barriers, f"kernel {low.lowered.name} with its placed barriers").lines()
    lines += Proof.of(low.validation, f"lowering of {low.lowered.name}").lines()
    if not low.validation.ok:
        lines.append("the lowering is validated again for the concrete sizes of each call")
    return "".join(c_comment(line) + "\n" for line in lines)


def emit(program: ir.Program, sizes: Mapping[str, int], proof: Proof) -> str:
    """Validated C source for ``program`` with ``sizes`` compiled in, headed by ``header``; a shared stage
    is refused (``refuse_shared_staging``)."""
    refuse_shared_staging(program)
    low = lower_for("c", program, sizes)
    return header("C", low, proof) + emit_c(low.lowered)


def compile_c(program: ir.Program, sizes: Mapping[str, int], proof: Proof, sanitize: bool = False) -> CKernel:
    """Lower, validate, emit (headed by ``header``), build (cached) and load ``program`` with ``sizes``
    compiled in; a shared stage is refused (``refuse_shared_staging``)."""
    refuse_shared_staging(program)
    low = lower_for("c", program, sizes)
    lp, validation = low.lowered, low.validation
    source = header("C", low, proof) + emit_c(lp)
    flags = build.SANITIZE_FLAGS if sanitize else build.FLAGS
    if sanitize:
        source += "\n" + standalone_main(lp, lp.packs)
    binary = build.build(source, flags, shared=not sanitize)
    return CKernel(program, lp, validation, source, binary, sanitize)


__all__ = ["emit", "compile_c", "header", "CKernel"]
