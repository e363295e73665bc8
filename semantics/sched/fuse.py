"""fuse(outer, inner, name): merge two perfectly nested loops into one.

``for o in [0, N_o) { for i in [0, N_i) { B } }`` becomes
``for f in [0, N_o * N_i) { B[o := f // N_i, i := f mod N_i] }`` (mixed radix; the default
name is ``"o*i"``). The outer loop's body must be exactly the inner loop (a guard between them
is sunk onto ``B``); both loops must start at 0, have the same kind and be unbound, and
``N_i`` must not read ``o``. It is ``coalesce`` of a two-loop band.

Legality: ``tau(f) = (f // N_i, f mod N_i)`` is a bijection from ``[0, N_o * N_i)`` onto
``[0, N_o) x [0, N_i)`` (``coverage``) and increasing from the order of ``f`` to the
lexicographic order of ``(o, i)`` (``dependence``: every dependence keeps its direction).
The cut between ``o`` and ``i`` vanishes and must not be observed (``prefix_cut``).
"""
from __future__ import annotations

from typing import Optional

from .. import ir
from . import args as A
from .registry import schedule_op
from .base import names_arg
from ..transform import Transformed
from .coalesce import merge


@schedule_op("fuse", [A.LoopName(nesting=True), A.LoopName(inside="outer"), A.Optional(A.NewLoopName())])
def fuse(p: ir.Program, outer: str, inner: str, name: Optional[str] = None) -> Transformed:
    """Merge loop ``inner`` into the loop ``outer`` around it (see the module doc)."""
    return merge(p, names_arg([outer, inner], "loops", "fuse"), name, "fuse")
