"""Reduction policies: the computations each policy admits, and how the interpreter picks one.

Contributions ``x[0..n-1]`` (stacked on axis 0, in source order: lexicographic over the
domain) are combined with a seed ``z`` and a merge function:

- ``fold_left``:  ``merge(...merge(merge(z, x0), x1)..., x[n-1])``
- ``fold_right``: ``merge(x0, merge(x1, ... merge(x[n-1], z)))`` for custom reducers;
  a reduce *region* replays its update body over the contributions in reverse instead.
- ``ordered_tree``: any binary tree over ``z, x0, ..., x[n-1]`` in this order.
- ``unordered_tree``: any binary tree over any permutation of them (seed counted once).

The canonical tree is the balanced pairwise one (adjacent pairs, level by level, an odd
last item carried up). In adversarial mode a random tree (and, for unordered trees, a
random permutation) is drawn from the seeded generator.
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

Merge = Callable[[np.ndarray, np.ndarray], np.ndarray]


def balanced_tree(items: np.ndarray, merge: Merge) -> np.ndarray:
    """Pairwise tree over ``items`` along axis 0 (n >= 1), level by level."""
    while items.shape[0] > 1:
        n = items.shape[0]
        pairs = merge(items[0:n - 1:2], items[1:n:2])
        items = np.concatenate([pairs, items[n - 1:]]) if n % 2 else pairs
    return items[0]


def random_tree(items: list[np.ndarray], merge: Merge, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random split point at each node, keeping the items' order."""
    if len(items) == 1:
        return items[0]
    cut = int(rng.integers(1, len(items)))
    return merge(random_tree(items[:cut], merge, rng), random_tree(items[cut:], merge, rng))


def fold_left(seed: np.ndarray, items: np.ndarray, merge: Merge, ufunc: Optional[np.ufunc] = None) -> np.ndarray:
    """Strict left fold; a ufunc's ``accumulate`` is exactly this sequence of operations."""
    if items.shape[0] == 0:
        return seed
    if ufunc is not None:
        stacked = np.concatenate([np.broadcast_to(seed, items.shape[1:])[None], items])
        return ufunc.accumulate(stacked, axis=0)[-1]
    acc = seed
    for i in range(items.shape[0]):
        acc = merge(acc, items[i])
    return acc


def fold_right(seed: np.ndarray, items: np.ndarray, merge: Merge) -> np.ndarray:
    acc = seed
    for i in range(items.shape[0] - 1, -1, -1):
        acc = merge(items[i], acc)
    return acc


def combine(seed: np.ndarray, items: np.ndarray, merge: Merge, policy: str, adversarial: bool,
            rng: np.random.Generator, ufunc: Optional[np.ufunc] = None) -> np.ndarray:
    """Combine ``items`` (axis 0) with ``seed`` as ``policy`` admits (see module doc)."""
    if policy == "fold_left":
        return fold_left(seed, items, merge, ufunc)
    if policy == "fold_right":
        return fold_right(seed, items, merge)
    if items.shape[0] == 0:
        return seed
    if not adversarial:
        return merge(seed, balanced_tree(items, merge))
    leaves = [np.broadcast_to(seed, items.shape[1:])] + [items[i] for i in range(items.shape[0])]
    if policy == "unordered_tree":
        leaves = [leaves[i] for i in rng.permutation(len(leaves))]
    return random_tree(leaves, merge, rng)
