"""The target model: hardware limits and the containment order of execution scopes.

``Target`` is configurable; the default describes a CUDA device (1024 threads per block,
block dimensions 1024 x 1024 x 64, grid dimensions (2^31 - 1) x 65535 x 65535, warps of 32
lanes, 48 KiB of shared memory per block without opt-in, sizes that fit a 32-bit index:
``max_size`` bounds the symbolic sizes in the hardware-limit checks). Its ``containment`` pairs
``(outer, inner)`` generate a partial order (reflexive-transitive closure): an instance of
the outer scope owns instances of the inner one. By default grid > block > warp > lane >
vector and core > vector; core and the GPU scopes are incomparable.
"""
from __future__ import annotations

from dataclasses import dataclass

HARDWARE_KINDS = ("grid", "block", "warp", "lane", "vector", "core")


@dataclass(frozen=True)
class Target:
    name: str = "cuda"
    max_threads_per_block: int = 1024
    max_block: tuple[int, int, int] = (1024, 1024, 64)
    max_grid: tuple[int, int, int] = (2 ** 31 - 1, 65535, 65535)
    warp_size: int = 32
    max_shared_bytes: int = 48 * 1024
    max_size: int = 2 ** 31 - 1  # symbolic sizes index with 32-bit integers on this target
    containment: tuple[tuple[str, str], ...] = (("grid", "block"), ("block", "warp"), ("warp", "lane"),
                                                ("lane", "vector"), ("core", "vector"))

    def contains(self, outer: str, inner: str) -> bool:
        """Whether one instance of scope ``outer`` owns instances of scope ``inner`` (outer != inner)."""
        frontier, seen = [outer], set()
        while frontier:
            k = frontier.pop()
            for a, b in self.containment:
                if a == k and b not in seen:
                    if b == inner:
                        return True
                    seen.add(b)
                    frontier.append(b)
        return False


DEFAULT_TARGET = Target()
