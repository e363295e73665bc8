"""The exception hierarchy of tilecert.

Every error a user can cause (DSL misuse, bad inputs, impossible requests) is a
``TilecertError``: it names the source location of the DSL line that caused it and
carries a hint that says how to fix it.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Loc:
    """A source location: the file and line of a kernel's DSL statement."""

    file: str = "<unknown>"
    line: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


NOWHERE = Loc()
_PKG_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_OUR_DIRS = tuple(
    os.path.join(_PKG_ROOT, d) + os.sep for d in ("semantics", "tilecert", "checker", "lowering", "backends")
)


def caller_loc() -> Loc:
    """The innermost stack frame outside tilecert's own packages (the user's DSL line)."""
    frame = sys._getframe(1)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not path.startswith(_OUR_DIRS) and "importlib" not in path:
            return Loc(frame.f_code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return NOWHERE


class TilecertError(Exception):
    """Base of every error tilecert reports; ``loc`` and ``hint`` are always present."""

    def __init__(self, message: str, loc: Loc | None = None, hint: str = "") -> None:
        self.message = message
        self.loc = loc if loc is not None else caller_loc()
        self.hint = hint
        super().__init__(str(self))

    def __str__(self) -> str:
        text = f"{self.loc}: {self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class CaptureError(TilecertError):
    """The DSL was used in a way that has no meaning (reported while capturing a kernel)."""


class TypeMismatch(CaptureError):
    """Operand dtypes, dims or extents do not fit an operation."""


class InputError(TilecertError):
    """Arrays or sizes passed to ``run`` do not fit the kernel's signature."""


class ExecutionError(TilecertError):
    """The interpreter met an execution with no meaning (out-of-bounds under ``assume``, ...)."""


class NoninterferenceError(ExecutionError):
    """Two instances of one parallel region touched the same cell, one of them writing."""


class SerializationError(TilecertError):
    """A program file is malformed."""


class ResourceError(TilecertError):
    """A request needs more of a resource (memory) than the configured bound allows."""


class TilecertWarning(UserWarning):
    """Base of every warning tilecert gives (something was done differently than asked, safely)."""


class UncheckedSizesWarning(TilecertWarning):
    """A schedule was run at sizes none of its checks covered: its verdicts say nothing about this run."""


class UnknownAttribute(CaptureError, AttributeError):
    """A capture-time value has no such attribute (an ``AttributeError`` too, so ``hasattr`` works)."""
