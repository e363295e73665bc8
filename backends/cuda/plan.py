"""How a lowered loop program runs on CUDA: host code, launches, thread dimensions, levels.

**Host code and launches** follow ``semantics.launch`` (the rules the checker's
``containment`` and ``hardware_limits`` apply to loop form): the top level runs on the
host; a loop bound to ``grid*`` (with the grid loops and guards nested directly in it: a
*grid nest*) is one kernel launch whose blocks are the grid loops' iterations, by slot
(``grid0`` is ``blockIdx.x``, 1 is y, 2 is z); a run of consecutive top-level statements
without grid loops is one launch of a single block; a top-level loop or guard that contains
grid loops stays host code, so each of its iterations launches its kernels in sequence
(the grid-wide order of the phases is the order of the launches). A top-level allocation
is device memory, zeroed, passed to every kernel launched in its scope. A launch
``semantics.launch`` refuses is a ``CudaUnsupported`` whose ``reason`` names the
obligation (``containment`` / ``hardware_limits``).

**Threads.** Loops bound to ``block0..2`` run on ``threadIdx.x..z``; with ``warp`` /
``lane`` bindings the x dimension holds ``warp_size * warps`` threads (``lane`` is
``threadIdx.x % warp_size``, ``warp`` is ``threadIdx.x / warp_size``; ``block0`` cannot be
used then). The launch extent of a thread dimension is the largest upper bound, over the
loops bound to it, of the loop's end, with every ``min`` term that reads a kernel variable
dropped; a loop shorter than the launch runs on the threads its range covers
(*launch-extent guard*).

**Levels.** Inside a kernel every statement sits at a *level*: the set of thread dimensions
bound by the loops around it. The program comes from the lowering pipeline
(``lowering.pipeline``), whose barrier pass made each block's execution explicit: every
statement but the ``__shared__`` allocations runs inside one loop per thread dimension,
representative threads are guards, and every barrier is a ``Sync`` of the program, which the
checker decided. The planner and the emitter insert none: an allocation at a level where some
dimensions are unbound is ``__shared__`` memory, one copy per coordinate of the bound
dimensions (``semantics.launch.placement``; the program zero-fills it); one at a level where
all are bound is thread-private. A thread loop that holds a barrier is run by every thread:
threads outside the loop's range follow its first iteration with every effect switched off
(*shadow threads*), so they reach the same barriers.

Paths (tuples of child positions from the launch body) identify the statements the plan
annotates.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional, Union

from tilecert.lowering.program import Alloc, For, Guard, Lowered, Node, Seq, Sync
from tilecert.semantics import launch as G
from tilecert.semantics.bindings import DEFAULT_TARGET, Target
from tilecert.semantics.index import IExpr

from .errors import CudaUnsupported

Path = tuple[int, ...]


def site_of(node: Node) -> G.Site:
    """``node`` as launch planning sees it (``semantics.launch``)."""
    if isinstance(node, For):
        return G.Site(node, "loop", tuple(map(site_of, node.body)), node.binding, node.var, node.lo, node.hi, node.name)
    if isinstance(node, Guard):
        return G.Site(node, "guard", tuple(map(site_of, node.body)))
    if isinstance(node, Seq):
        return G.Site(node, "seq", tuple(map(site_of, node.body)))
    if isinstance(node, Alloc):
        return G.Site(node, "alloc", name=node.buf, dtype=node.dtype, shape=node.shape)
    return G.Site(node, "sync" if isinstance(node, Sync) else "leaf")


def thread_dim(node: Node) -> Optional[str]:
    """The thread dimension a loop is bound to (None for other nodes and bindings)."""
    return site_of(node).thread_dim if isinstance(node, For) else None


def refused(e: G.LaunchRefusal) -> CudaUnsupported:
    return CudaUnsupported(e.message, e.hint, e.reason)


# ----------------------------------------------------------------------------- launches
@dataclass
class Launch:
    """One kernel: its body (a grid nest, or a run of single-block code) and its geometry (``shape``)."""

    index: int
    body: tuple[Node, ...]
    shape: G.LaunchShape
    target: Target
    inner_path: Path = ()
    plan: "Phases" = None  # type: ignore[assignment]

    @property
    def host_vars(self) -> tuple[int, ...]:
        return self.shape.host_vars

    @property
    def chain(self) -> tuple[Union[For, Guard], ...]:
        """The grid nest's loops and guards, outermost first."""
        return tuple(s.node for s in self.shape.chain)

    @property
    def inner(self) -> tuple[Node, ...]:
        """The block-level body inside the grid nest."""
        return tuple(s.node for s in self.shape.inner)

    @property
    def grid(self) -> dict[str, IExpr]:
        return self.shape.grid

    @property
    def dims(self) -> tuple[str, ...]:
        return self.shape.dims

    @property
    def extents(self) -> dict[str, IExpr]:
        return self.shape.extents

    def launch_dims(self) -> tuple[tuple[IExpr, ...], tuple[IExpr, ...]]:
        """The grid and block dimensions (x, y, z) over the sizes and host loop variables."""
        return G.grid_dims(self.shape), G.block_dims(self.shape, self.target)

    def extent(self, dim: str) -> Optional[int]:
        """The constant launch extent of ``dim`` (None when it depends on sizes)."""
        return G.launch_constant(self.shape, dim)


@dataclass(frozen=True)
class HostLoop:
    node: For
    body: tuple["HostItem", ...]


@dataclass(frozen=True)
class HostGuard:
    node: Guard
    body: tuple["HostItem", ...]


@dataclass(frozen=True)
class HostSeq:
    node: Seq
    body: tuple["HostItem", ...]


@dataclass(frozen=True)
class HostAlloc:
    node: Alloc


HostItem = Union[HostLoop, HostGuard, HostSeq, HostAlloc, Launch]
_HOST = {For: HostLoop, Guard: HostGuard, Seq: HostSeq}


class HostPlanner:
    """Splits the lowered program into host code and launches (``semantics.launch.host_split``)."""

    def __init__(self, lp: Lowered, target: Target) -> None:
        self.lp = lp
        self.target = target
        self.launches: list[Launch] = []

    def run(self) -> tuple[HostItem, ...]:
        return self.items(G.host_split(tuple(map(site_of, self.lp.body))))

    def items(self, parts: Iterable[G.HostPart]) -> tuple[HostItem, ...]:
        out: list[HostItem] = []
        for part in parts:
            node = part.sites[0].node
            if part.what == "alloc":
                out.append(HostAlloc(node))
            elif part.what == "host":
                out.append(_HOST[type(node)](node, self.items(part.parts)))
            else:
                out.append(self.launch(part))
        return tuple(out)

    def launch(self, part: G.HostPart) -> Launch:
        shape = G.launch_shape(part.sites, part.host_vars, self.target)
        if shape.refusals:
            raise refused(shape.refusals[0])
        k = Launch(len(self.launches), tuple(s.node for s in part.sites), shape, self.target,
                   (0,) * len(shape.chain))
        self.launches.append(k)
        k.plan = Phases(k)
        return k


# ----------------------------------------------------------------------------- rendering plan
@dataclass(frozen=True)
class Level:
    """Where a statement sits in a kernel: the thread dimensions bound by the loops around it."""

    bound: frozenset[str]


class Phases:
    """The rendering plan of one launch, keyed by path: the statements with one of the program's barriers
    inside (``synced``) and the ``__shared__`` allocations (``semantics.launch.placement``). It inserts
    nothing: barriers and representative threads are explicit in the program (``lowering.barriers``)."""

    def __init__(self, k: Launch) -> None:
        self.k = k
        self.dims = frozenset(k.dims)
        self.synced: set[Path] = set()
        placed = G.placement(k.shape, k.inner_path)
        self.shared: dict[Path, frozenset[str]] = placed.shared  # __shared__ allocations: the dims of their copies
        self.mark(k.inner, k.inner_path)

    def private(self, level: Level) -> bool:
        return level.bound >= self.dims

    def enter(self, node: Node, level: Level) -> Level:
        """The level of ``node``'s body."""
        dim = thread_dim(node)
        return Level(level.bound | {dim}) if dim is not None else level

    def mark(self, nodes: Iterable[Node], path: Path) -> bool:
        """Record the statements of ``nodes`` (at ``path``) that hold a barrier; whether any does."""
        found = False
        for k, node in enumerate(nodes):
            p = path + (k,)
            if isinstance(node, Sync) or self.mark(getattr(node, "body", ()), p):
                self.synced.add(p)
                found = True
        return found


def plan(lp: Lowered, target: Target = DEFAULT_TARGET) -> tuple[tuple[HostItem, ...], list[Launch]]:
    """The host structure of ``lp`` and its launches (each with its rendering plan) on ``target``."""
    planner = HostPlanner(lp, target)
    items = planner.run()
    return items, planner.launches
