"""tilecert: a reference interpreter with formal checkers for tile programs.

The public face: the DSL (``kernel``, ``Tensor``, regions, tile ops, memories), the
interpreter (``run``) and the IR utilities (``capture``, ``format_program``, ``dump``,
``load``, ``digest``).
"""
from __future__ import annotations

from typing import Any, Union

import numpy as np

from tilecert.semantics import ir
from tilecert.semantics.dtypes import DType, bf16, bool_, f16, f32, f64, i8, i16, i32, i64, u8
from tilecert.semantics.errors import (CaptureError, ExecutionError, InputError, NoninterferenceError,
                                       ResourceError, SerializationError, TilecertError, TilecertWarning,
                                       UncheckedSizesWarning,
                                       TypeMismatch)
from tilecert.semantics.expand import expand
from tilecert.semantics.inputs import prepare_inputs
from tilecert.semantics.interp_fast import interpret
from tilecert.semantics.loopinterp import interpret_loops
from tilecert.semantics.loopir import is_loop_form
from tilecert.semantics.kernel import Kernel, Tensor, kernel
from tilecert.semantics.limits import check_seed
from tilecert.semantics.printer import format_program

from tilecert.semantics.sched.base import ScheduleError
from tilecert.semantics.regions import parallel, pipeline, reduction, serial
from tilecert.semantics.serialize import digest, dump, load
from tilecert.semantics.tensors import memory
from tilecert.semantics.tileops import (abs, cast, dims, exp, full, iota, log, matmul, maximum, minimum, mma,
                                        reduce, reshape, sqrt, tanh, where, zeros)
from tilecert.semantics.values import cdiv
from tilecert.checker import UnprovedScheduleError, check
from tilecert.schedule import Schedule
from tilecert.backends import DiffReport, compile, differential, emit

Program = ir.Program


def capture(k: Union[Kernel, ir.Program], **config: Any) -> ir.Program:
    """The IR of kernel ``k`` for the given config values (a Program passes through)."""
    if isinstance(k, ir.Program):
        return k
    if not isinstance(k, Kernel):
        raise TilecertError(f"expected a @tc.kernel or a Program, got {type(k).__name__}", hint="decorate with @tc.kernel")
    return k.capture(**config)


def schedule(k: Kernel, /, **sizes_and_config: Any) -> Schedule:
    """A ``Schedule`` of kernel ``k`` in loop form; given sizes are bound, the rest stay symbolic."""
    return Schedule.create(k, **sizes_and_config)


def run(k: Union[Kernel, ir.Program], *positional: Any, order: str = "canonical", seed: int = 0,
        reduce_mode: str = "canonical", checked: bool = True, **arrays_and_sizes: Any) -> dict[str, np.ndarray]:
    """Interpret ``k`` on copies of the arrays; sizes come from the arrays' shapes.

    ``order``: parallel instance order (canonical | reverse | shuffle, seeded by ``seed``).
    ``reduce_mode``: canonical balanced trees, or adversarial random regroupings.
    ``checked``: record each parallel instance's cells and report conflicts.
    Returns the tensors the kernel writes, by name.
    """
    loc = k.loc if isinstance(k, (Kernel, ir.Program)) else None
    if positional:
        raise InputError(f"tc.run takes the arrays and sizes by name, got {len(positional)} positional argument(s)",
                         loc, "pass them as keywords: tc.run(kernel, A=a, B=b)")
    check_seed(seed, loc)
    kwargs = dict(arrays_and_sizes)
    config = k.split_config(kwargs) if isinstance(k, Kernel) else {}
    program = capture(k, **config)
    if is_loop_form(program.body):
        arrays, sizes = prepare_inputs(program, kwargs)
        interpret_loops(program, sizes, arrays, order=order, seed=seed, checked=checked)
        return {name: arrays[name] for name in program.outputs}
    return interpret(program, order=order, seed=seed, reduce_mode=reduce_mode, checked=checked, **kwargs)


def plot(subject: Any, result: Any = None, **options: Any) -> Any:
    """A matplotlib figure of ``subject``: its iteration space, a witness drawn on it, or its barrier
    phases (``tilecert.pictures.plot``; needs the ``plot`` extra)."""
    from tilecert.pictures import plot as draw
    return draw(subject, result, **options)


def __getattr__(name: str) -> Any:
    """``tc.strategies`` (hypothesis strategies for programs and schedules) loads on first use."""
    if name == "strategies":
        import importlib
        return importlib.import_module("tilecert.strategies")
    raise AttributeError(f"module 'tilecert' has no attribute {name!r}")


__all__ = [
    "kernel", "Kernel", "Tensor", "Program", "run", "capture", "expand", "schedule", "Schedule", "format_program", "dump", "load", "digest",
    "parallel", "serial", "pipeline", "reduction", "memory", "cdiv", "dims",
    "full", "zeros", "iota", "cast", "where", "exp", "log", "sqrt", "tanh", "abs", "minimum", "maximum", "reduce",
    "mma", "matmul", "reshape",
    "f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "bool_", "DType",
    "TilecertError", "CaptureError", "TypeMismatch", "InputError", "ExecutionError", "NoninterferenceError",
    "SerializationError", "ScheduleError", "UnprovedScheduleError", "ResourceError", "TilecertWarning", "UncheckedSizesWarning", "check",
    "compile", "emit", "differential", "DiffReport", "plot",
]
