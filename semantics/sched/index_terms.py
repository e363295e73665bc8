"""Index terms over a set of loops: the analysis privatize and stage share.

An index expression ``e`` of an access is split against loops ``v_1 .. v_m`` as

    e = o + sum_i c_i * v_i          (o free of the v_i, every c_i >= 0)

``o`` is the *outer part*; the *tile part* ``sum_i c_i * v_i`` ranges over
``[0, 1 + sum_i c_i * (n_i - 1))`` when each ``v_i`` runs over ``[0, n_i)`` with ``n_i`` fixed
outside the loops (the tile's extent on that axis).
"""
from __future__ import annotations

from typing import Sequence

from .. import loopir as L
from ..index import IConst, IExpr, IVar, free_vars, ibin, linear
from .base import ScheduleError


def split_terms(e: IExpr, loops: Sequence[L.Loop], op: str, buffer: str,
                hint: str) -> tuple[IExpr, tuple[tuple[L.Loop, int], ...]]:
    """``(o, ((v_i, c_i), ...))`` with ``e = o + sum c_i * v_i`` over the ``loops`` that ``e`` reads
    (``c_i > 0``); a ``ScheduleError`` (``hint``) when ``e`` is not an increasing affine function of one."""
    terms = []
    for lp in loops:
        lin = linear(e, lp.var)
        if lin is None or lin[0] < 0:
            raise ScheduleError(f"{op}: the index {e} of {buffer!r} is not an increasing affine function of "
                                f"loop {lp.name!r}", hint=hint)
        c, e = lin
        if c:
            terms.append((lp, c))
    return e, tuple(terms)


def tile_part(terms: Sequence[tuple[L.Loop, int]], op: str, buffer: str, fixed_before: str,
              hint: str) -> tuple[IExpr, IExpr]:
    """The tile part ``sum c_i * v_i`` of ``terms`` and its range ``1 + sum c_i * (n_i - 1)``; a
    ``ScheduleError`` (``hint``) when a loop does not start at 0 or its extent is not fixed before
    ``fixed_before``."""
    part, size = IConst(0), IConst(1)
    for lp, c in terms:
        if lp.start != IConst(0) or free_vars(lp.extent):
            raise ScheduleError(f"{op}: loop {lp.name!r} indexes {buffer!r} but runs over [{lp.start}, "
                                f"{lp.start} + {lp.extent}), not from 0 over an extent fixed before "
                                f"{fixed_before}", hint=hint)
        part = ibin("add", part, ibin("mul", IConst(c), IVar(lp.var, 0)))
        size = ibin("add", size, ibin("mul", IConst(c), ibin("sub", lp.extent, IConst(1))))
    return part, size
