"""Errors of the CUDA backend: each a ``TilecertError`` with a hint."""
from __future__ import annotations

from tilecert.semantics.errors import ExecutionError

from ..errors import BackendError


class CudaUnsupported(BackendError):
    """The CUDA backend cannot render a construct of the scheduled program (the message says which).

    ``reason``: the checker obligation that states the requirement (``containment`` or
    ``hardware_limits``: the checker reports the same refusal), or ``unsupported`` for a
    construct this backend does not render (f16, narrow atomics, a placed barrier the checker
    disproves)."""

    def __init__(self, message: str, hint: str, reason: str = "unsupported") -> None:
        super().__init__(message, hint=hint)
        self.reason = reason


class NoDevice(BackendError):
    """The requested CUDA target needs a tool or a GPU this machine does not have."""


class BarrierError(ExecutionError):
    """The threads of a block could not all pass a barrier: divergence, deadlock or timeout (the
    message names the threads and where each waits)."""
