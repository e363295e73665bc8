"""tile(loops, sizes): split each loop of a perfectly nested band, then all outers before all inners.

``tile(["i", "j"], [bi, bj])`` on ``for i { for j { B } }`` is ``split(i, bi)``, ``split(j, bj)``
(guard tails) and ``reorder([i.o, j.o, i.i, j.i])``: the new nest is
``for i.o { for j.o { for i.i { for j.i { if g_i && g_j { B[i := bi*i.o + i.i, j := bj*j.o + j.i] } } } } }``
with the remainder guards ``g`` sunk onto the body (and folded by the simplifier when the
extents prove them). The loops must form a perfectly nested band (guards allowed); their order
in ``loops`` is the order of the outers and of the inners. Returns the outer names, then the
inner names.

Legality is that of its parts, composed: ``tau`` is the splits' maps
``l := b_l * l.o + l.i`` under their guards (``compose``), and the obligations are those of each
split (``coverage``, ``dependence``) and of the reorder (``dependence`` under the permutation,
``prefix_cut``).
"""
from __future__ import annotations

from .. import ir
from . import args as A
from .registry import schedule_op
from .. import loopir as L
from .base import band
from ..transform import Tau, Transformed, compose
from .reorder import reorder
from .split import split


@schedule_op("tile", [A.ListOf(A.LoopName(), distinct=True), A.ListOf(A.PosInt(), length_of="loops")])
def tile(p: ir.Program, loops: list[str], sizes: list[int]) -> Transformed:
    """Tile the perfectly nested band ``loops`` by ``sizes`` (see the module doc)."""
    names, factors = tuple(loops), list(sizes)
    band(p, names, "tile")  # checked before splitting, so that errors name the loops the caller named
    old_vars = frozenset(lp.var for lp in L.loops(p.body))
    tau, obligations, outers, inners = Tau(), [], [], []
    for n, f in zip(names, factors):
        t = split(p, n, f)
        p, tau = t.program, compose(tau, t.tau, old_vars)
        obligations.extend(t.obligations)
        outers.append(t.handles[0])
        inners.append(t.handles[1])
    t = reorder(p, outers + inners)
    obligations.extend(t.obligations)
    return Transformed(t.program, compose(tau, t.tau, old_vars), tuple(obligations), tuple(outers + inners))
