"""What an op declares about each buffer it mints (its *datamaps*), so that the checker knows what
the buffer stands for from the op itself, never from its name or its shape.

- ``Copy(buffer, source)``: ``buffer`` holds copies of cells of ``source``, loaded from it and
  stored back (a private tile of ``privatize``). The checker finds the one load and the one
  store-back and proves that every use lies in the window between them (``forwarding.restore``).
- ``Forward(buffer, expression)``: scalar ``buffer`` is written once with ``expression`` and read
  where that value still holds (a CSE temporary of a materialized unroll). The checker proves the
  store is the declared expression and that every read sees it (``forwarding.inline``).
- ``Renamed(buffer, original)``: ``buffer`` is the declaration of ``original`` copied with the
  loop body it sits in (``unroll(materialize=True)``, ``partition``): its allocations are those of
  ``original`` under the copy's coordinates (``correspondence``).

A new declaration that no record names stands for the old declaration of the same name. Records
name buffers of the op's result; each minted name is fresh (``base.fresh_buffer``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from .. import loopir as L


@dataclass(frozen=True)
class Copy:
    """``buffer`` is a private copy of cells of ``source``, loaded before its uses and stored back after."""

    buffer: str
    source: str


@dataclass(frozen=True)
class Forward:
    """Scalar ``buffer`` holds the value of ``expression`` wherever it is read."""

    buffer: str
    expression: L.SExpr


@dataclass(frozen=True)
class Renamed:
    """``buffer`` is the declaration of ``original``, copied with its loop body under a new name."""

    buffer: str
    original: str


DataMap = Union[Copy, Forward, Renamed]
