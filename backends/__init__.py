"""tilecert.backends: code generation targets, and the differential harness (see ARCHITECTURE.md).

``compile(obj, target)`` / ``emit(obj, target)`` accept a ``Schedule`` (its program, with
the sizes it binds compiled in), a ``@tc.kernel`` (captured with the given config values,
expanded to loop form, sizes symbolic) or a ``Program``.

The gate (``checker/gate.py``): ``emit``, ``compile`` and ``differential`` first check the
schedule (a kernel or a program: its own obligations; cached) and raise
``UnprovedScheduleError`` unless every obligation is proved; ``allow_unproved=True`` goes on,
and the emitted source's header and the ``DiffReport`` say what is not proved.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Union

import numpy as np

from tilecert.checker.gate import Proof, require
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
from .differential import Chain, DiffReport, Trial, run_trials
from .errors import BackendError, CompileError, SanitizerError, UnknownTarget

TARGETS = ("c",) + CUDA_TARGETS
Compilable = Union[Schedule, Kernel, ir.Program]


def subject(obj: Compilable, config: Mapping[str, Any]) -> Union[Schedule, ir.Program]:
    """What is checked and built: a schedule (a kernel's is its unscheduled loop form), or a program."""
    if isinstance(obj, Schedule):
        if config:
            raise TilecertError(f"config {sorted(config)} given with a Schedule", hint="a schedule fixes its config")
        return obj
    if isinstance(obj, Kernel):
        return Schedule.create(obj, **config)
    if isinstance(obj, ir.Program):
        return obj
    raise TilecertError(f"expected a Schedule, a @tc.kernel or a Program, got {type(obj).__name__}",
                        hint="pass tc.schedule(kernel, ...) or the kernel itself")


def resolve(obj: Compilable, config: Mapping[str, Any]) -> tuple[ir.Program, dict[str, int]]:
    """The scheduled loop-form program and the sizes it binds."""
    s = subject(obj, config)
    return (s.program, dict(s.sizes)) if isinstance(s, Schedule) else (expand(s), {})


def check_target(target: str) -> None:
    if target not in TARGETS:
        raise UnknownTarget(f"unknown target {target!r}", hint=f"targets: {', '.join(TARGETS)}")


def emit(obj: Compilable, target: str = "c", allow_unproved: bool = False, **config: Any) -> str:
    """The validated source of ``obj`` for ``target`` (``cuda`` and ``cuda-host`` share one source), headed
    by what was proved; ``UnprovedScheduleError`` unless the schedule is proved or ``allow_unproved``."""
    check_target(target)
    program, sizes, proof = _gated(obj, config, allow_unproved, "emit")
    return (emit_cuda if target in CUDA_TARGETS else emit_c)(program, sizes, proof)


def compile(obj: Compilable, target: str = "c", sanitize: bool = False, allow_unproved: bool = False,  # noqa: A001
            **config: Any) -> CKernel:
    """``obj`` compiled for ``target``: a callable on numpy arrays (and sizes) returning the written tensors.

    ``sanitize``: for ``c`` AddressSanitizer and UndefinedBehaviorSanitizer; for ``cuda-host``
    ThreadSanitizer and UndefinedBehaviorSanitizer (races between the threads of a block).
    ``UnprovedScheduleError`` unless the schedule is proved or ``allow_unproved``.
    """
    check_target(target)
    program, sizes, proof = _gated(obj, config, allow_unproved, "compile")
    return _build(program, sizes, proof, target, sanitize)


def _gated(obj: Compilable, config: Mapping[str, Any], allow_unproved: bool,
           action: str) -> tuple[ir.Program, dict[str, int], Proof]:
    """The scheduled program, its bound sizes and the gate's ``Proof`` (``UnprovedScheduleError`` first)."""
    s = subject(obj, config)
    proof = require(s, allow_unproved=allow_unproved, action=action)
    return (*resolve(s, {}), proof)


def _build(program: ir.Program, sizes: Mapping[str, int], proof: Proof, target: str, sanitize: bool) -> CKernel:
    if target in CUDA_TARGETS:
        return compile_cuda(program, sizes, proof, target, sanitize)
    return compile_c(program, sizes, proof, sanitize=sanitize)


def differential(obj: Compilable, target: str = "c", trials: int = 10, seed: int = 0,
                 sizes: Optional[Mapping[str, int]] = None, sanitize: bool = False, allow_unproved: bool = False,
                 backend: Optional[Callable[..., Mapping[str, np.ndarray]]] = None,
                 on_trial: Optional[Callable[[Trial], None]] = None, **config: Any) -> DiffReport:
    """Run ``obj``'s specification (the original kernel on the tile-level interpreter), its scheduled
    program (the loop-level interpreter) and a backend on ``trials`` random inputs (see
    ``differential.py``); the verdict is specification against backend.

    Sizes the schedule binds are fixed; ``sizes`` fixes others; the rest are drawn per trial. The
    schedule is checked first at those sizes (``UnprovedScheduleError`` unless proved or
    ``allow_unproved``; an unproved report is marked so and is never ``matched``). ``backend``: any
    callable with the compiled kernel's calling convention (keyword numpy arrays and the sizes no
    tensor carries -> the written tensors by name), instead of building ``target``; ``sanitize``
    builds ``target`` with its sanitizers (see ``compile``). ``on_trial`` sees each trial as it ends.
    """
    if backend is None:
        check_target(target)
    elif not callable(backend):
        raise InputError(f"backend must be callable, got {type(backend).__name__}",
                         hint="pass a function of keyword numpy arrays (and sizes) returning the written tensors")
    if not isinstance(trials, int) or isinstance(trials, bool) or trials < 1:
        raise InputError(f"trials must be a positive int, got {trials!r}", hint="e.g. trials=10")
    check_seed(seed)
    s = subject(obj, config)
    program, bound = resolve(s, {})
    for name, value in (sizes or {}).items():
        check_size(name, value, program.loc)
        if name not in program.sizes or bound.get(name, value) != value:
            raise InputError(f"size {name}={value} conflicts with the program (sizes {list(program.sizes)}, "
                             f"bound {bound})", program.loc, "give only sizes the schedule leaves symbolic")
    proof = require(s, sizes, allow_unproved=allow_unproved, action="differential")
    if backend is None:
        backend = _build(program, bound, proof, target, sanitize)
        label = target + (" (sanitized)" if sanitize else "")
    else:
        label = f"backend {getattr(backend, '__name__', type(backend).__name__)}"
    return run_trials(Chain.of(s), bound, backend, label, trials, seed, sizes, proof, on_trial)


__all__ = ["TARGETS", "compile", "emit", "differential", "DiffReport", "resolve", "subject", "BackendError",
           "CompileError", "SanitizerError", "UnknownTarget"]
