"""The checker's error: bad input to a check (not a loop-form program, unknown sizes, ...)."""
from __future__ import annotations

from tilecert.semantics.errors import TilecertError


class CheckerError(TilecertError):
    """A check was asked of something that cannot be checked (the message says what and why)."""
