"""Errors of the CUDA backend: each a ``TilecertError`` with a hint."""
from __future__ import annotations

from tilecert.semantics.errors import ExecutionError

from ..errors import BackendError


class CudaUnsupported(BackendError):
    """The CUDA backend cannot render a construct of the scheduled program (the message says which)."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message, hint=hint)


class NoDevice(BackendError):
    """The requested CUDA target needs a tool or a GPU this machine does not have."""


class BarrierError(ExecutionError):
    """The threads of a block could not all pass a barrier: divergence, deadlock or timeout (the
    message names the threads and where each waits)."""
