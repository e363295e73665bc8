"""tilecert.backends: code generation targets, and the differential harness (see ARCHITECTURE.md).

``compile(obj, target)`` / ``emit(obj, target)`` accept a ``Schedule`` (its program, with
the sizes it binds compiled in), a ``@tc.kernel`` (captured with the given config values,
expanded to loop form, sizes symbolic) or a loop-form ``Program``.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Union

from tilecert.semantics import ir
from tilecert.semantics.errors import InputError, TilecertError
from tilecert.semantics.expand import expand
from tilecert.semantics.kernel import Kernel
from tilecert.semantics.limits import check_seed, check_size
from tilecert.semantics.sched import Schedule

from .c import CKernel, compile_c
from .c import emit as emit_c
from .cuda import CUDA_TARGETS, compile_cuda
from .cuda import emit as emit_cuda
from .differential import DiffReport, run_trials
from .errors import BackendError, CompileError, SanitizerError, UnknownTarget

TARGETS = ("c",) + CUDA_TARGETS
Compilable = Union[Schedule, Kernel, ir.Program]


def resolve(obj: Compilable, config: Mapping[str, Any]) -> tuple[ir.Program, dict[str, int]]:
    """The scheduled loop-form program and the sizes it binds."""
    if isinstance(obj, Schedule):
        if config:
            raise TilecertError(f"config {sorted(config)} given with a Schedule", hint="a schedule fixes its config")
        return obj.program, dict(obj.sizes)
    if isinstance(obj, Kernel):
        s = Schedule.create(obj, **config)
        return s.program, dict(s.sizes)
    if isinstance(obj, ir.Program):
        return expand(obj), {}
    raise TilecertError(f"expected a Schedule, a @tc.kernel or a Program, got {type(obj).__name__}",
                        hint="pass tc.schedule(kernel, ...) or the kernel itself")


def check_target(target: str) -> None:
    if target not in TARGETS:
        raise UnknownTarget(f"unknown target {target!r}", hint=f"targets: {', '.join(TARGETS)}")


def emit(obj: Compilable, target: str = "c", **config: Any) -> str:
    """The validated source of ``obj`` for ``target`` (``cuda`` and ``cuda-host`` share one source)."""
    check_target(target)
    return (emit_cuda if target in CUDA_TARGETS else emit_c)(*resolve(obj, config))


def compile(obj: Compilable, target: str = "c", sanitize: bool = False, **config: Any) -> CKernel:  # noqa: A001
    """``obj`` compiled for ``target``: a callable on numpy arrays (and sizes) returning the written tensors.

    ``sanitize``: for ``c`` AddressSanitizer and UndefinedBehaviorSanitizer; for ``cuda-host``
    ThreadSanitizer and UndefinedBehaviorSanitizer (races between the threads of a block).
    """
    check_target(target)
    program, sizes = resolve(obj, config)
    return _build(program, sizes, target, sanitize)


def _build(program: ir.Program, sizes: Mapping[str, int], target: str, sanitize: bool) -> CKernel:
    if target in CUDA_TARGETS:
        return compile_cuda(program, sizes, target, sanitize)
    return compile_c(program, sizes, sanitize=sanitize)


def differential(obj: Compilable, target: str = "c", trials: int = 10, seed: int = 0,
                 sizes: Optional[Mapping[str, int]] = None, sanitize: bool = False, **config: Any) -> DiffReport:
    """Run ``obj`` through the interpreter and the ``target`` backend on ``trials`` random inputs.

    Sizes the schedule binds are fixed; ``sizes`` fixes others; the rest are drawn per trial.
    ``sanitize`` builds the backend with its sanitizers (see ``compile``).
    """
    check_target(target)
    if not isinstance(trials, int) or isinstance(trials, bool) or trials < 1:
        raise InputError(f"trials must be a positive int, got {trials!r}", hint="e.g. trials=10")
    check_seed(seed)
    program, bound = resolve(obj, config)
    for name, value in (sizes or {}).items():
        check_size(name, value, program.loc)
        if name not in program.sizes or bound.get(name, value) != value:
            raise InputError(f"size {name}={value} conflicts with the program (sizes {list(program.sizes)}, "
                             f"bound {bound})", program.loc, "give only sizes the schedule leaves symbolic")
    kernel = _build(program, bound, target, sanitize)
    label = target + (" (sanitized)" if sanitize else "")
    return run_trials(program, bound, kernel, program.name, label, trials, seed, sizes)


__all__ = ["TARGETS", "compile", "emit", "differential", "DiffReport", "resolve", "BackendError", "CompileError", "SanitizerError",
           "UnknownTarget"]
