"""Scheduled loop form -> lowered loop program (``lowering.program``).

What the pass decides, statement by statement:

- bounds: a loop ``[start, start + extent)`` becomes ``For(lo=start, hi=start + extent)``;
  bound sizes (``Schedule.sizes``) are substituted, so specialised extents are constants;
- guards: when a loop's lowered body is a single guard, the conjuncts of its condition that
  do not read the loop variable are hoisted above the loop, and the conjuncts that are linear
  comparisons in the loop variable (``c*v + r < 0`` and the like) tighten ``lo`` / ``hi``;
  the remaining conjuncts stay as a ``Guard`` inside;
- bindings: ``grid*`` and ``core`` become ``threads`` loops, ``vector`` a ``simd`` loop (for
  parallel loops; a vector-bound reduce loop stays serial), ``unrolled`` one ``Seq`` copy of
  the body per iteration with the loop variable replaced by its value (a loop whose extent
  is not a constant under the bound sizes stays a serial loop); ``block*`` / ``warp`` / ``lane`` loops run their participants one after the
  other, which agrees with lockstep execution for the non-interfering, barrier-free bodies
  this lowering accepts; with ``threads=True`` (a backend that runs the participants as
  threads, CUDA) barriers inside them are kept and they count as ``threads`` loops for atomics;
- buffers: each ``Decl`` becomes an ``Alloc`` (zero-initialised, alive to the end of the
  enclosing body, so private to every thread that runs it; with the declaration's layout): on
  the stack when its shape is constant and small, else on the heap; ``zeroed=False`` when
  ``fill.written_first`` proves every cell written before it is read (without ``threads``: the
  CUDA emitter fills every buffer);
- ``Accum`` under a ``threads`` loop whose kind is not ``parallel`` into a buffer allocated
  outside that loop is marked ``atomic``;
- packs: the hoisted constant packs that start the program (``lowering.packs``, a
  ``PackError`` for any other ``constant`` declaration) are lowered in place and named in
  ``Lowered.packs`` (each its ``Alloc`` and the nodes of its nest).

Nothing here is trusted: ``lowering.validate`` proves, with the checker's coverage and
bounds obligations, that every scheduled statement's instances and operations are exactly
those of its lowered copies and that every lowered access stays in its buffer.
"""
from __future__ import annotations

from typing import Mapping, Optional

from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.bindings import THREAD_SCOPES
from tilecert.semantics.dtypes import dtype_of
from tilecert.semantics.index import IBin, IConst, IExpr, INot, ISize, IVar, conjuncts, free_vars, ibin, linear
from tilecert.semantics.mapper import map_node, subst_node

from .fill import written_first
from .packs import constant_packs
from .program import Alloc, For, Guard, Lowered, LoweringError, Node, Pack, Seq, Store, Sync

LEAVES = (L.Decl, L.Assign, L.Accum, L.Barrier)  # the statements the checker's model numbers, in program order
STACK_LIMIT = 32 * 1024  # bytes: larger or non-constant buffers go on the heap
UNROLL_LIMIT = 1024


def bind_sizes_in(node, sizes: Mapping[str, int]):
    """``node`` with every bound size parameter replaced by its value."""
    if not sizes:
        return node

    def on(e: IExpr) -> IExpr:
        if isinstance(e, ISize):
            return IConst(sizes[e.name]) if e.name in sizes else e
        if isinstance(e, IBin):
            return ibin(e.op, on(e.a), on(e.b))
        if isinstance(e, INot):
            a = on(e.a)
            return IConst(int(not a.value)) if isinstance(a, IConst) else INot(a)
        return e

    return map_node(node, on)


# ----------------------------------------------------------------------------- guard placement
def _neg(e: IExpr) -> IExpr:
    if isinstance(e, IBin) and e.op == "sub":
        return ibin("sub", e.b, e.a)
    if isinstance(e, IConst):
        return IConst(-e.value)
    return ibin("sub", IConst(0), e)


def bound_from(cond: IExpr, var: int) -> Optional[tuple[str, IExpr]]:
    """``("hi", h)`` if ``cond`` is ``v < h``, ``("lo", l)`` if it is ``v >= l``, for a linear comparison."""
    if not (isinstance(cond, IBin) and cond.op in ("lt", "le", "gt", "ge")):
        return None
    a, b = (cond.a, cond.b) if cond.op in ("lt", "le") else (cond.b, cond.a)
    diff = linear(ibin("sub", a, b), var)  # cond is diff < 0 (lt / gt) or diff <= 0 (le / ge)
    if diff is None or diff[0] == 0:
        return None
    coef, rest = diff
    if cond.op in ("le", "ge"):
        rest = ibin("sub", rest, IConst(1))
    if coef > 0:  # coef*v < -rest  <=>  v < ceil(-rest / coef)
        return "hi", ibin("floordiv", ibin("add", _neg(rest), IConst(coef - 1)), IConst(coef))
    return "lo", ibin("add", ibin("floordiv", rest, IConst(-coef)), IConst(1))  # (-coef)*v > rest


def conjoin(conds: list[IExpr]) -> IExpr:
    out: IExpr = IConst(1)
    for c in conds:
        out = c if out == IConst(1) else IBin("and", out, c)
    return out


def _tighten(lo: IExpr, hi: IExpr, kind: str, value: IExpr) -> tuple[IExpr, IExpr]:
    if kind == "hi":
        return lo, ibin("min", hi, value)
    return ibin("max", lo, value), hi


# ----------------------------------------------------------------------------- the pass
def bind_sizes(p: ir.Program, sizes: Mapping[str, int]) -> ir.Program:
    """``p`` with the given sizes substituted in its body (its signature keeps every size)."""
    return ir.Program(p.name, p.sizes, p.tensors, bind_sizes_in(p.body, sizes), p.config, p.loc) if sizes else p


class Lowerer:
    def __init__(self, p: ir.Program, sizes: Mapping[str, int], threads: bool = False) -> None:
        self.p = bind_sizes(p, sizes)
        self.sizes = dict(sizes)
        self.next_sid = 0
        self.origin: dict[int, IExpr] = {}
        self.order: list[int] = []  # enclosing scheduled loop variables, outermost first
        self.threads: list[tuple[str, set[str]]] = []  # enclosing threads loops: (kind, buffers allocated inside)
        self.in_thread_scope = False
        self.participants_are_threads = threads
        self.unfilled: frozenset[int] = frozenset()

    def run(self) -> Lowered:
        if not L.is_loop_form(self.p.body):
            raise LoweringError(f"kernel {self.p.name} is not in loop form", self.p.loc,
                                "lower a Schedule's program (tc.schedule(kernel).program) or expand the kernel first")
        if not self.participants_are_threads:  # the CUDA emitter fills every buffer: no proof to spend
            self.unfilled = written_first(self.p, self.sizes)
        nests = constant_packs(self.p)
        body: list[Node] = []
        packs: list[Pack] = []
        for k, st in enumerate(self.p.body.ops):
            start = len(body)
            body.extend(self.stmt(st))
            if k < 2 * len(nests) and k % 2 == 1:
                pk = nests[k // 2]
                packs.append(Pack(pk.decl.buf.name, start - 1, len(body), pk.reads))
        return Lowered(self.p.name, self.p.sizes, self.p.tensors, tuple(body), tuple(sorted(self.sizes.items())),
                       tuple(packs))

    def block(self, block: ir.Block) -> list[Node]:
        out: list[Node] = []
        for st in block.ops:
            out.extend(self.stmt(st))
        return out

    def stmt(self, st) -> list[Node]:
        if isinstance(st, L.Loop):
            return self.loop(st)
        if isinstance(st, L.If):
            if st.cond == IConst(0):
                self.skip(st.body)
                return []
            body = self.block(st.body)
            return body if st.cond == IConst(1) else [Guard(st.cond, tuple(body))]
        if isinstance(st, L.Decl):
            return [self.alloc(st)]
        if isinstance(st, (L.Assign, L.Accum)):
            return [self.store(st)]
        if isinstance(st, L.Barrier):
            if self.in_thread_scope and not self.participants_are_threads:
                raise LoweringError(f"a {st.scope} barrier inside a bound thread loop", st.loc,
                                    "this lowering runs block/warp/lane participants one after the other; "
                                    "schedules with barriers need a backend that runs participants as threads")
            self.next_sid += 1
            return [Sync(st.scope, st.pending if isinstance(st, L.AsyncWait) else None)]
        raise LoweringError(f"unknown loop-form statement {type(st).__name__}", getattr(st, "loc", None),
                            "the program is not in loop form")

    def skip(self, block: ir.Block) -> None:
        """Advance the statement numbering past a body that is never executed."""
        self.next_sid += sum(1 for s in ir.walk(block) if isinstance(s, LEAVES))

    # ------------------------------------------------------------------ loops
    def loop(self, lp: L.Loop) -> list[Node]:
        bclass = L.binding_kind(lp.binding) or "serial"
        if bclass == "unrolled" and isinstance(lp.extent, IConst) and isinstance(lp.start, IConst):
            return self.unrolled(lp)
        mode = "serial"
        if bclass in ("grid", "core"):
            mode = "threads"
        elif bclass == "vector" and lp.kind == "parallel":
            mode = "simd"
        self.origin[lp.var] = IVar(lp.var, 0)
        self.order.append(lp.var)
        saved_scope = self.in_thread_scope
        self.in_thread_scope = saved_scope or bclass in THREAD_SCOPES
        concurrent = mode == "threads" or (self.participants_are_threads and bclass in THREAD_SCOPES)
        if concurrent:
            self.threads.append((lp.kind, set()))
        try:
            body = self.block(lp.body)
        finally:
            self.order.pop()
            del self.origin[lp.var]
            self.in_thread_scope = saved_scope
            if concurrent:
                self.threads.pop()
        lo, hi = lp.start, ibin("add", lp.start, lp.extent)
        hoisted: list[IExpr] = []
        if len(body) == 1 and isinstance(body[0], Guard):
            kept: list[IExpr] = []
            for c in conjuncts(body[0].cond):
                if (lp.var, 0) not in free_vars(c):
                    hoisted.append(c)
                    continue
                b = bound_from(c, lp.var)
                if b is None:
                    kept.append(c)
                else:
                    lo, hi = _tighten(lo, hi, *b)
            body = [Guard(conjoin(kept), body[0].body)] if kept else list(body[0].body)
        node: Node = For(lp.var, lp.name, lo, hi, mode, tuple(body), lp.kind, lp.binding)
        return [Guard(conjoin(hoisted), (node,))] if hoisted else [node]

    def unrolled(self, lp: L.Loop) -> list[Node]:
        if lp.extent.value > UNROLL_LIMIT:
            raise LoweringError(f"unrolled loop {lp.name} has {lp.extent.value} iterations (limit {UNROLL_LIMIT})",
                                lp.loc, "split the loop and unroll the inner part")
        first = self.next_sid
        copies: list[Node] = []
        self.order.append(lp.var)
        try:
            for k in range(lp.extent.value):
                value = lp.start.value + k
                self.next_sid = first
                self.origin[lp.var] = IConst(value)
                copies.append(Seq(f"{lp.name} = {value}", tuple(self.block(subst_node(lp.body, lp.var,
                                                                                        IConst(value))))))
        finally:
            self.order.pop()
            self.origin.pop(lp.var, None)
        if not copies:
            self.skip(lp.body)
        return copies

    # ------------------------------------------------------------------ statements
    def alloc(self, st: L.Decl) -> Alloc:
        b = st.buf
        constant = all(isinstance(s, IConst) for s in b.shape)
        size = 1
        for s in b.shape:
            size *= s.value if isinstance(s, IConst) else 1
        storage = "stack" if constant and size * dtype_of(b.dtype).itemsize <= STACK_LIMIT else "heap"
        for _, allocated in self.threads:
            allocated.add(b.name)
        sid, origin = self.instance()
        return Alloc(b.name, b.dtype, b.shape, b.scope, storage, sid, origin, zeroed=sid not in self.unfilled,
                     layout=b.layout)

    def store(self, st) -> Store:
        sid, origin = self.instance()
        if isinstance(st, L.Assign):
            return Store(sid, st.buf, st.index, st.value, None, origin, False, st.loc,
                         async_copy=isinstance(st, L.AsyncCopy))
        atomic = any(kind != "parallel" and st.buf not in allocated for kind, allocated in self.threads)
        return Store(sid, st.buf, st.index, st.value, st.op, origin, atomic, st.loc, st.policy)

    def instance(self) -> tuple[int, tuple[tuple[int, IExpr], ...]]:
        """The number of the scheduled leaf being lowered (then the next one's) and its tau: each
        enclosing scheduled loop variable as an expression over the lowered ones."""
        sid = self.next_sid
        self.next_sid += 1
        return sid, tuple((v, self.origin[v]) for v in self.order)


def lower(p: ir.Program, sizes: Optional[Mapping[str, int]] = None, threads: bool = False) -> Lowered:
    """The lowered loop program of scheduled loop-form program ``p`` with the given sizes bound
    (``threads``: block / warp / lane participants will run as threads)."""
    return Lowerer(p, dict(sizes or {}), threads).run()
