"""layout: every swizzled buffer's layout map is a bijection of each (padded) row.

The interpreters and the checker's model read and write a swizzled buffer by logical index;
the backends store cell ``(P, col)`` at ``P * C + phys(P, col)`` (``semantics.layout``). The two
agree when, for the buffer's concrete minor dim ``C`` and every row ``P`` of it, ``phys(P, .)``
is a permutation of ``[0, C)``. Formula, for every declaration ``d`` of a buffer with a layout:

    forall P in [0, rows_d), c1, c2 in [0, C_d):
        0 <= phys(P, c1) < C_d  and  (phys(P, c1) = phys(P, c2) -> c1 = c2)

decided by z3 on 64-bit vectors (the ``int64_t`` arithmetic the backends render; ``rows_d`` is the
product of the leading dims where they are constants under the bound sizes, else every row an
``int64_t`` holds). A counterexample is ``(P, c1, c2)``: two columns of one row stored in one
place, or a column stored outside the row. A minor dim that is not a constant is unknown.
``bijective`` decides the formula for any map written over ``semantics.layout.Bits`` operands.
"""
from __future__ import annotations

import math
from typing import Callable, Optional

import z3

from tilecert.semantics.dtypes import dtype_of
from tilecert.semantics.index import const_value

from ..model import Model
from ..verdict import Instance, Verdict, Witness, disproved, proved, unknown

FORMULA = ("for every buffer with a layout: forall row P, columns c1, c2 in [0, C): 0 <= phys(P, c1) < C and "
           "(phys(P, c1) = phys(P, c2) -> c1 = c2)")
WIDTH = 64
ROWS_MAX = 2**63  # rows an int64_t indexes

PhysMap = Callable[[z3.BitVecRef, z3.BitVecRef], z3.BitVecRef]


def bijective(phys: PhysMap, minor: int, rows: int,
              timeout_ms: int) -> tuple[str, Optional[tuple[int, int, int, int]]]:
    """Whether ``phys(P, col)`` maps each row ``P < rows`` one-to-one into ``[0, minor)``: ``("proved", None)``,
    ``("disproved", (P, c1, c2, x))`` with ``x = phys(P, c1)`` (``c1 == c2``: ``x`` lies outside the row; else
    ``phys(P, c2) = x`` too) or ``("unknown", None)`` when z3 does not decide within ``timeout_ms``."""
    p, c1, c2 = (z3.BitVec(n, WIDTH) for n in ("P", "c1", "c2"))
    C = z3.BitVecVal(minor, WIDTH)
    x1, x2 = phys(p, c1), phys(p, c2)
    solver = z3.Solver()
    solver.set("timeout", timeout_ms)
    solver.add(z3.ULT(p, z3.BitVecVal(min(rows, ROWS_MAX), WIDTH)), z3.ULT(c1, C), z3.ULT(c2, C),
               z3.Or(z3.Not(z3.ULT(x1, C)), z3.And(x1 == x2, c1 != c2)))
    answer = solver.check()
    if answer == z3.unsat:
        return "proved", None
    if answer == z3.sat:
        model = solver.model()
        row, a, b, x = (model.eval(v, model_completion=True).as_signed_long() for v in (p, c1, c2, x1))
        return "disproved", (row, a, a if not 0 <= x < minor else b, x)
    return "unknown", None


def check(m: Model, timeout_ms: int) -> Verdict:
    undecided: list[str] = []
    for s in m.statements:
        if s.kind != "decl" or s.node.buf.layout is None:
            continue
        b = s.node.buf
        layout = b.layout
        minor = const_value(b.shape[-1], m.sizes) if b.shape else None
        if minor is None:
            undecided.append(f"{b.name}: its minor dim {b.shape[-1] if b.shape else '(rank 0)'} is not a constant")
            continue
        leading = [const_value(n, m.sizes) for n in b.shape[:-1]]
        rows = ROWS_MAX if None in leading else math.prod(leading)  # type: ignore[arg-type]
        size = dtype_of(b.dtype).itemsize
        status, point = bijective(lambda row, col: layout.column(row, col, minor, size), minor, rows, timeout_ms)
        if status == "unknown":
            undecided.append(f"{b.name}: z3 did not decide within {timeout_ms} ms")
        elif status == "disproved":
            row, c1, c2, x = point  # type: ignore[misc]
            what = (f"column {c1} of row {row} is stored at column {x}, outside the row [0, {minor})" if c1 == c2 else
                    f"columns {c1} and {c2} of row {row} are both stored at column {x}")
            return disproved(Witness(f"{layout} of {b.name} (minor dim {minor}) is no bijection of a row: {what}",
                                     instances=(Instance(s.label(), ()),), cell=f"{b.name} row {row}"), "z3")
    if undecided:
        return unknown("; ".join(undecided), "z3")
    return proved("z3")
