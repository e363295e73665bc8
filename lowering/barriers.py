"""Barrier placement: each kernel of a loop-form program rewritten as the threads of a block run it.

In loop form the statements of a sequence run one after the other, each completely; in a
CUDA kernel they run on the threads of a block at once. This pass (run before lowering and
validation, on a program whose sizes are bound) makes the kernel's execution explicit in
loop form, so that the checker's ``noninterference`` (per barrier phase) and
``barrier_uniform`` obligations decide it, and the emitter only renders it. Per launch
(``semantics.launch``) with thread dimensions ``D`` of launch extents ``E_d``:

- **SPMD nest.** The block's body becomes one nest of loops ``t_d in [0, E_d)`` bound to the
  dimensions: every thread runs the whole body text. A loop of the nest is parallel, or of the
  kind of a non-parallel loop bound to its dimension (whose updates the lowering then makes
  atomic, as before the rewrite).
- **Thread loops** ``for i in [lo, hi)`` bound to ``d`` disappear: ``i := t_d`` in their body, and
  ``lo <= t_d < hi`` guards every effect below them (not their control: a thread outside the
  range follows it to its barriers, doing nothing).
- **Representative threads.** A statement (or a loop / guard holding no thread loop and no
  barrier) at a level where some dimensions are unbound is run once per coordinate of the
  bound ones: guarded by ``t_d == 0`` for each unbound ``d``.
- **Shared buffers.** A ``Decl`` at such a level is hoisted into the SPMD nest just inside the
  loops of the dimensions bound around it (one copy per coordinate of them: the nest puts
  these outermost, in ``NEST_ORDER`` where that leaves a choice), and a zero fill by the
  threads that share the copy takes its place (``Kernel.zero_fill``), unless
  ``fill.written_first_decls`` proves every cell of each allocation instance written before it
  is read (on the program before this rewrite, whose allocation instances are those the
  threads share, one per iteration of the loops around the declaration): then no fill.
- **Serialized loops.** A loop that is no thread loop but holds one (or a barrier) is run by every
  thread of the block, iteration after iteration in one order, so it becomes ``serial`` (one of
  the orders a ``parallel`` loop admits): a buffer declared in its body and hoisted is then one
  copy reused iteration after iteration, re-zeroed where it was declared, not one copy raced on by
  concurrent iterations.
- **Barriers.** Walking each sequence with the effects since the last barrier, a barrier is
  placed before a statement that conflicts with them, before a loop / guard whose body conflicts
  with them up to its first stated block barrier, and at the end of a loop body whose last
  effects conflict with the body up to that barrier. Two units conflict on a buffer when a write
  of one and an access of the other, by different threads, may touch the same cell at the same
  iteration of the serialized loops around both (the variables of other loops renamed apart, so
  the back edge compares any two iterations): ``overlap.may_touch``, isl on the quasi-affine
  indices; unknown is a conflict. Effects of one thread-loop body (run in lockstep: the program's own barriers and its
  noninterference order them) or of one representative are not compared with each other;
  thread-private buffers never conflict. A stated block barrier ends the effects; a warp
  barrier ends those on per-warp buffers. The scope is ``warp`` when every conflicting buffer
  has one copy per warp, else ``block``.

Nothing here is trusted: a barrier placed under a guard or loop that differs between
threads is a disproved ``barrier_uniform`` of the output, a missing one a disproved
``noninterference`` whose witness the interpreter replays (it runs the nest in lockstep,
phase by phase).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import count
from typing import Callable, Iterable, Iterator, Mapping, Optional, Union

from tilecert.semantics import ir
from tilecert.semantics import launch as G
from tilecert.semantics import loopir as L
from tilecert.semantics.bindings import DEFAULT_TARGET, Target
from tilecert.semantics.index import IBin, IConst, IExpr, IVar, ibin
from tilecert.semantics.index import substitute_many
from tilecert.semantics.loopir import fresh_var
from tilecert.semantics.mapper import map_node

from .fill import written_first_decls
from .overlap import Cell, cells, may_touch
from .program import LoweringError

NEST_ORDER = ("block2", "block1", "block0", "warp", "lane")
Key = tuple[str, int]  # who runs a unit: ("lockstep" | "rep", the thread-loop scope it lies in)


@dataclass
class Unit:
    """A statement (or a loop / guard run as a whole) of the SPMD body, with its effects on shared buffers."""

    node: object
    writes: frozenset[str]
    accesses: frozenset[str]
    key: Key
    cells: tuple[Cell, ...] = ()  # its accesses, cell by cell (``overlap.cells``)


@dataclass
class Ctl:
    """A loop or guard every thread runs, with its body as items."""

    node: Union[L.Loop, L.If]
    items: list["Item"]


@dataclass
class Sync:
    """A barrier the program states."""

    node: L.Barrier


Item = Union[Unit, Ctl, Sync]


def _conj(conds: Iterable[IExpr]) -> IExpr:
    out: IExpr = IConst(1)
    for c in conds:
        out = c if out == IConst(1) else IBin("and", out, c)
    return out


def _guarded(node: object, conds: list[IExpr]) -> object:
    return L.If(_conj(conds), ir.Block((), (node,))) if conds else node


def _effects(node: object) -> tuple[set[str], set[str]]:
    """``(W, A)``: the buffers a loop-form node writes and those it accesses."""
    w: set[str] = set()
    a: set[str] = set()
    nodes = ir.walk(node.body) if isinstance(node, (L.Loop, L.If)) else (node,)
    for n in nodes:
        if isinstance(n, (L.Assign, L.Accum)):
            w.add(n.buf)
            a.add(n.buf)
            a.update(ld.buf for ld in L.loads(n.value))
        elif isinstance(n, L.Decl):
            w.add(n.buf.name)
            a.add(n.buf.name)
    return w, a


def _holds_barrier(node: object, or_thread_loop: bool) -> bool:
    """Whether ``node`` contains a barrier (or, with ``or_thread_loop``, a thread-bound loop)."""
    return any(isinstance(n, L.Barrier) or (or_thread_loop and isinstance(n, L.Loop) and _dim(n) is not None)
               for n in (ir.walk(node.body) if isinstance(node, (L.Loop, L.If)) else ()))


def _dim(lp: L.Loop) -> Optional[str]:
    """The thread dimension a loop is bound to (``semantics.launch.Site.thread_dim``), or None."""
    return G.Site(lp, "loop", binding=lp.binding).thread_dim


# ----------------------------------------------------------------------------- one launch
@dataclass
class Kernel:
    """The SPMD rewrite of one launch's block body (see the module docstring)."""

    dims: tuple[str, ...]
    extents: dict[str, IExpr]
    fresh: Callable[[], int]  # fresh loop variables
    t: dict[str, int] = field(default_factory=dict)
    hoisted: dict[frozenset[str], list[L.Decl]] = field(default_factory=dict)
    shared: dict[str, frozenset[str]] = field(default_factory=dict)  # hoisted buffer -> dims of its copies
    scopes: Iterator[int] = field(default_factory=lambda: count(1))  # numbers the keys of thread-loop scopes
    kinds: dict[str, str] = field(default_factory=dict)  # a dimension bound to a non-parallel loop: its kind
    unfilled: frozenset[int] = frozenset()  # ids of the Decls proved written before read: no zero fill
    serialized: set[int] = field(default_factory=set)  # the variables of the loops every thread runs

    def __post_init__(self) -> None:
        self.t = {d: self.fresh() for d in NEST_ORDER if d in self.dims}

    def coord(self, d: str) -> IVar:
        return IVar(self.t[d], 0)

    def rep(self, bound: frozenset[str]) -> list[IExpr]:
        return [IBin("eq", self.coord(d), IConst(0)) for d in self.dims if d not in bound]

    def unit(self, node: object, conds: list[IExpr], key: Key) -> Unit:
        """``node`` under ``conds``, with its effects on buffers that are not thread-private (tensors and
        hoisted buffers)."""
        w, a = _effects(node)
        local = self.declared - set(self.shared)
        node = _guarded(node, conds)
        return Unit(node, frozenset(w - local), frozenset(a - local), key,
                    tuple(c for c in cells(node) if c.buf not in local))

    def threads(self) -> dict[int, IExpr]:
        """Each thread coordinate's variable, with its extent."""
        return {self.t[d]: self.extents[d] for d in self.dims}

    # ------------------------------------------------------------------ the rewrite
    def rewrite(self, ops: Iterable[object]) -> tuple[object, ...]:
        ops = tuple(ops)
        self.declared = {d.buf.name for d in ir.walk(ir.Block((), ops)) if isinstance(d, L.Decl)}
        items = self.items(ops, frozenset(), {}, [], ("rep", 0))
        body = tuple(Placer(self).place(items))
        order = self.nest_order()
        for depth in range(len(order), -1, -1):
            if depth < len(order):
                d = order[depth]
                body = (L.Loop(self.t[d], f"threads.{d}", self.extents[d], self.kinds.get(d, "parallel"),
                               ir.Block((), body), d),)
            body = tuple(self.hoisted.get(frozenset(order[:depth]), ())) + body
        return body

    def nest_order(self) -> tuple[str, ...]:
        """The dimensions, outermost first, such that the dimensions of each hoisted buffer's copies are
        outer ones (by ``NEST_ORDER`` where that leaves a choice)."""
        def rank(d: str) -> tuple[int, int]:
            return min((len(b) for b in self.hoisted if d in b), default=len(self.dims)), NEST_ORDER.index(d)

        order = tuple(sorted(self.dims, key=rank))
        for bound, decls in self.hoisted.items():
            if frozenset(order[:len(bound)]) != bound:
                raise LoweringError(f"shared buffer {decls[0].buf.name} has one copy per coordinate of "
                                    f"{sorted(bound)}, and another buffer of the kernel one per coordinate of "
                                    "dimensions that do not contain these", decls[0].loc,
                                    "declare the kernel's shared buffers inside nested thread loops only")
        return order

    def items(self, ops: tuple[object, ...], bound: frozenset[str], subst: dict[int, IExpr], acts: list[IExpr],
              key: Key) -> list[Item]:
        """The items of ``ops`` at a level where the dimensions ``bound`` are bound; ``subst`` maps the thread
        loops' variables to coordinates, ``acts`` are the range guards of those loops, ``key`` who runs it."""
        out: list[Item] = []
        private = bound >= set(self.dims)
        for st in ops:
            if isinstance(st, L.Barrier):
                out.append(Sync(st))
                continue
            if isinstance(st, L.Decl):
                if private:
                    out.append(self.unit(st, [], key))
                    continue
                if st.buf.name in self.shared:
                    raise LoweringError(f"two shared buffers of one kernel are named {st.buf.name}", st.loc,
                                        "give each buffer a kernel declares its own name")
                decl = map_node(st, lambda e: substitute_many(e, subst))
                self.hoisted.setdefault(bound, []).append(decl)
                self.shared[st.buf.name] = bound
                if id(st) not in self.unfilled:  # proved written before read: the fill is never observed
                    out.append(self.zero_fill(decl, bound, acts, key))
                continue
            if isinstance(st, L.Loop) and _dim(st) is not None:
                d = _dim(st)
                if st.kind != "parallel":  # its updates stay atomic (lowering marks them under a non-parallel loop)
                    self.kinds.setdefault(d, st.kind)
                t = self.coord(d)
                lo = substitute_many(st.start, subst)
                hi = substitute_many(IBin("add", st.start, st.extent), subst)
                conds = ([] if lo == IConst(0) else [IBin("le", lo, t)]) + \
                    ([] if hi == self.extents[d] else [IBin("lt", t, hi)])
                inner = bound | {d}
                inner_key = ("lockstep" if inner >= set(self.dims) else "rep", next(self.scopes))
                out.extend(self.items(st.body.ops, inner, {**subst, st.var: t}, acts + conds,
                                      inner_key if key[0] == "rep" else key))
                continue
            node = map_node(st, lambda e: substitute_many(e, subst))
            if isinstance(st, (L.Assign, L.Accum)):
                out.append(self.unit(node, acts + ([] if private else self.rep(bound)), key))
            elif not _holds_barrier(st, not private):  # run as a whole: a representative region
                out.append(self.unit(node, acts + ([] if private else self.rep(bound)), key))
            else:
                body = self.items(st.body.ops, bound, subst, acts, key)
                if isinstance(node, L.Loop) and node.kind == "parallel":
                    node = replace(node, kind="serial")  # every thread runs it, in one order: see Serialized loops
                if isinstance(node, L.Loop):
                    self.serialized.add(node.var)
                out.append(Ctl(node, body))
        return out

    def zero_fill(self, decl: L.Decl, bound: frozenset[str], acts: list[IExpr], key: Key) -> Unit:
        """``buf[...] = 0`` over every cell of the declared buffer (what the ``Decl`` did), by the threads that
        differ in the unbound dimensions together: thread ``lin`` (its linear index over them, ``T`` threads)
        zeroes the cells ``c * T + lin`` of the row-major order. With a shape or a thread count that is not
        constant, the representative thread zeroes them all."""
        buf = decl.buf
        unbound = [d for d in self.dims if d not in bound]
        counts = [self.extents[d] for d in unbound]
        if not all(isinstance(e, IConst) for e in (*buf.shape, *counts)):
            return self.unit(self.zero_nest(decl), acts + self.rep(bound), key)
        cells = 1
        for e in buf.shape:
            cells *= e.value
        threads, lin = 1, IConst(0)
        for d, e in zip(unbound, counts):
            lin, threads = ibin("add", lin, ibin("mul", self.coord(d), IConst(threads))), threads * e.value
        c = self.fresh()
        cell = ibin("add", ibin("mul", IVar(c, 0), IConst(threads)), lin)
        index, stride = [], cells
        for e in buf.shape:
            stride //= e.value
            index.append(ibin("mod", ibin("floordiv", cell, IConst(stride)), e))
        store: object = L.Assign(buf.name, tuple(index), L.Lit(0, buf.dtype), decl.loc)
        if cells % threads:
            store = L.If(IBin("lt", cell, IConst(cells)), ir.Block((), (store,)))
        fill = L.Loop(c, f"{buf.name}.zero", IConst(-(-cells // threads)), "serial", ir.Block((), (store,)))
        return self.unit(fill, acts, ("fill", next(self.scopes)))

    def zero_nest(self, decl: L.Decl) -> object:
        """``buf[...] = 0`` over every cell of the declared buffer, as a loop nest."""
        buf = decl.buf
        vars_ = [self.fresh() for _ in buf.shape]
        node: object = L.Assign(buf.name, tuple(IVar(v, 0) for v in vars_), L.Lit(0, buf.dtype), decl.loc)
        for k in range(len(buf.shape) - 1, -1, -1):
            node = L.Loop(vars_[k], f"{buf.name}.zero{k}", buf.shape[k], "serial", ir.Block((), (node,)))
        return node

    def per_warp(self, buf: str) -> bool:
        """Whether buffer ``buf`` has one copy per warp (so a warp barrier orders its accesses)."""
        return "lane" in self.dims and buf in self.shared and self.shared[buf] >= set(self.dims) - {"lane"}


class Placer:
    """Barrier placement over the items of one SPMD body (see the module docstring)."""

    def __init__(self, k: Kernel) -> None:
        self.k = k
        self.around: list[int] = []  # the variables of the serialized loops around the current sequence

    def scope(self, buffers: set[str]) -> str:
        return "warp" if buffers and all(self.k.per_warp(b) for b in buffers) else "block"

    def clash(self, pending: list[Unit], units: Iterable[Unit]) -> set[str]:
        """The buffers on which one of ``units`` conflicts with ``pending`` (run by someone else): a write of one
        and an access of the other may touch the same cell at the same iteration of the loops around both
        (``overlap.may_touch``; the variables of the other serialized loops are renamed apart)."""
        out: set[str] = set()
        apart = frozenset(self.k.serialized - set(self.around))
        threads = self.k.threads()
        for u in units:
            for p in pending:
                if p.key == u.key:
                    continue
                for f in ((p.writes & u.accesses) | (u.writes & p.accesses)) - out:
                    if any(may_touch(x, y, apart, threads) for x in p.cells if x.buf == f
                           for y in u.cells if y.buf == f and (x.write or y.write)):
                        out.add(f)
        return out

    def place(self, items: list[Item]) -> list[object]:
        return self.sequence(items, [])[0]

    def sequence(self, items: list[Item], pending: list[Unit]) -> tuple[list[object], list[Unit]]:
        out: list[object] = []
        for item in items:
            if isinstance(item, Sync):
                out.append(item.node)
                pending = [] if item.node.scope == "block" else \
                    [p for p in pending if not all(self.k.per_warp(b) for b in p.accesses)]
                continue
            clash = self.clash(pending, _units(item) if isinstance(item, Unit) else _prefix(item.items))
            if clash:
                out.append(L.Barrier(self.scope(clash)))
                pending = []
            if isinstance(item, Unit):
                out.append(item.node)
                pending = pending + [item]
                continue
            loop = isinstance(item.node, L.Loop)
            self.around += [item.node.var] if loop else []
            body, end = self.sequence(item.items, [])
            if loop:
                self.around.pop()  # the back edge: from one iteration's end to the next one's start
                back = self.clash(end, _prefix(item.items))
                if back:
                    body.append(L.Barrier(self.scope(back)))
                    end = []
            out.append(replace(item.node, body=ir.Block((), tuple(body))))
            pending = pending + end
        return out, pending


def _units(item: Item) -> Iterator[Unit]:
    """Every unit of ``item``."""
    if isinstance(item, Unit):
        yield item
    elif isinstance(item, Ctl):
        for sub in item.items:
            yield from _units(sub)


def _prefix(items: list[Item]) -> Iterator[Unit]:
    """The units of a body that run before its first stated block barrier (every one, without one)."""
    for item in items:
        if isinstance(item, Sync) and item.node.scope == "block":
            return
        yield from _units(item)


# ----------------------------------------------------------------------------- the program
def _fold_guards(block: ir.Block) -> ir.Block:
    """``block`` with constant guards folded (``if 1`` inlined, ``if 0`` dropped), as the lowering folds them. A
    stage block is an ``if 1``: the lowering runs a pipeline in its sequential order, so its loop keeps no policy."""
    ops: list[object] = []
    for st in block.ops:
        if isinstance(st, L.If) and st.cond in (IConst(0), IConst(1)):
            ops.extend(_fold_guards(st.body).ops if st.cond == IConst(1) else ())
        elif isinstance(st, L.Loop):
            ops.append(replace(st, body=_fold_guards(st.body), pipeline=None))
        elif isinstance(st, L.If):
            ops.append(replace(st, body=_fold_guards(st.body)))
        else:
            ops.append(st)
    return ir.Block(block.args, tuple(ops), block.yields)


def place_barriers(p: ir.Program, target: Target = DEFAULT_TARGET,
                   sizes: Optional[Mapping[str, int]] = None) -> ir.Program:
    """``p`` (loop form, sizes bound: ``sizes``) with each launch's block body in SPMD form with its barriers
    placed; ``p`` itself when it binds no GPU scope. A launch ``semantics.launch`` refuses is left as it is
    (the CUDA planner reports the refusal)."""
    body = _fold_guards(p.body)
    if not G.binds_gpu(G.sites_of_loop_form(body)):
        return p
    fresh = fresh_var(p)
    folded = ir.Program(p.name, p.sizes, p.tensors, body, p.config, p.loc)
    new = _host(body.ops, (), fresh, target, written_first_decls(folded, dict(sizes or {})))
    return ir.Program(p.name, p.sizes, p.tensors, ir.Block(body.args, tuple(new), body.yields), p.config, p.loc)


def _host(ops: tuple[object, ...], host_vars: tuple[int, ...], fresh: Callable[[], int],
          target: Target, unfilled: frozenset[int]) -> list[object]:
    """The statements of a top-level sequence (``semantics.launch.host_split``), each launch rewritten."""
    out: list[object] = []
    for part in G.host_split(G.sites_of_loop_form(ir.Block((), ops)), host_vars):
        nodes = [s.node for s in part.sites]
        if part.what == "alloc":
            out.extend(nodes)
        elif part.what == "host":
            st = nodes[0]
            out.append(replace(st, body=ir.Block(st.body.args, tuple(_host(st.body.ops, _vars(part), fresh, target, unfilled)),
                                                 st.body.yields)))
        else:
            out.extend(_launch(part, fresh, target, unfilled))
    return out


def _vars(part: G.HostPart) -> tuple[int, ...]:
    site = part.sites[0]
    return part.host_vars + ((site.var,) if site.kind == "loop" else ())


def _launch(part: G.HostPart, fresh: Callable[[], int], target: Target, unfilled: frozenset[int]) -> list[object]:
    shape = G.launch_shape(part.sites, part.host_vars, target)
    nodes = [s.node for s in part.sites]
    if shape.refusals or not shape.dims:
        return nodes
    inner = Kernel(shape.dims, dict(shape.extents), fresh, unfilled=unfilled).rewrite(s.node for s in shape.inner)
    for s in reversed(shape.chain):
        inner = (replace(s.node, body=ir.Block(s.node.body.args, inner, s.node.body.yields)),)
    return list(inner)
