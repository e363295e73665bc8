"""The C backend: emit C99 + OpenMP from a lowered program, compile it, run it through ctypes."""
from __future__ import annotations

from typing import Mapping

from tilecert.checker.gate import Proof
from tilecert.checker.verdict import Report
from tilecert.lowering import Lowered, ValidationError, lower, refuses, validate
from tilecert.semantics import ir

from ..text import c_comment
from . import build
from .emit import emit_c, standalone_main
from .runner import CKernel


def validated(program: ir.Program, sizes: Mapping[str, int], threads: bool = False) -> tuple[Lowered, Report]:
    """The lowering of ``program`` (``lower``'s ``threads``) and the checker's report on it; a disproved
    coverage verdict blocks everything."""
    lp = lower(program, sizes, threads)
    validation = validate(program, lp, sizes)
    if refuses(validation):
        raise ValidationError(validation, f"lowering of {program.name}")
    return lp, validation


def header(backend: str, lp: Lowered, proof: Proof, validation: Report) -> str:
    """The comment block every emitted source starts with: what the checker proved of the schedule
    and, separately, of the lowering (``Proof.lines`` for each: counts, then a ``NOT PROVED`` line per
    open obligation; a lowering not proved for all sizes is validated again per call for concrete
    sizes). Every line goes through ``c_comment``."""
    lines = [f"tilecert {backend} backend: kernel {lp.name}"] + proof.lines() + \
        Proof.of(validation, f"lowering of {lp.name}").lines()
    if not validation.ok:
        lines.append("the lowering is validated again for the concrete sizes of each call")
    return "".join(c_comment(line) + "\n" for line in lines)


def emit(program: ir.Program, sizes: Mapping[str, int], proof: Proof) -> str:
    """Validated C source for ``program`` with ``sizes`` compiled in, headed by ``header``."""
    lp, validation = validated(program, sizes)
    return header("C", lp, proof, validation) + emit_c(lp)


def compile_c(program: ir.Program, sizes: Mapping[str, int], proof: Proof, sanitize: bool = False) -> CKernel:
    """Lower, validate, emit (headed by ``header``), build (cached) and load ``program`` with ``sizes``
    compiled in."""
    lp, validation = validated(program, sizes)
    source = header("C", lp, proof, validation) + emit_c(lp)
    flags = build.SANITIZE_FLAGS if sanitize else build.FLAGS
    if sanitize:
        source += "\n" + standalone_main(lp)
    binary = build.build(source, flags, shared=not sanitize)
    return CKernel(program, lp, validation, source, binary, sanitize)


__all__ = ["emit", "compile_c", "header", "CKernel"]
