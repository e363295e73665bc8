"""Copy elision: a local tile copied whole from a hoisted pack is read from the pack itself.

A tile ``T`` (rank ``r``, constant shape ``d``, no layout) declared by ``Alloc`` and followed by its copy
nest (the first node after the declaration that names ``T``: the ones before it, such as a pipeline stage's
other declarations and copies, do not touch it), loops ``v_0 .. v_{m-1}`` from 0 over constant extents
``n_i``, each loop's body the next loop alone and the innermost's one store

    T[f_0(v), ..., f_{r-1}(v)] = P[g(v)]

(no guard, no conversion, one dtype, ``P`` a hoisted pack without layout), is *forwarded* when every
``f_a`` is a mixed-radix combination of its own loops: each loop appears in exactly one ``f_a``, with
coefficient 1 on one of them and, in decreasing order of coefficients, each coefficient the product
of the extents of the loops after it, and ``d_a`` the product of the extents of ``f_a``'s loops. Then
``f`` is a bijection of the loop box onto ``T``'s cells, whose inverse at cell ``t`` is

    v_i = (t_a // c_i) mod n_i        (the most significant digit of each axis unreduced)

so after the nest ``T[t] = P[g(v(t))]`` for every cell ``t``. If, besides, nothing after the nest in
``T``'s scope (the rest of the enclosing body) writes ``T`` or declares another ``T``, and the kernel
proper writes ``P`` nowhere (a hoisted pack is filled before the kernel runs: ``lowering.packs``), every
later read ``T[t]`` (in bounds: the program's ``bounds`` obligation) reads what ``P[g(v(t))]`` holds;
the backend renders it so and emits neither ``T`` nor its nest. Anything else is copied as written
(``forwarding`` answers None).

The inverse's divisions fold where the loop ranges decide them (``fold``): ``(c*x + y) // c = x`` and
``(c*x + y) mod c = y`` when ``0 <= y < c`` over the ranges of the loops ``y`` reads, so a read of
strip ``x`` of a tile whose columns are ``c``-wide strips of the pack costs no division.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

from tilecert.lowering.program import Alloc, For, Node, Store, walk
from tilecert.semantics import loopir as L
from tilecert.semantics.index import IBin, IConst, IExpr, IVar, const_value, free_vars, ibin, linear, \
    substitute_many

Ranges = Mapping[int, tuple[int, int]]
"""Loop variable -> the constant range ``[lo, hi)`` it runs over where an expression is evaluated."""


@dataclass(frozen=True)
class Forwarding:
    """Tile ``buf`` forwarded to pack ``pack``: its cell ``t`` is ``pack[index]`` with ``index`` read at
    ``v = digits(t)`` (``digits``: per copy loop variable, the axis of ``T`` it indexes, its coefficient
    and extent); ``store`` is the elided copy."""

    buf: str
    pack: str
    index: tuple[IExpr, ...]
    digits: tuple[tuple[int, int, int, int, bool], ...]  # (loop var, axis, coefficient, extent, top digit)
    store: Store
    at: int = 0
    """The copy nest's position among the nodes after the declaration (the nodes before it do not name the tile)."""

    def read(self, t: tuple[IExpr, ...], ranges: Ranges) -> tuple[IExpr, ...]:
        """The pack index that holds tile cell ``t`` (the divisions of the inverse folded over ``ranges``)."""
        values: dict[int, IExpr] = {}
        for var, axis, c, n, top in self.digits:
            digit = fold(ibin("floordiv", t[axis], IConst(c)), ranges)
            values[var] = digit if top else fold(ibin("mod", digit, IConst(n)), ranges)
        return tuple(substitute_many(e, values) for e in self.index)


def _terms(e: IExpr) -> Optional[tuple[dict[int, int], int]]:
    """``e`` as ``sum_v k_v * v + k`` over loop variables (None when it is not of that form)."""
    coefficients: dict[int, int] = {}
    for var in sorted({v for v, axis in free_vars(e) if axis == 0}):
        term = linear(e, var)
        if term is None:
            return None
        coefficients[var], e = term
    constant = const_value(e, {})
    return None if constant is None or free_vars(e) else (coefficients, constant)


def fold(e: IExpr, ranges: Ranges) -> IExpr:
    """``e`` with a floor division or remainder by a constant ``c > 0`` at its root folded where ``ranges``
    decide it (module doc); ``e`` itself otherwise."""
    if not (isinstance(e, IBin) and e.op in ("floordiv", "mod") and isinstance(e.b, IConst) and e.b.value > 0):
        return e
    c, terms = e.b.value, _terms(e.a)
    if terms is None or any(v not in ranges for v in terms[0]):
        return e
    coefficients, constant = terms
    whole = {v: k // c for v, k in coefficients.items() if k % c == 0}
    low = high = constant
    for v, k in coefficients.items():
        if v not in whole:
            lo, hi = ranges[v]
            low, high = low + min(k * lo, k * (hi - 1)), high + max(k * lo, k * (hi - 1))
    if low < 0 or high >= c:
        return e
    quotient: IExpr = IConst(0)
    rest: IExpr = IConst(constant)
    for v, k in coefficients.items():
        if v in whole:
            quotient = ibin("add", quotient, ibin("mul", IConst(whole[v]), IVar(v, 0)))
        else:
            rest = ibin("add", rest, ibin("mul", IConst(k), IVar(v, 0)))
    return quotient if e.op == "floordiv" else rest


def _digits(loops: list[For], index: tuple[IExpr, ...], dims: list[int],
            bound: Mapping[str, int]) -> Optional[tuple[tuple[int, int, int, int, bool], ...]]:
    """Per copy loop (axis, coefficient, extent, top digit) when the store index is a mixed-radix bijection
    of the loop box onto the tile (module doc), else None."""
    extents = {lp.var: const_value(lp.hi, bound) for lp in loops}
    if any(lp.lo != IConst(0) or extents[lp.var] is None or extents[lp.var] <= 0 for lp in loops):
        return None
    out, seen = [], set()
    for axis, (e, d) in enumerate(zip(index, dims)):
        terms = _terms(e)
        if terms is None or terms[1] != 0 or seen & set(terms[0]) or not set(terms[0]) <= set(extents):
            return None
        seen |= set(terms[0])
        radix = 1
        order = sorted(terms[0].items(), key=lambda vk: vk[1])
        for k, (var, c) in enumerate(order):
            if c != radix:
                return None
            out.append((var, axis, c, extents[var], k == len(order) - 1))
            radix *= extents[var]
        if radix != d:
            return None
    return tuple(out) if seen == set(extents) else None


def _nest(node: Node) -> Optional[tuple[list[For], Node]]:
    """The perfectly nested loops from ``node`` and the one node they wrap (None: not a loop)."""
    loops: list[For] = []
    while isinstance(node, For) and len(node.body) == 1:
        loops.append(node)
        node = node.body[0]
    return (loops, node) if loops and not isinstance(node, For) else None


def _mentions(node: Node, buf: str) -> bool:
    """Whether ``node`` (at any depth) declares, writes or reads ``buf``."""
    return any(isinstance(n, (Store, Alloc)) and n.buf == buf or
               isinstance(n, Store) and any(ld.buf == buf for ld in L.loads(n.value)) for n in walk((node,)))


def forwarding(alloc: Alloc, rest: tuple[Node, ...], kernel: tuple[Node, ...], packs: Mapping[str, Alloc],
               bound: Mapping[str, int]) -> Optional[Forwarding]:
    """How ``alloc`` is forwarded to a pack, ``rest`` being the nodes after it in its body, ``kernel`` the
    kernel proper and ``packs`` the hoisted packs' declarations by buffer (module doc); None: copy it."""
    dims = [const_value(s, bound) for s in alloc.shape]
    at = next((k for k, n in enumerate(rest) if _mentions(n, alloc.buf)), None)
    if at is None or not dims or alloc.layout is not None or None in dims:
        return None
    found = _nest(rest[at])
    if found is None or not isinstance(found[1], Store):
        return None
    loops, st = found
    value = st.value
    if (st.buf != alloc.buf or st.accum is not None or st.atomic or not isinstance(value, L.Ld)
            or value.buf not in packs or value.dtype != alloc.dtype or len(st.index) != len(dims)):
        return None
    pack = packs[value.buf]
    if pack.layout is not None or pack.dtype != alloc.dtype:
        return None
    digits = _digits(loops, st.index, dims, bound)
    if digits is None:
        return None
    if any(isinstance(n, (Store, Alloc)) and n.buf == alloc.buf for n in walk(rest[at + 1:])):
        return None
    if any(isinstance(n, Store) and n.buf == value.buf for n in walk(kernel)):
        return None
    return Forwarding(alloc.buf, value.buf, value.index, digits, st, at)
