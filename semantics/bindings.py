"""Bindings: the DSL's execution scopes, loop form's bound scopes, their one containment order, the target.

**Loop-form scopes** (``Loop.binding`` without its slot): ``grid`` (the blocks of a launch,
slots 0..2 are x, y, z), ``block`` (the threads of a block, slots 0..2), ``warp`` (the warps
of a block), ``lane`` (the threads of a warp), ``vector`` (SIMD lanes), ``core`` (host
threads). ``THREAD_SCOPES`` are those whose participants are threads of one block (ordered
only by barriers).

**Containment.** ``CONTAINMENT`` pairs ``(outer, inner)`` generate a strict partial order
(transitive closure): one instance of the outer scope owns instances of the inner one.
grid > block > warp > lane > vector and core > vector; core and the GPU scopes are
incomparable. The checker's ``containment`` obligation (loop form) and capture's check of
``parallel(bind=...)`` (DSL) both read it through ``contains``.

**DSL bindings** name *units*: ``block`` (a CUDA block), ``warp``, ``thread``, ``vector``,
``core``. ``DSL_UNIT[word]`` is the loop-form scope one instance of which is one such unit
(a block is one instance of ``grid``, a thread one instance of ``lane``), so a DSL scope
contains another iff ``contains(DSL_UNIT[outer], DSL_UNIT[inner])``: block > warp > thread
> vector and core > vector. Expansion binds a region's loops by ``dsl_binding``: ``thread``
is a lane inside a ``warp`` region and a thread slot of the block (``block<slot>``)
elsewhere; a region's axes take slots innermost first (its last axis is x, slot 0).

**Target.** ``Target`` is the one hardware description: the checker's ``hardware_limits``
and ``containment``, the CUDA planner and emitter, and the C emitter read it.
``DEFAULT_TARGET`` is a CUDA sm_90 device (1024 threads per block; block dimensions
1024 x 1024 x 64; grid dimensions (2^31 - 1) x 65535 x 65535; warps of 32 lanes; 48 KiB of
*static* ``__shared__`` memory per block, the limit without the dynamic opt-in, which this
backend does not use; symbolic sizes index with 32-bit integers) and a C host whose core
count and vector width are left to the OpenMP runtime (``cores`` / ``vector_lanes`` None).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from .errors import CaptureError, Loc

SCOPES = ("grid", "block", "warp", "lane", "vector", "core")  # loop-form bound scopes
SLOTTED = ("grid", "block")  # scopes with positional slots 0..2 (x, y, z)
HARDWARE_INDICES = ("grid", "block", "warp", "lane")  # bound to a hardware index: such loops start at 0
THREAD_SCOPES = ("block", "warp", "lane")  # participants are threads of one block, ordered by barriers
INDEPENDENT_SCOPES = ("grid", "core", "vector")  # participants run without any order
PARTICIPANTS = {"block": THREAD_SCOPES, "warp": ("lane",)}  # a barrier of a scope synchronizes these loops
CONTAINMENT = (("grid", "block"), ("block", "warp"), ("warp", "lane"), ("lane", "vector"), ("core", "vector"))

DSL_UNIT = {"block": "grid", "warp": "warp", "thread": "lane", "vector": "vector", "core": "core"}
DSL_BINDINGS = tuple(DSL_UNIT)


def scope_of(binding: Optional[str]) -> Optional[str]:
    """A binding without its positional slot: ``"block1"`` -> ``"block"``."""
    return binding.rstrip("0123456789") if binding else binding


def slot_of(binding: str) -> int:
    """The positional slot of a binding (``"grid2"`` -> 2; 0 when none is written)."""
    digits = binding[len(binding.rstrip("0123456789")):]
    return int(digits) if digits else 0


def hardware_slot(binding: Optional[str]) -> Optional[str]:
    """The hardware index a binding occupies (``"block"`` and ``"block0"`` are ``"block0"``; warp and lane are
    one slot each), or None for other bindings."""
    scope = scope_of(binding)
    if scope in SLOTTED:
        return f"{scope}{slot_of(binding)}"
    return scope if scope in HARDWARE_INDICES else None


def contains(outer: str, inner: str, order: Iterable[tuple[str, str]] = CONTAINMENT) -> bool:
    """Whether one instance of scope ``outer`` owns instances of scope ``inner`` (strict: never for equals)."""
    pairs = tuple(order)
    frontier, seen = [outer], set()
    while frontier:
        k = frontier.pop()
        for a, b in pairs:
            if a == k and b not in seen:
                if b == inner:
                    return True
                seen.add(b)
                frontier.append(b)
    return False


def dsl_contains(outer: str, inner: str) -> bool:
    """Whether DSL scope ``outer`` may enclose DSL scope ``inner`` (the containment order on their units)."""
    return contains(DSL_UNIT[outer], DSL_UNIT[inner])


def dsl_binding(word: str, enclosing: Iterable[str]) -> str:
    """The loop-form scope of a region bound to DSL ``word`` inside regions bound to ``enclosing``."""
    if word == "thread":
        return "lane" if "warp" in enclosing else "block"
    return DSL_UNIT[word]


def region_bindings(word: str, enclosing: Iterable[str], rank: int, loc: Optional[Loc] = None) -> tuple[str, ...]:
    """Loop-form bindings of the ``rank`` axes of a region bound to DSL ``word`` inside regions bound to
    ``enclosing``, outermost axis first (the last axis is slot 0); ``CaptureError`` when its scope has fewer
    slots than axes."""
    scope = dsl_binding(word, tuple(enclosing))
    if scope in SLOTTED and rank <= 3:
        return tuple(f"{scope}{rank - 1 - a}" for a in range(rank))
    if rank == 1 or scope in ("vector", "core"):
        return (scope,) * rank
    raise CaptureError(f"a {rank}-d region bound to {word!r} (loop-form {scope}) has more axes than {scope} has slots",
                       loc, "bind block and thread regions of up to 3 axes, warp / lane regions of one axis")


@dataclass(frozen=True)
class Target:
    """The machine: CUDA limits (see the module docstring) and the C host's cores and vector width."""

    name: str = "cuda sm_90"
    max_threads_per_block: int = 1024
    max_block: tuple[int, int, int] = (1024, 1024, 64)
    max_grid: tuple[int, int, int] = (2 ** 31 - 1, 65535, 65535)
    warp_size: int = 32
    max_shared_bytes: int = 48 * 1024  # static __shared__ per block (no dynamic opt-in)
    max_size: int = 2 ** 31 - 1  # symbolic sizes index with 32-bit integers on this target
    containment: tuple[tuple[str, str], ...] = CONTAINMENT
    cores: Optional[int] = None  # C host threads of a `core` loop (None: the OpenMP runtime's choice)
    vector_lanes: Optional[int] = None  # SIMD lanes of a `vector` loop on the C host (None: the compiler's)

    def contains(self, outer: str, inner: str) -> bool:
        """Whether one instance of scope ``outer`` owns instances of scope ``inner`` in this target's order."""
        return contains(outer, inner, self.containment)

    def limit(self, binding: str) -> Optional[int]:
        """The largest extent one loop bound to ``binding`` may have (None: no per-loop limit)."""
        scope = scope_of(binding)
        if scope == "grid":
            return self.max_grid[slot_of(binding)]
        if scope == "block":
            return self.max_block[slot_of(binding)]
        return self.warp_size if scope == "lane" else None


DEFAULT_TARGET = Target()
