"""Tile layouts: how a buffer's logical cells are placed in its storage.

A buffer with no layout is stored row-major: cell ``t[i0, ..., i_{r-1}]`` at offset
``P * C + col``, where ``col = i_{r-1}``, ``C`` is the (possibly padded) minor dim and ``P`` the
row, the row-major linear index of ``(i0, ..., i_{r-2})`` over the leading dims. A ``Swizzle``
keeps the row and permutes the columns within it: the cell is stored at ``P * C + column(P, col)``.

- ``Swizzle("elem")``: ``column(P, col) = col ^ (P & (C - 1))``; requires rank >= 2 and a
  power-of-two minor dim ``C > 1``.
- ``Swizzle("b128")`` permutes whole 16-byte units: with ``E = 16 / elem_bytes`` elements per
  unit and ``U = C / E`` units per row, ``column(P, col) = ((col / E) ^ (P & (U - 1))) * E + col % E``;
  requires rank >= 2 and a minor dim of a whole number of units, ``U`` a power of two > 1.

The layout changes where a value lives, never which value a logical cell holds: the
interpreters and the checker's model keep logical indices, and what makes that sound is the
``layout`` obligation (``checker/obligations/layout.py``: the map is a bijection of each row
onto ``[0, C)``). The backends render every access of a swizzled buffer at its physical offset
(``physical_offset``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional, Protocol, Sequence, TypeVar

from .dtypes import dtype_of
from .index import IConst, IExpr

SWIZZLES = ("elem", "b128")
UNIT_BYTES = 16  # the unit b128 permutes


class Declared(Protocol):
    """What a layout reads of a buffer (``loopir.Buffer`` is one; loopir imports this module)."""

    name: str
    dtype: str
    shape: Sequence[IExpr]


class Bits(Protocol):
    """An integer-valued operand the layout maps are written over: a Python int, a z3 bit-vector, C text."""

    def __xor__(self, other): ...
    def __and__(self, other): ...
    def __or__(self, other): ...
    def __rshift__(self, other): ...
    def __lshift__(self, other): ...
    def __add__(self, other): ...
    def __mul__(self, other): ...


T = TypeVar("T", bound=Bits)


def _power_of_two(n: int) -> bool:
    return n > 1 and n & (n - 1) == 0


@dataclass(frozen=True)
class Swizzle:
    """An XOR swizzle of each row's columns (see the module doc); the element size is the buffer's dtype's."""

    kind: Literal["elem", "b128"]

    def __str__(self) -> str:
        return f"swizzle({self.kind})"

    def unit(self, elem_bytes: int) -> int:
        """``E``: the elements the XOR moves as one (1 for ``elem``, a 16-byte unit's for ``b128``)."""
        return 1 if self.kind == "elem" else max(UNIT_BYTES // elem_bytes, 1)

    def requirements(self, buffer: Declared) -> Optional[str]:
        """Why the layout cannot apply to ``buffer`` (None: it can)."""
        if self.kind not in SWIZZLES:
            return f"the swizzle is {self.kind!r}, not one of {', '.join(SWIZZLES)}"
        if len(buffer.shape) < 2:
            return f"{self} needs a buffer of rank >= 2; {buffer.name} has rank {len(buffer.shape)}"
        minor = buffer.shape[-1]
        if not isinstance(minor, IConst):
            return f"{self} needs a constant minor dim; {buffer.name}'s is {minor}"
        c, size = minor.value, dtype_of(buffer.dtype).itemsize
        if self.kind == "elem":
            if not _power_of_two(c):
                return f"{self} needs a power-of-two minor dim > 1; {buffer.name}'s is {c}"
            return None
        if (c * size) % UNIT_BYTES:
            return (f"{self} needs a minor dim of whole {UNIT_BYTES}-byte units; {buffer.name}'s is {c} x {size} "
                    f"= {c * size} bytes")
        units = c * size // UNIT_BYTES
        if not _power_of_two(units):
            return (f"{self} needs a minor dim spanning a power-of-two count > 1 of {UNIT_BYTES}-byte units; "
                    f"{buffer.name}'s spans {units}")
        return None

    def column(self, row: T, col: T, minor: int, elem_bytes: int) -> T:
        """The physical column of logical ``(row, col)`` in a row of ``minor`` columns: the formula of the module
        doc, with ``/ E``, ``* E`` and ``% E`` written as shifts and a mask (``E`` is a power of two)."""
        e = self.unit(elem_bytes)
        if e == 1:
            return col ^ (row & (minor - 1))
        shift = e.bit_length() - 1
        return (((col >> shift) ^ (row & (minor // e - 1))) << shift) | (col & (e - 1))


def physical_offset(layout: Swizzle, index: Sequence[T], shape: Sequence[T], minor: int, elem_bytes: int) -> T:
    """The storage offset of cell ``index`` of a buffer of ``shape`` (rank >= 2, minor dim the constant ``minor``)
    under ``layout``: ``P * C + column(P, col)`` with ``P`` the row-major index of the leading coordinates."""
    row = index[0]
    for i, n in zip(index[1:-1], shape[1:-1]):
        row = row * n + i
    return row * shape[-1] + layout.column(row, index[-1], minor, elem_bytes)
