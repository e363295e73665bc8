"""How a lowered loop program runs on CUDA: host code, launches, thread dimensions, barrier phases.

**Host code and launches.** The program's top level runs on the host. A loop bound to
``grid*`` (with the grid loops and guards nested directly in it: a *grid nest*) is one
kernel launch whose blocks are the grid loops' iterations, by slot (``grid0`` is
``blockIdx.x``, 1 is y, 2 is z). A run of consecutive top-level statements without grid
loops is one launch of a single block. A top-level loop or guard that contains grid loops
stays host code, so each of its iterations launches its kernels in sequence (the
grid-wide order of the phases is the order of the launches). A top-level allocation is
device memory, zeroed, passed to every kernel launched in its scope. Grid loops anywhere
else (inside a kernel's serial loops or under its statements) would need a grid-wide
barrier: ``BackendError``.

**Threads.** Loops bound to ``block0..2`` run on ``threadIdx.x..z``; with ``warp`` /
``lane`` bindings the x dimension holds ``32 * warps`` threads (``lane`` is
``threadIdx.x % 32``, ``warp`` is ``threadIdx.x / 32``; ``block0`` cannot be used then).
The launch extent of a thread dimension is the largest upper bound, over the loops bound to
it, of the loop's end, with every ``min`` term that reads a kernel variable dropped; a loop
shorter than the launch runs on the threads its range covers (*launch-extent guard*).

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

from dataclasses import dataclass, field
from typing import Iterable, Iterator, Optional, Union

from tilecert.lowering.program import Alloc, For, Guard, Lowered, Node, Seq, Store, Sync
from tilecert.semantics import loopir as L
from tilecert.semantics.index import IBin, IConst, IExpr, free_vars, ibin

from .errors import CudaUnsupported

Path = tuple[int, ...]
BLOCK_DIMS = ("block0", "block1", "block2")
THREAD_DIMS = BLOCK_DIMS + ("warp", "lane")
GRID_SLOTS = ("grid0", "grid1", "grid2")
LANES = 32


def thread_dim(node: Node) -> Optional[str]:
    """The thread dimension a loop is bound to (None for other nodes and bindings)."""
    return node.binding if isinstance(node, For) and node.binding in THREAD_DIMS else None


def is_grid(node: Node) -> bool:
    return isinstance(node, For) and node.binding in GRID_SLOTS


def nodes_in(node: Node) -> Iterator[Node]:
    """``node`` and every node nested in it."""
    yield node
    for child in getattr(node, "body", ()):
        yield from nodes_in(child)


def has(node: Node, pred) -> bool:
    return any(pred(n) for n in nodes_in(node))


def loop_vars(e: IExpr) -> set[int]:
    return {v for v, _ in free_vars(e)}


def upper(e: IExpr, allowed: set[int]) -> Optional[IExpr]:
    """An upper bound of ``e`` reading only loop variables in ``allowed`` (``min`` terms that read
    others are dropped), or None."""
    if loop_vars(e) <= allowed:
        return e
    if isinstance(e, IBin) and e.op == "min":
        a, b = upper(e.a, allowed), upper(e.b, allowed)
        if a is not None and b is not None:
            return ibin("min", a, b)
        return a if a is not None else b
    return None


def nonnegative(e: IExpr) -> bool:
    """Whether ``e`` is evidently >= 0 (a constant, or a ``max`` with such a term)."""
    if isinstance(e, IConst):
        return e.value >= 0
    return isinstance(e, IBin) and e.op == "max" and (nonnegative(e.a) or nonnegative(e.b))


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


# ----------------------------------------------------------------------------- launches
@dataclass
class Launch:
    """One kernel: its body (a grid nest, or a run of single-block code) and its geometry."""

    index: int
    body: tuple[Node, ...]
    host_vars: tuple[int, ...]
    chain: tuple[Union[For, Guard], ...] = ()  # the grid nest's loops and guards, outermost first
    inner: tuple[Node, ...] = ()  # the block-level body inside the grid nest
    inner_path: Path = ()
    grid: dict[str, IExpr] = field(default_factory=dict)  # grid slot -> launch extent
    dims: tuple[str, ...] = ()  # thread dimensions, in rendering order
    extents: dict[str, IExpr] = field(default_factory=dict)  # thread dimension -> launch extent
    plan: "Phases" = None  # type: ignore[assignment]

    def launch_dims(self) -> tuple[tuple[IExpr, ...], tuple[IExpr, ...]]:
        """The grid and block dimensions (x, y, z) over the sizes and host loop variables."""
        one = IConst(1)
        grid = tuple(self.grid.get(f"grid{s}", one) for s in range(3))
        if "lane" in self.dims:
            x = ibin("mul", IConst(LANES), ibin("max", self.extents.get("warp", one), one))
        else:
            x = ibin("max", self.extents.get("block0", one), one)
        return grid, (x,) + tuple(ibin("max", self.extents.get(d, one), one) for d in ("block1", "block2"))

    def extent(self, dim: str) -> Optional[int]:
        """The constant launch extent of ``dim`` (None when it depends on sizes)."""
        e = IConst(LANES) if dim == "lane" else self.extents.get(dim, IConst(1))
        return e.value if isinstance(e, IConst) else None


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


class HostPlanner:
    """Splits the lowered program into host code and launches."""

    def __init__(self, lp: Lowered) -> None:
        self.lp = lp
        self.launches: list[Launch] = []

    def run(self) -> tuple[HostItem, ...]:
        return self.sequence(self.lp.body, ())

    def sequence(self, nodes: tuple[Node, ...], host_vars: tuple[int, ...]) -> tuple[HostItem, ...]:
        items: list[HostItem] = []
        run: list[Node] = []

        def flush() -> None:
            if run:
                items.append(self.launch(tuple(run), host_vars))
                run.clear()

        for node in nodes:
            if isinstance(node, Alloc):
                flush()
                items.append(HostAlloc(node))
            elif is_grid(node):
                flush()
                items.append(self.launch((node,), host_vars))
            elif has(node, is_grid):
                flush()
                if isinstance(node, For):
                    items.append(HostLoop(node, self.sequence(node.body, host_vars + (node.var,))))
                elif isinstance(node, Guard):
                    items.append(HostGuard(node, self.sequence(node.body, host_vars)))
                elif isinstance(node, Seq):
                    items.append(HostSeq(node, self.sequence(node.body, host_vars)))
            else:
                run.append(node)
        flush()
        return tuple(items)

    def launch(self, body: tuple[Node, ...], host_vars: tuple[int, ...]) -> Launch:
        k = Launch(len(self.launches), body, host_vars)
        self.launches.append(k)
        chain: list[Union[For, Guard]] = []
        inner, path = body, ()
        while len(inner) == 1 and (is_grid(inner[0]) or (chain and isinstance(inner[0], Guard))):
            chain.append(inner[0])
            inner, path = inner[0].body, path + (0,)
        k.chain, k.inner, k.inner_path = tuple(chain), inner, path
        allowed = set(host_vars)
        for node in chain:
            if not isinstance(node, For):
                continue
            if node.binding in k.grid:
                raise CudaUnsupported(f"grid loop {node.name} binds {node.binding} inside a loop bound to it",
                                      "bind nested grid loops to distinct slots")
            k.grid[node.binding] = self.extent_of(node, allowed)
        for node in inner:
            for n in nodes_in(node):
                if is_grid(n):
                    raise CudaUnsupported(
                        f"grid loop {n.name} is nested in a kernel's statements, not directly in a grid loop",
                        "the phases it separates need a grid-wide order: reorder or fission the loops so that grid "
                        "loops are outermost and each parallel phase is its own top-level grid loop")
        self.thread_geometry(k, allowed)
        k.plan = Phases(k)
        return k

    def extent_of(self, loop: For, allowed: set[int]) -> IExpr:
        if not nonnegative(loop.lo):
            raise CudaUnsupported(f"loop {loop.name} bound to {loop.binding} starts at {loop.lo}, not at 0 or above",
                                  "hardware-bound loops start at 0 (bind before partitioning)")
        hi = upper(loop.hi, allowed)
        if hi is None:
            raise CudaUnsupported(f"the launch extent of {loop.name} ({loop.binding}, ends at {loop.hi}) depends on "
                                  "variables of the kernel", "bind loops whose extent depends only on the sizes")
        return hi

    def thread_geometry(self, k: Launch, allowed: set[int]) -> None:
        ext: dict[str, IExpr] = {}
        for node in k.inner:
            for n in nodes_in(node):
                dim = thread_dim(n)
                if dim is not None:
                    hi = self.extent_of(n, allowed)
                    ext[dim] = ibin("max", ext[dim], hi) if dim in ext and ext[dim] != hi else hi
        if ("warp" in ext or "lane" in ext) and "block0" in ext:
            raise CudaUnsupported("a kernel binds block0 together with warp / lane",
                                  "with warps and lanes the x dimension holds them: bind block1 / block2 instead")
        if "lane" in ext:
            lanes = ext["lane"]
            if not (isinstance(lanes, IConst) and lanes.value <= LANES):
                raise CudaUnsupported(f"lane loops have extent up to {lanes}, not a constant <= {LANES}",
                                      "split the loop by 32 and bind the inner part to lane")
        if "warp" in ext:
            ext.setdefault("lane", IConst(LANES))
        k.dims = tuple(d for d in THREAD_DIMS if d in ext)
        k.extents = {d: e for d, e in ext.items() if d != "lane"}


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
        self.rep: set[Path] = set()  # representative regions
        self.shared: dict[Path, frozenset[str]] = {}  # __shared__ allocations: the dims of their copies
        self.private_names: set[str] = set()
        start = Level(frozenset())
        shared_names: set[str] = set()
        self.classify(k.inner, k.inner_path, start, shared_names)
        self.private_names -= shared_names
        self.sequence(k.inner, k.inner_path, start, [])

    # ------------------------------------------------------------------ helpers
    def private(self, level: Level) -> bool:
        return level.bound >= self.dims

    def scope(self, level: Level) -> str:
        return "warp" if self.dims - level.bound <= {"lane"} else "block"

    def representative(self, node: Node, level: Level) -> bool:
        """Whether ``node`` at a shared level is run by one representative thread."""
        if isinstance(node, Store):
            return True
        return isinstance(node, (For, Guard, Seq)) and not has(node, lambda n: thread_dim(n) is not None) \
            and not has(node, lambda n: isinstance(n, Sync))

    def enter(self, node: Node, level: Level) -> Level:
        """The level of ``node``'s body."""
        if isinstance(node, For):
            dim = thread_dim(node)
            if dim is not None:
                if dim in level.bound:
                    raise CudaUnsupported(f"loop {node.name} binds {dim} inside a loop bound to it",
                                          "bind nested thread loops to distinct dimensions")
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

    # ------------------------------------------------------------------ allocation classes
    def classify(self, nodes: Iterable[Node], path: Path, level: Level, shared_names: set[str]) -> None:
        for k, node in enumerate(nodes):
            p = path + (k,)
            if isinstance(node, Alloc):
                if self.private(level) or level.rep:
                    self.private_names.add(node.buf)
                else:
                    self.shared[p] = level.bound
                    shared_names.add(node.buf)
                continue
            if not isinstance(node, (For, Guard, Seq)):
                continue
            inner = self.enter(node, level)
            if not self.private(level) and not level.rep and self.representative(node, level):
                self.rep.add(p)
                inner = Level(inner.bound, inner.varying, inner.divergent, True)
            self.classify(node.body, p, inner, shared_names)

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


def plan(lp: Lowered) -> tuple[tuple[HostItem, ...], list[Launch]]:
    """The host structure of ``lp`` and its launches (each with its barrier plan)."""
    planner = HostPlanner(lp)
    items = planner.run()
    return items, planner.launches
