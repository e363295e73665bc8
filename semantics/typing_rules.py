"""Typing rules of tile operations: broadcasting by dim identity, mma roles, store alignment.

Broadcasting (reference Tile DSL 3.9): the result's dims are the identity join of the
operands' dims, ordered by the highest-rank operand first (the first operand on a tie),
then the other operand's remaining dims in their order. A shared dim needs equal extents
or a unit extent on one side. Positional dims share identity by position from the right,
so positional shapes broadcast like array shapes.
"""
from __future__ import annotations

from typing import Optional, Sequence

from . import ir
from .errors import TypeMismatch
from .index import IConst, IExpr


def same_extent(a: IExpr, b: IExpr) -> bool:
    return a == b


def broadcast_types(dtype: str, types: Sequence[ir.TileType], what: str) -> ir.TileType:
    """The result type of an elementwise op over ``types`` (result dtype given)."""
    order = sorted(range(len(types)), key=lambda i: -types[i].rank)
    dims: list[ir.Dim] = []
    shape: list[IExpr] = []
    for i in order:
        for d, s in zip(types[i].dims, types[i].shape):
            if d in dims:
                j = dims.index(d)
                if same_extent(shape[j], s) or s == IConst(1):
                    continue
                if shape[j] == IConst(1):
                    shape[j] = s
                    continue
                raise TypeMismatch(
                    f"{what}: tile broadcasting requires equal or singleton extents for shared dimensions; "
                    f"dim {d} has extents {shape[j]} and {s}",
                    hint="reshape or slice one operand, or give the operands different dims")
            dims.append(d)
            shape.append(s)
    return ir.TileType(dtype, tuple(dims), tuple(shape))


def align_axes(src: ir.TileType, dst: ir.TileType) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """How to lay ``src`` out in ``dst``'s axis order: ``(transpose, new_axis_positions)``."""
    present = [d for d in dst.dims if d in src.dims]
    perm = tuple(src.dims.index(d) for d in present)
    missing = tuple(i for i, d in enumerate(dst.dims) if d not in src.dims)
    return perm, missing


def store_perm(tile: ir.TileType, view_dims: Sequence[ir.Dim], extents: Sequence[IExpr],
               what: str) -> tuple[Optional[int], ...]:
    """For each box axis of a store, the tile axis written along it (None: unit axis).

    Dims match by identity when the tile's dims are all among the view's; otherwise the
    tile's axes map in order onto the box's non-unit axes (all box axes if ranks agree).
    """
    if tile.rank == 0:
        return tuple(None for _ in view_dims)
    if set(tile.dims) <= set(view_dims) and len(set(tile.dims)) == tile.rank:
        perm = tuple(tile.dims.index(d) if d in tile.dims else None for d in view_dims)
        for box_axis, t_axis in enumerate(perm):
            if t_axis is None and extents[box_axis] != IConst(1):
                raise TypeMismatch(f"{what}: the tile has no dim {view_dims[box_axis]} for box extent "
                                   f"{extents[box_axis]}", hint="store a tile with that dim or a unit extent")
    elif tile.rank == len(view_dims):
        perm = tuple(range(tile.rank))
    else:
        nonunit = [i for i, e in enumerate(extents) if e != IConst(1)]
        if len(nonunit) != tile.rank:
            raise TypeMismatch(f"{what}: a rank-{tile.rank} tile does not fit a box of rank {len(view_dims)}",
                               hint="give the box the tile's extents")
        it = iter(range(tile.rank))
        perm = tuple(next(it) if i in nonunit else None for i in range(len(view_dims)))
    for box_axis, t_axis in enumerate(perm):
        if t_axis is not None and not same_extent(tile.shape[t_axis], extents[box_axis]):
            raise TypeMismatch(f"{what}: tile extent {tile.shape[t_axis]} does not match box extent "
                               f"{extents[box_axis]}", hint="store into a box of the tile's shape")
    return perm


def mma_spec(a: ir.TileType, b: ir.TileType, c: ir.TileType) -> str:
    """An einsum spec for ``mma(a, b, c)``; roles come from dim identity.

    Batch dims appear in all three, contracted dims in a and b but not c, free dims of a
    and b in c. When identity gives no contraction and an operand has positional dims,
    the operands are read as matmul by position: a[..., m, k], b[..., k, n], c[..., m, n].
    """
    letters: dict[ir.Dim, str] = {}

    def name(d: ir.Dim) -> str:
        return letters.setdefault(d, "abcdefghijklmnopqrstuvwxyz"[len(letters)])

    contracted = [d for d in a.dims if d in b.dims and d not in c.dims]
    by_identity = (contracted and set(c.dims) <= set(a.dims) | set(b.dims)
                   and all(d in b.dims or d in c.dims for d in a.dims)
                   and all(d in a.dims or d in c.dims for d in b.dims))
    if by_identity:
        extent: dict[ir.Dim, IExpr] = {}
        for t in (a, b, c):
            for d, s in zip(t.dims, t.shape):
                if d in extent and not same_extent(extent[d], s):
                    raise TypeMismatch(f"mma extents disagree for dim {d}: {extent[d]} and {s}",
                                       hint="load the operands with matching tile extents")
                extent[d] = s
        return "".join(map(name, a.dims)) + "," + "".join(map(name, b.dims)) + "->" + "".join(map(name, c.dims))
    positional = any(d.positional for t in (a, b, c) for d in t.dims)
    if not positional:
        if not contracted:
            raise TypeMismatch("mma requires at least one contracted logical dimension (a dim of a and b, not of c)",
                               hint="give a and b a shared dim that the accumulator does not have")
        raise TypeMismatch("mma: every accumulator dim must come from a or b, and a dim of a (or b) absent from c "
                           "must be contracted with the other", hint="check the operands' dims")
    if not (a.rank == b.rank == c.rank and a.rank >= 2):
        raise TypeMismatch(f"mma by position needs operands of equal rank >= 2, got {a.rank}, {b.rank}, {c.rank}",
                           hint="reshape the operands to [..., m, k], [..., k, n], [..., m, n]")
    pairs = [(a.shape[-1], b.shape[-2], "k"), (a.shape[-2], c.shape[-2], "m"), (b.shape[-1], c.shape[-1], "n")]
    for x, y, role in pairs:
        if not same_extent(x, y):
            raise TypeMismatch(f"mma extents disagree for the {role} dimension: {x} and {y}",
                               hint="a is [.., m, k], b is [.., k, n] and c is [.., m, n]")
    batch = "zyxwvutsrqpo"[: a.rank - 2][::-1]
    return f"{batch}mk,{batch}kn->{batch}mn"
