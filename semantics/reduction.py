"""Reduction policies: the computations each policy admits, and how the interpreters pick one;
the merge of each update of a reduce region (``classify_updates``), which expansion and the
interpreters share.

Contributions ``x[0..n-1]`` (stacked on one axis, axis 0 unless told otherwise, in source
order: lexicographic over the domain) are combined with a seed ``z`` and a merge function:

- ``fold_left``:  ``merge(...merge(merge(z, x0), x1)..., x[n-1])``
- ``fold_right``: ``merge(x0, merge(x1, ... merge(x[n-1], z)))`` for custom reducers;
  a reduce *region* replays its update body over the contributions in reverse instead.
- ``ordered_tree``: any binary tree over ``z, x0, ..., x[n-1]`` in this order.
- ``unordered_tree``: any binary tree over any permutation of them (seed counted once).

The canonical tree is the balanced pairwise one (adjacent pairs, level by level, an odd
last item carried up), merged with the seed last: ``merge(z, tree(x0..x[n-1]))``. In
adversarial mode a random tree (and, for unordered trees, a random permutation) is drawn
from the seeded generator.
"""
from __future__ import annotations

from typing import Callable, Mapping, Optional

import numpy as np

from . import ir
from .errors import ExecutionError

Merge = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _at(ndim: int, axis: int, key) -> tuple:
    """An index tuple selecting ``key`` (an int or a slice) along ``axis``."""
    axis = axis % ndim
    return (slice(None),) * axis + (key,)


def balanced_tree(items: np.ndarray, merge: Merge, axis: int = 0) -> np.ndarray:
    """Pairwise tree over ``items`` along ``axis`` (n >= 1), level by level."""
    nd = items.ndim
    while items.shape[axis] > 1:
        n = items.shape[axis]
        pairs = merge(items[_at(nd, axis, slice(0, n - 1, 2))], items[_at(nd, axis, slice(1, n, 2))])
        items = np.concatenate([pairs, items[_at(nd, axis, slice(n - 1, n))]], axis=axis) if n % 2 else pairs
    return items[_at(nd, axis, 0)]


def random_tree(items: list[np.ndarray], merge: Merge, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random split point at each node, keeping the items' order."""
    if len(items) == 1:
        return items[0]
    cut = int(rng.integers(1, len(items)))
    return merge(random_tree(items[:cut], merge, rng), random_tree(items[cut:], merge, rng))


def fold_left(seed: np.ndarray, items: np.ndarray, merge: Merge, ufunc: Optional[np.ufunc] = None,
              axis: int = 0) -> np.ndarray:
    """Strict left fold; a ufunc's ``accumulate`` is exactly this sequence of operations."""
    nd = items.ndim
    n = items.shape[axis]
    if n == 0:
        return seed
    if ufunc is not None:
        rest = items.shape[:axis % nd] + items.shape[axis % nd + 1:]
        first = np.expand_dims(np.broadcast_to(seed, rest), axis % nd)
        stacked = np.concatenate([first.astype(items.dtype, copy=False), items], axis=axis)
        return ufunc.accumulate(stacked, axis=axis, dtype=stacked.dtype)[_at(nd, axis, -1)]
    acc = seed
    for i in range(n):
        acc = merge(acc, items[_at(nd, axis, i)])
    return acc


def fold_right(seed: np.ndarray, items: np.ndarray, merge: Merge, axis: int = 0) -> np.ndarray:
    nd = items.ndim
    acc = seed
    for i in range(items.shape[axis] - 1, -1, -1):
        acc = merge(items[_at(nd, axis, i)], acc)
    return acc


def combine(seed: np.ndarray, items: np.ndarray, merge: Merge, policy: str, adversarial: bool,
            rng: np.random.Generator, ufunc: Optional[np.ufunc] = None, axis: int = 0) -> np.ndarray:
    """Combine ``items`` (along ``axis``) with ``seed`` as ``policy`` admits (see module doc).

    ``seed`` broadcasts against one item (``items`` without ``axis``).
    """
    if policy == "fold_left":
        return fold_left(seed, items, merge, ufunc, axis)
    if policy == "fold_right":
        return fold_right(seed, items, merge, axis)
    nd = items.ndim
    n = items.shape[axis]
    if n == 0:
        return seed
    if not adversarial:
        return merge(seed, balanced_tree(items, merge, axis))
    rest = items.shape[:axis % nd] + items.shape[axis % nd + 1:]
    leaves = [np.broadcast_to(seed, rest)] + [items[_at(nd, axis, i)] for i in range(n)]
    if policy == "unordered_tree":
        leaves = [leaves[i] for i in rng.permutation(len(leaves))]
    return random_tree(leaves, merge, rng)


def classify_updates(op: ir.Reduce, types: Mapping[int, ir.TileType]) -> Optional[list[Optional[str]]]:
    """For each carried state, the merge its update uses (None: passed through unchanged).

    An update ``s' = s (+ * max min & |) e`` or ``s' = s - e`` or ``s' = mma(a, b, s)``
    whose contribution ``e`` (or ``a``, ``b``) does not depend on any state has merge
    ``+``, ``*``, ... (``-`` merges by ``+`` of negated contributions). Any other update
    returns None for the whole region: no tree is admitted without a known merge.
    """
    args = [v.id for v in op.body.args]
    defs = {r.id: o for o in op.body.ops for r in ir.results_of(o)}
    dependent = set(args)
    for o in ir.walk(op.body):
        reads = set(ir.operands_of(o))
        if reads & dependent:
            dependent |= {r.id for r in ir.results_of(o)}
    merges: list[Optional[str]] = []
    for arg, y in zip(args, op.body.yields):
        if y == arg:
            merges.append(None)
            continue
        d = defs.get(y)
        if isinstance(d, ir.Binary) and d.fn in ("add", "mul", "min", "max", "and", "or", "sub"):
            other = d.b if d.a == arg else (d.a if d.b == arg and d.fn != "sub" else None)
            if other is not None and other not in dependent and types[other] == types[arg]:
                merges.append(d.fn)
                continue
        if isinstance(d, ir.Mma) and d.c == arg and d.a not in dependent and d.b not in dependent:
            merges.append("add")
            continue
        return None
    return merges


def tree_merges(op: ir.Reduce, merges: Optional[list[Optional[str]]]) -> list[Optional[str]]:
    """``merges`` (``classify_updates(op)``) of a tree-policy reduce region; a tree needs a known merge for
    every update, so None is refused (``ExecutionError`` at the region): its meaning is no fold."""
    if merges is None:
        raise ExecutionError(f"reduce region with policy {op.policy} has an update with no known merge",
                             op.loc, "write the update as s = s + x (or *, max, min, -, mma), or use "
                                     "policy='fold_left' for a strict fold")
    return merges
