"""CUDA launch geometry: one definition read by the CUDA planner and by the checker.

The CUDA planner (``backends/cuda/plan.py``) applies these rules to a lowered program; the
checker's ``containment`` and ``hardware_limits`` apply them to loop form (through
``sites_of_loop_form``), so a launch the backend would refuse is a disproved obligation.
Both see the loop tree as ``Site`` s (loops with ``[lo, hi)`` and a binding, guards,
sequences, allocations, leaves).

- **Host code and launches** (``host_split``): at the top level, an allocation is device
  memory, a loop bound to a grid slot is one launch, a loop / guard / sequence containing
  grid loops is host code (its body is split again, its loop variable is a *host
  variable*), and each run of other statements is one launch of a single block.
- **A launch** (``launch_shape``): its *grid nest* is the chain of grid loops and guards
  each the only statement of the one before; the rest is the block's body. Refused
  (``LaunchShape.refusals``, each a ``LaunchRefusal`` whose reason is ``containment``): a grid slot bound twice in the chain, a grid
  loop anywhere in the body, one hardware slot bound twice along a path (lane in lane,
  warp in warp, block0 in block0, with any loops between), ``block0`` together with warp /
  lane in one launch (x holds the warps' lanes then). Refused (``hardware_limits``): a
  bound loop whose start is not evidently >= 0; a launch extent that depends on variables
  of the kernel; lane loops whose launch extent is not a constant <= the warp size.
- **Launch extent** of a bound loop: ``upper(hi)``, its end with every ``min`` term that
  reads a non-host variable dropped. A slot's launch extent is the ``max`` over every loop
  of the launch bound to it (sibling loops of all phases included).
- **Block dimensions** (``block_dims``): with warp / lane loops ``x = warp_size *
  max(warps, 1)``, else ``x = max(block0, 1)``; ``y = max(block1, 1)``, ``z = max(block2, 1)``;
  threads per block ``x * y * z``. Grid dimensions are the grid slots' launch extents.
- **Shared memory** (``shared_bytes``): a buffer the planner places in ``__shared__`` takes
  ``copies * max(cells, 1) * itemsize`` bytes (one copy per coordinate of the thread
  dimensions bound around it); a launch's total is the sum over all of them (no reuse).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Optional

from . import ir
from . import loopir as L
from .bindings import Target, hardware_slot, scope_of
from .errors import TilecertError
from .index import IBin, IConst, IExpr, INot, ISize, free_vars, ibin

BLOCK_DIMS = ("block0", "block1", "block2")
THREAD_DIMS = BLOCK_DIMS + ("warp", "lane")
GRID_SLOTS = ("grid0", "grid1", "grid2")


class LaunchRefusal(TilecertError):
    """A launch the CUDA backend cannot make; ``reason`` is the obligation that states it."""

    def __init__(self, reason: str, message: str, hint: str) -> None:
        super().__init__(message, hint=hint)
        self.reason = reason


@dataclass(frozen=True, eq=False)
class Site:
    """A node of a loop tree as launch planning sees it (``node``: the loop-form or lowered node)."""

    node: Any
    kind: str  # loop | guard | seq | alloc | sync | leaf
    body: tuple["Site", ...] = ()
    binding: Optional[str] = None
    var: int = -1
    lo: IExpr = IConst(0)
    hi: IExpr = IConst(0)
    name: str = ""  # a loop's name, an allocation's buffer
    dtype: str = ""  # an allocation's
    shape: tuple[IExpr, ...] = ()

    @property
    def slot(self) -> Optional[str]:
        """The hardware slot this loop is bound to (``grid0``, ``block1``, ``warp``, ``lane``...)."""
        return hardware_slot(self.binding) if self.kind == "loop" else None

    @property
    def grid(self) -> bool:
        return scope_of(self.slot) == "grid"

    @property
    def thread_dim(self) -> Optional[str]:
        return self.slot if self.slot in THREAD_DIMS else None


def walk(site: Site) -> Iterator[Site]:
    yield site
    for child in site.body:
        yield from walk(child)


def has_grid(site: Site) -> bool:
    return any(s.grid for s in walk(site))


# ----------------------------------------------------------------------------- host code
@dataclass(frozen=True)
class HostPart:
    """One item of host code: ``alloc`` (device memory), ``launch`` (a launch's top-level sites) or ``host``
    (a loop / guard / sequence whose body ``parts`` is host code again)."""

    what: str
    sites: tuple[Site, ...]
    host_vars: tuple[int, ...]
    parts: tuple["HostPart", ...] = ()


def host_split(sites: Iterable[Site], host_vars: tuple[int, ...] = ()) -> tuple[HostPart, ...]:
    """The host structure of a top-level sequence (see the module docstring)."""
    items: list[HostPart] = []
    run: list[Site] = []

    def flush() -> None:
        if run:
            items.append(HostPart("launch", tuple(run), host_vars))
            run.clear()

    for s in sites:
        if s.kind == "alloc":
            flush()
            items.append(HostPart("alloc", (s,), host_vars))
        elif s.grid:
            flush()
            items.append(HostPart("launch", (s,), host_vars))
        elif has_grid(s):
            flush()
            inner = host_vars + ((s.var,) if s.kind == "loop" else ())
            items.append(HostPart("host", (s,), host_vars, host_split(s.body, inner)))
        else:
            run.append(s)
    flush()
    return tuple(items)


def launches(parts: Iterable[HostPart]) -> Iterator[HostPart]:
    """Every launch of a host structure, in program order."""
    for p in parts:
        if p.what == "launch":
            yield p
        yield from launches(p.parts)


# ----------------------------------------------------------------------------- one launch
def upper(e: IExpr, allowed: set[int]) -> Optional[IExpr]:
    """An upper bound of ``e`` reading only loop variables in ``allowed`` (``min`` terms that read others are
    dropped), or None."""
    if {v for v, _ in free_vars(e)} <= allowed:
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


def constant_bound(e: IExpr) -> Optional[int]:
    """A constant upper bound of ``e`` read off its ``min`` / ``max`` structure (None if there is none)."""
    if isinstance(e, IConst):
        return e.value
    if isinstance(e, IBin) and e.op in ("min", "max"):
        a, b = constant_bound(e.a), constant_bound(e.b)
        if e.op == "max":
            return max(a, b) if a is not None and b is not None else None
        return min(a, b) if a is not None and b is not None else (a if a is not None else b)
    return None


@dataclass
class LaunchShape:
    """A launch's grid nest (``chain``, outermost first), block body (``inner``), and the launch extents of its
    grid slots (``grid``) and thread dimensions (``extents``, lane included; ``dims`` in rendering order)."""

    host_vars: tuple[int, ...]
    chain: tuple[Site, ...]
    inner: tuple[Site, ...]
    grid: dict[str, IExpr] = field(default_factory=dict)
    extents: dict[str, IExpr] = field(default_factory=dict)
    dims: tuple[str, ...] = ()
    loops: tuple[Site, ...] = ()  # every hardware-bound loop of the launch
    refusals: list[LaunchRefusal] = field(default_factory=list)  # why the backend cannot make it, in order


def launch_extent(loop: Site, allowed: set[int], refusals: list[LaunchRefusal]) -> IExpr:
    """The launch extent of a hardware-bound loop over the sizes and the host variables ``allowed`` (a refusal
    is recorded, and the extent taken as 1, where there is none)."""
    if not nonnegative(loop.lo):
        refusals.append(LaunchRefusal("hardware_limits", f"loop {loop.name} bound to {loop.binding} starts at "
                                      f"{loop.lo}, not at 0 or above",
                                      "hardware-bound loops start at 0 (bind before partitioning)"))
    hi = upper(loop.hi, allowed)
    if hi is None:
        refusals.append(LaunchRefusal("hardware_limits", f"the launch extent of {loop.name} ({loop.binding}, ends at "
                                      f"{loop.hi}) depends on variables of the kernel",
                                      "bind loops whose extent depends only on the sizes"))
        return IConst(1)
    return hi


def _repeated_slots(sites: Iterable[Site], bound: frozenset[str], refusals: list[LaunchRefusal]) -> None:
    for s in sites:
        slot = s.thread_dim
        if slot is not None and slot in bound:
            refusals.append(LaunchRefusal("containment", f"loop {s.name} binds {slot} inside a loop bound to it",
                                          "bind nested thread loops to distinct dimensions"))
        _repeated_slots(s.body, bound | {slot} if slot else bound, refusals)


def launch_shape(body: tuple[Site, ...], host_vars: tuple[int, ...], target: Target) -> LaunchShape:
    """The geometry of the launch of ``body`` (see the module docstring), with the refusals it meets."""
    chain: list[Site] = []
    inner = body
    while len(inner) == 1 and (inner[0].grid or (chain and inner[0].kind == "guard")):
        chain.append(inner[0])
        inner = inner[0].body
    k = LaunchShape(host_vars, tuple(chain), inner)
    no = k.refusals
    allowed = set(host_vars)
    for s in chain:
        if s.kind != "loop":
            continue
        if s.slot in k.grid:
            no.append(LaunchRefusal("containment", f"grid loop {s.name} binds {s.slot} inside a loop bound to it",
                                    "bind nested grid loops to distinct slots"))
        hi = launch_extent(s, allowed, no)
        k.grid[s.slot] = ibin("max", k.grid[s.slot], hi) if s.slot in k.grid and k.grid[s.slot] != hi else hi
    loops = [s for s in chain if s.kind == "loop"]
    for top in inner:
        for s in walk(top):
            if s.grid:
                no.append(LaunchRefusal(
                    "containment", f"grid loop {s.name} is nested in a kernel's statements, not directly in a grid loop",
                    "the phases it separates need a grid-wide order: reorder or fission the loops so that grid loops "
                    "are outermost and each parallel phase is its own top-level grid loop"))
            dim = s.thread_dim
            if dim is not None:
                loops.append(s)
                hi = launch_extent(s, allowed, no)
                k.extents[dim] = ibin("max", k.extents[dim], hi) if dim in k.extents and k.extents[dim] != hi else hi
    _repeated_slots(inner, frozenset(), no)
    ext = k.extents
    if ("warp" in ext or "lane" in ext) and "block0" in ext:
        no.append(LaunchRefusal("containment", "a kernel binds block0 together with warp / lane",
                                "with warps and lanes the x dimension holds them: bind block1 / block2 instead"))
    if "lane" in ext:
        lanes = constant_bound(ext["lane"])
        if lanes is None or lanes > target.warp_size:
            no.append(LaunchRefusal("hardware_limits", f"lane loops have extent up to {ext['lane']}, not bounded by a "
                                    f"constant <= {target.warp_size}", f"split the loop by {target.warp_size} and "
                                    "bind the inner part to lane"))
    if "warp" in ext or "lane" in ext:
        ext["lane"] = IConst(target.warp_size)  # a warp runs all its lanes
    k.dims = tuple(d for d in THREAD_DIMS if d in ext)
    k.loops = tuple(loops)
    return k


def block_dims(k: LaunchShape, target: Target) -> tuple[IExpr, IExpr, IExpr]:
    """The block dimensions (x, y, z) of a launch, over the sizes and its host variables."""
    one = IConst(1)
    if "lane" in k.dims:
        x = ibin("mul", IConst(target.warp_size), ibin("max", k.extents.get("warp", one), one))
    else:
        x = ibin("max", k.extents.get("block0", one), one)
    return (x,) + tuple(ibin("max", k.extents.get(d, one), one) for d in ("block1", "block2"))  # type: ignore


def grid_dims(k: LaunchShape) -> tuple[IExpr, IExpr, IExpr]:
    """The grid dimensions (x, y, z) of a launch."""
    return tuple(k.grid.get(s, IConst(1)) for s in GRID_SLOTS)  # type: ignore[return-value]


def threads_per_block(k: LaunchShape, target: Target) -> IExpr:
    x, y, z = block_dims(k, target)
    return ibin("mul", ibin("mul", x, y), z)


# ----------------------------------------------------------------------------- allocations
Path = tuple[int, ...]


@dataclass
class Placement:
    """Where a launch's allocations live: ``shared`` maps the path of each ``__shared__`` allocation to the
    thread dimensions bound around it; ``rep`` holds the representative regions (run by one thread)."""

    shared: dict[Path, frozenset[str]] = field(default_factory=dict)
    rep: set[Path] = field(default_factory=set)
    private_names: set[str] = field(default_factory=set)
    sites: dict[Path, Site] = field(default_factory=dict)  # the shared allocations' sites


def representative(site: Site) -> bool:
    """Whether a loop / guard / sequence at a shared level is run by one representative thread: it holds no
    thread loop and no barrier."""
    return site.kind in ("loop", "guard", "seq") and not any(s.thread_dim is not None or s.kind == "sync"
                                                             for s in walk(site))


def placement(k: LaunchShape, inner_path: Path = ()) -> Placement:
    """The placement of a launch's allocations: at a level where some of the launch's thread dimensions are
    unbound and outside representative regions, ``__shared__`` (one copy per coordinate of the bound
    dimensions); elsewhere thread-private. Paths are relative to the launch's body, prefixed by ``inner_path``."""
    out = Placement()
    dims = frozenset(k.dims)
    shared_names: set[str] = set()

    def visit(sites: Iterable[Site], path: Path, bound: frozenset[str], rep: bool) -> None:
        for n, s in enumerate(sites):
            p = path + (n,)
            if s.kind == "alloc":
                if bound >= dims or rep:
                    out.private_names.add(s.name)
                else:
                    out.shared[p] = bound
                    out.sites[p] = s
                    shared_names.add(s.name)
                continue
            if s.kind not in ("loop", "guard", "seq"):
                continue
            inner_rep = rep
            if not bound >= dims and not rep and representative(s):
                out.rep.add(p)
                inner_rep = True
            visit(s.body, p, bound | {s.thread_dim} if s.thread_dim else bound, inner_rep)

    visit(k.inner, inner_path, frozenset(), False)
    out.private_names -= shared_names
    return out


def launch_constant(k: LaunchShape, dim: str) -> Optional[int]:
    """The constant launch extent of a thread dimension (None when it depends on the sizes)."""
    e = k.extents.get(dim, IConst(1))
    return e.value if isinstance(e, IConst) else None


def cells(alloc: Site) -> int:
    """The cells of an allocation inside a kernel (at least 1): its shape must be constant."""
    if not all(isinstance(s, IConst) for s in alloc.shape):
        raise LaunchRefusal("hardware_limits", f"buffer {alloc.name} in a kernel has shape "
                            f"{[str(s) for s in alloc.shape]}, not constant",
                            "bind the sizes it depends on in tc.schedule(...), or use smaller tiles")
    n = 1
    for s in alloc.shape:
        n *= s.value
    return max(n, 1)


def copies(k: LaunchShape, alloc: Site, bound: frozenset[str]) -> int:
    """How many copies of a ``__shared__`` allocation a block holds: the product of the launch extents of the
    thread dimensions bound around it (which must be constant)."""
    n = 1
    for d in k.dims:
        if d in bound:
            e = launch_constant(k, d)
            if e is None:
                raise LaunchRefusal("hardware_limits", f"shared buffer {alloc.name} has one copy per {d} coordinate, "
                                    f"but the launch extent of {d} depends on the sizes",
                                    "bind the sizes in tc.schedule(...)")
            n *= e
    return n


def shared_bytes(copies_: int, cells_: int, itemsize: int) -> int:
    """The bytes of one ``__shared__`` placement: ``copies * cells * itemsize``; a launch needs their sum."""
    return copies_ * cells_ * itemsize


# ----------------------------------------------------------------------------- loop form as sites
def _substitute(e: IExpr, sizes: dict[str, int]) -> IExpr:
    if isinstance(e, ISize) and e.name in sizes:
        return IConst(sizes[e.name])
    if isinstance(e, IBin):
        return ibin(e.op, _substitute(e.a, sizes), _substitute(e.b, sizes))
    if isinstance(e, INot):
        a = _substitute(e.a, sizes)
        return IConst(int(not a.value)) if isinstance(a, IConst) else INot(a)
    return e


def sites_of_loop_form(block: ir.Block, sizes: Optional[dict[str, int]] = None) -> tuple[Site, ...]:
    """The sites of a loop-form body, with ``sizes`` substituted (a loop runs ``[start, start + extent)``)."""
    sizes = dict(sizes or {})
    out: list[Site] = []
    for st in block.ops:
        if isinstance(st, L.If) and _substitute(st.cond, sizes) in (IConst(0), IConst(1)):  # lowering drops / inlines
            out.extend(sites_of_loop_form(st.body, sizes) if _substitute(st.cond, sizes) == IConst(1) else ())
        elif isinstance(st, L.Loop):
            out.append(Site(st, "loop", sites_of_loop_form(st.body, sizes), st.binding, st.var,
                            _substitute(st.start, sizes), _substitute(ibin("add", st.start, st.extent), sizes),
                            st.name))
        elif isinstance(st, L.If):
            out.append(Site(st, "guard", sites_of_loop_form(st.body, sizes)))
        elif isinstance(st, L.Decl):
            out.append(Site(st, "alloc", name=st.buf.name, dtype=st.buf.dtype,
                            shape=tuple(_substitute(s, sizes) for s in st.buf.shape)))
        elif isinstance(st, L.Barrier):
            out.append(Site(st, "sync"))
        else:
            out.append(Site(st, "leaf"))
    return tuple(out)


def binds_gpu(sites: Iterable[Site]) -> bool:
    """Whether a loop tree binds a GPU scope (grid, block, warp or lane): a program for the CUDA backend."""
    return any(s.slot is not None for top in sites for s in walk(top))


def loop_form_launches(p: ir.Program, sizes: Optional[dict[str, int]], target: Target) -> list[LaunchShape]:
    """The launches of loop-form program ``p`` (with the refusals the CUDA backend would make), or none when ``p``
    binds no GPU scope."""
    sites = sites_of_loop_form(p.body, sizes)
    if not binds_gpu(sites):
        return []
    return [launch_shape(part.sites, part.host_vars, target) for part in launches(host_split(sites))]
