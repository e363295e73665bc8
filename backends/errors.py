"""Errors of the backends: every one a ``TilecertError`` with a hint."""
from __future__ import annotations

from tilecert.semantics.errors import InputError, TilecertError, TilecertWarning


class BackendError(TilecertError):
    """A backend cannot build or run a kernel (no compiler, an unknown target, ...)."""


class UnknownTarget(BackendError):
    """The requested target has no backend."""


class CompileError(BackendError):
    """The C compiler rejected emitted source (a tilecert bug: the message names the source file)."""


class SanitizerError(BackendError):
    """A sanitizer build reported undefined behaviour or a memory error (the report is in the message)."""


class StaleConstantError(InputError):
    """A call passes a constant input whose contents changed since the kernel packed it (``backends/c/packs.py``)."""


class CacheWarning(TilecertWarning):
    """The build cache folder cannot be used safely; builds go to a private temporary folder."""
