"""Copy elision: a local tile that is a whole row-major window of a hoisted pack becomes a view of it.

A tile ``T`` (rank ``r``, constant shape ``d``, no layout) declared by ``Alloc`` and followed at once
by its copy nest

    for v_0 in [0, d_0) ... for v_{r-1} in [0, d_{r-1}):  T[v_0, ..., v_{r-1}] = P[e]

(each loop's body the next loop alone, the innermost's the store alone: no guard, no conversion,
``T`` and the pack ``P`` of one dtype, ``P`` without layout and of constant shape) holds, after the
nest, ``T[t] = P[flat_P(e(t))]``. When the row-major offset ``flat_P(e)`` is, by ``index.linear``,

    flat_P(e) = base + sum_k v_k * s_k,    s_k = d_{k+1} * ... * d_{r-1}   (T's row-major strides)

with ``base`` free of every ``v_k``, that cell is ``P[base + flat_T(t)]``: the window of ``P`` that
starts at ``base`` is ``T``'s cells in ``T``'s own order. If, besides, nothing after the nest in
``T``'s scope (the rest of the enclosing body) writes ``T`` or declares another ``T``, and the kernel
proper writes ``P`` nowhere (a hoisted pack is filled before the kernel runs: ``lowering.packs``), then
every later read ``T[t]`` reads what ``P[base + flat_T(t)]`` holds, so the backend may declare
``T`` as a pointer to ``P + base`` and drop the nest. ``base`` reads only sizes, constants and loops
enclosing the declaration, none of which changes while ``T`` lives. Anything else is copied as
written (``pack_view`` answers None).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Optional

from tilecert.lowering.program import Alloc, For, Node, Store, walk
from tilecert.semantics import loopir as L
from tilecert.semantics.index import IConst, IExpr, IVar, const_value, free_vars, ibin, linear


@dataclass(frozen=True)
class View:
    """Tile ``buf`` is the window of pack ``pack`` starting at offset ``base`` (the copy at ``store`` elided)."""

    buf: str
    pack: str
    base: IExpr
    store: Store


def _nest(node: Node, rank: int) -> Optional[tuple[list[For], Store]]:
    """The ``rank`` perfectly nested loops from ``node`` and the store they wrap alone (None otherwise)."""
    loops: list[For] = []
    while isinstance(node, For) and len(loops) < rank:
        loops.append(node)
        if len(node.body) != 1:
            return None
        node = node.body[0]
    return (loops, node) if len(loops) == rank and isinstance(node, Store) else None


def pack_view(alloc: Alloc, rest: tuple[Node, ...], kernel: tuple[Node, ...], packs: Mapping[str, Alloc],
              bound: Mapping[str, int]) -> Optional[View]:
    """The view ``alloc`` may be declared as, ``rest`` being the nodes after it in its body, ``kernel`` the
    kernel proper and ``packs`` the hoisted packs' declarations by buffer (module doc); None: copy it."""
    dims = [const_value(s, bound) for s in alloc.shape]
    if not rest or not dims or alloc.layout is not None or None in dims or min(dims) <= 0:
        return None
    found = _nest(rest[0], len(dims))
    if found is None:
        return None
    loops, st = found
    value = st.value
    if (st.buf != alloc.buf or st.accum is not None or st.atomic or not isinstance(value, L.Ld)
            or value.buf not in packs or value.dtype != alloc.dtype):
        return None
    pack = packs[value.buf]
    shape = [const_value(s, bound) for s in pack.shape]
    if pack.layout is not None or pack.dtype != alloc.dtype or None in shape or len(shape) != len(value.index):
        return None
    for lp, d, ix in zip(loops, dims, st.index):
        if lp.lo != IConst(0) or const_value(lp.hi, bound) != d or ix != IVar(lp.var, 0):
            return None
    flat: IExpr = value.index[0]
    for i, n in zip(value.index[1:], shape[1:]):
        flat = ibin("add", ibin("mul", flat, IConst(n)), i)
    for k, lp in enumerate(loops):
        term = linear(flat, lp.var)
        if term is None or term[0] != math.prod(dims[k + 1:]):
            return None
        flat = term[1]
    if {(lp.var, 0) for lp in loops} & free_vars(flat):
        return None
    if any(isinstance(n, (Store, Alloc)) and n.buf == alloc.buf for n in walk(rest[1:])):
        return None
    if any(isinstance(n, Store) and n.buf == value.buf for n in walk(kernel)):
        return None
    return View(alloc.buf, value.buf, flat, st)
