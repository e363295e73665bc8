"""How a lowered loop program runs on CUDA: host code, launches, thread dimensions, barrier phases.

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
bound by the loops around it. Where all dimensions are bound the level is *private*: each
thread runs its own instance. Elsewhere (*shared* levels, e.g. the block level of a grid
nest) one instance is shared by the threads that differ in the unbound dimensions:

- an assignment, or a loop / guard / copy without thread loops and barriers (a
  *representative region*), is run by the thread whose unbound coordinates are all 0;
- an allocation is ``__shared__`` memory, one copy per coordinate of the bound dimensions,
  zeroed cooperatively (allocations at private levels or in representative regions are
  thread-private arrays);
- in the interpreter the statements of a sequence run one after the other, each completely;
  on CUDA their instances run on different threads, so a barrier (``__syncthreads()``, or
  ``__syncwarp()`` when only the lane is unbound) is placed before a statement whose cells
  conflict with those of an earlier statement of the same phase (one writes a buffer the
  other accesses, unless a single representative thread runs both), and at the end of a
  loop body whose last phase conflicts with the body. A barrier the program states is kept
  where it is and ends the phase.

A barrier must be reached by all threads of the block, so a thread loop that contains one
(stated or placed) is run by every thread: threads outside the loop's range follow its first
iteration with every effect switched off (*shadow threads*), so they reach the same
barriers. A placed barrier under a guard or loop bound that differs between threads of the
block would be divergent where the program is not: ``BackendError``. A stated barrier
under such control is emitted as it stands (the program's barrier divergence is then the
kernel's, which the host emulation reports).

Paths (tuples of child positions from the launch body) identify the statements the plan
annotates.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, Optional, Union

from tilecert.lowering.program import Alloc, For, Guard, Lowered, Node, Seq, Store, Sync
from tilecert.semantics import launch as G
from tilecert.semantics import loopir as L
from tilecert.semantics.bindings import DEFAULT_TARGET, Target
from tilecert.semantics.index import IExpr, free_vars

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


def nodes_in(node: Node) -> Iterator[Node]:
    """``node`` and every node nested in it."""
    yield node
    for child in getattr(node, "body", ()):
        yield from nodes_in(child)


def loop_vars(e: IExpr) -> set[int]:
    return {v for v, _ in free_vars(e)}


def effects(node: Node) -> tuple[frozenset[str], frozenset[str]]:
    """``(W, A)``: the buffers ``node`` writes and those it accesses."""
    written: set[str] = set()
    accessed: set[str] = set()
    for n in nodes_in(node):
        if isinstance(n, Store):
            written.add(n.buf)
            accessed.add(n.buf)
            accessed.update(ld.buf for ld in L.loads(n.value))
        elif isinstance(n, Alloc):
            written.add(n.buf)
            accessed.add(n.buf)
    return frozenset(written), frozenset(accessed)


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


# ----------------------------------------------------------------------------- barrier phases
@dataclass(frozen=True)
class Level:
    """Where a statement sits in a kernel: the dimensions bound around it, the loop variables whose
    value differs between threads, why the control around it may differ between threads, and
    whether it is inside a representative region."""

    bound: frozenset[str]
    varying: frozenset[int] = frozenset()
    divergent: Optional[str] = None
    rep: bool = False


Pending = list[tuple[frozenset[str], frozenset[str], bool]]


class Phases:
    """The barrier plan of one launch (see the module docstring), keyed by path."""

    def __init__(self, k: Launch) -> None:
        self.k = k
        self.dims = frozenset(k.dims)
        self.before: dict[Path, str] = {}  # a placed barrier before the statement: its scope
        self.back_edge: dict[Path, str] = {}  # a placed barrier at the end of the loop's body
        self.synced: set[Path] = set()  # statements with a barrier (stated or placed) inside
        placed = G.placement(k.shape, k.inner_path)
        self.shared: dict[Path, frozenset[str]] = placed.shared  # __shared__ allocations: the dims of their copies
        self.rep: set[Path] = placed.rep  # representative regions
        self.private_names: set[str] = placed.private_names
        self.sequence(k.inner, k.inner_path, Level(frozenset()), [])

    # ------------------------------------------------------------------ helpers
    def private(self, level: Level) -> bool:
        return level.bound >= self.dims

    def scope(self, level: Level) -> str:
        return "warp" if self.dims - level.bound <= {"lane"} else "block"

    def enter(self, node: Node, level: Level) -> Level:
        """The level of ``node``'s body."""
        if isinstance(node, For):
            dim = thread_dim(node)
            if dim is not None:  # never one bound around it (launch_shape refuses that)
                return Level(level.bound | {dim}, level.varying | {node.var}, level.divergent, level.rep)
            if (loop_vars(node.lo) | loop_vars(node.hi)) & level.varying:
                return Level(level.bound, level.varying | {node.var}, f"the bounds of loop {node.name}", level.rep)
        if isinstance(node, Guard) and loop_vars(node.cond) & level.varying:
            return Level(level.bound, level.varying, f"the guard {node.cond}", level.rep)
        return level

    def mark(self, path: Path) -> None:
        for n in range(len(path) + 1):
            self.synced.add(path[:n])

    def place(self, table: dict[Path, str], path: Path, level: Level, where: str) -> None:
        if level.divergent is not None:
            raise CudaUnsupported(
                f"a barrier is needed {where} but {level.divergent} differs between the threads of a block",
                "move the guard (or the loop) inside the thread loops, or state the barrier in the program")
        table[path] = self.scope(level)
        self.mark(path if table is self.back_edge else path[:-1])

    # ------------------------------------------------------------------ barriers
    def visible(self, node: Node) -> tuple[frozenset[str], frozenset[str]]:
        w, a = effects(node)
        return w - self.private_names, a - self.private_names

    def sequence(self, nodes: Iterable[Node], path: Path, level: Level, pending: Pending) -> Pending:
        for k, node in enumerate(nodes):
            p = path + (k,)
            if isinstance(node, Sync):
                self.mark(p[:-1])
                if node.scope == "block" or self.scope(level) == "warp":
                    pending = []
                continue
            if self.private(level) or level.rep:
                if isinstance(node, (For, Guard, Seq)):
                    self.sequence(node.body, p, self.enter(node, level), [])
                continue
            w, a = self.visible(node)
            if isinstance(node, Seq) and p not in self.rep:
                pending = self.sequence(node.body, p, level, pending)
                continue
            rep = p in self.rep or isinstance(node, Store)
            if _conflict(pending, w, a, rep):
                self.place(self.before, p, level, f"before {_describe(node)}")
                pending = []
            if rep or isinstance(node, Alloc) or thread_dim(node) is not None:
                pending = pending + [(w, a, rep)]
                if thread_dim(node) is not None:
                    self.sequence(node.body, p, self.enter(node, level), [])
                continue
            end = self.sequence(node.body, p, self.enter(node, level), [])
            if isinstance(node, For) and _conflict(end, w, a, False):
                self.place(self.back_edge, p, self.enter(node, level), f"at the end of each iteration of {node.name}")
                end = []
            pending = pending + end
        return pending


def _conflict(pending: Pending, w: frozenset[str], a: frozenset[str], rep: bool) -> bool:
    return any(not (p_rep and rep) and (pw & a or w & pa) for pw, pa, p_rep in pending)


def _describe(node: Node) -> str:
    if isinstance(node, For):
        return f"loop {node.name}"
    if isinstance(node, Store):
        return f"the store to {node.buf}"
    if isinstance(node, Alloc):
        return f"the allocation of {node.buf}"
    return "a guarded block"


def plan(lp: Lowered, target: Target = DEFAULT_TARGET) -> tuple[tuple[HostItem, ...], list[Launch]]:
    """The host structure of ``lp`` and its launches (each with its barrier plan) on ``target``."""
    planner = HostPlanner(lp, target)
    items = planner.run()
    return items, planner.launches
