"""The realization of a modulo plan: a pipeline loop in loop form -> one loop over ticks (seed 003).

The pipeline loop ``for v in [s0, s0 + N)`` (iteration ``i = v - s0``), whose body is its declarations then its
stage blocks, becomes, with ``derive(graph, plan)``'s columns and rings (``II = plan.interval``, ``theta =
plan.offsets``):

- **buffers**: a buffer the body declares and two or more stages access lives across ticks, so it is declared once
  before the tick loop, with a leading axis of ``V`` slots (``V`` its ring's versions, none for a buffer that
  needs one slot) and every access indexed by its version's slot ``i mod V`` (a buffer declared in the body is
  fresh per iteration: every access of iteration ``i`` is version ``i``; a ring on anything else is refused). Its
  per-iteration zero fill becomes a zeroing of slot ``i mod V`` at the start of the first stage that accesses it,
  left out when that stage begins by writing every cell (a nest of loops from 0 over the buffer's shape around one
  assignment of ``b[loop variables]`` that does not read ``b``). A buffer one stage uses keeps its declaration at
  the top of the tick body, fresh per tick as it was per iteration;
- **ticks**: one serial loop ``j in [0, N + C - 1)``; stage ``s`` of iteration ``i`` issues at ``Issue(s, i) = i *
  II + theta(s)``, that is tick ``j = i + theta(s) // II`` (its column) at slot ``theta(s) mod II`` of the tick, so
  the tick body runs, in slot order, each stage's body with ``v := j - column + s0`` under the guard ``0 <= j -
  column < N``: the stage instances run in the order of their issue times. Instances issued at the same time are
  unordered; they run in the reverse of their sequential order (the newer iteration first, in one iteration the
  later stage first), so that a dependence between them (a latency violation: every latency is at least one slot;
  a slot overwritten as its last reader issues) shows as a wrong value, and a legal plan, which never issues
  dependent instances together, is unaffected. Carried state (a buffer
  declared outside the loop: accumulators, tensors) is accessed as it is; its edges are what the plan's legality
  orders: it keeps its one copy even where the plan gives it versions, so the realization matches the plan's
  meaning only where those edges hold as schedule constraints (``ordering_violations``: the lowering refuses a
  plan that breaks one; the interpreter runs it as written).

Two models of completion:

- ``sync`` (C): every statement completes before the next issues: the above, nothing else;
- ``async`` (cp.async): a stage of class ``copy`` writes a pending copy ``b.inflight[V, ...]`` of its slot, and the
  slot's content is undefined from the copy's issue (the interpreter poisons it: NaN, an integer's largest value,
  true) until the copy completes. It completes at a wait: a consumer ``c`` of a flow edge ``(p, c, b)`` at distance
  ``d`` that the plan's protocol waits for (``derive``'s waits) moves the pending slot into the ring
  (``b[slot] = b.inflight[slot]``) before it runs, when the wait comes at least ``latency(p)`` slots after the
  copy's issue (``theta(c) + d * II - theta(p) >= latency(p)``, the same for every iteration); otherwise no copy
  completes and the consumer reads the poisoned slot. A stage of class ``mma`` reads its operands until its
  completion: its waits stay at its issue, its body runs at ``Issue + latency`` (column ``(theta + latency) // II``,
  slot ``(theta + latency) mod II``), before any issue at the same time. (All instances of a stage move alike, so
  an edge from an mma stage to itself is not shown late by this model.)

So a missing wait, too few slots (a copy poisons a slot a reader still reads, or a wait moves a newer version
into it) and a latency violation each show a wrong value; a plan whose obligations are not proved still runs,
which is how a witness replays (``run_overlapped``).

``Realization.phases`` splits the tick loop into the prologue ``[0, C - 1)``, the steady state ``[C - 1, N)``
(every stage active: no guard) and the epilogue ``[max(N, C - 1), N + C - 1)``, for the lowering.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping, Optional

import numpy as np

from .. import ir
from .. import loopir as L
from ..dtypes import dtype_of
from ..index import IConst, IExpr, IVar, free_vars, ibin
from ..mapper import Mapper, subst_node
from ..sched.base import Copier, ScheduleError, buffer_names, fresh_buffer, replace_loop, the_loop, \
    touched, with_body
from .derive import Derived, derive
from .latency import edge_latency, stage_latency
from .plan import Edge, ModuloPlan, StageGraph
from .stages import stage_blocks

MODELS = ("sync", "async")


@dataclass(frozen=True)
class Piece:
    """Statements over the pipeline loop's variable that run at tick ``i + column`` for iteration ``i``, in the
    tick at ``key`` = (slot in the tick, 0 for a completion / 1 for an issue, column, minus the stage ordinal)."""

    column: int
    key: tuple[int, int, int, int]
    stmts: tuple


@dataclass(frozen=True)
class Realization:
    """A realized pipeline loop: the declarations before the tick loop, those at the top of each tick, the pieces
    of each tick, the tick loop's variable and name, and (async) each ring's pending copy ``(buffer, name)``: its
    copy stage writes the pending buffer and poisons the slot (loops ``<buffer>.poison.<axis>``), a wait moves it
    into the ring (loops ``<buffer>.wait.<axis>``, before the consumer's stage block)."""

    loop: L.Loop
    decls: tuple[L.Decl, ...]
    locals: tuple[L.Decl, ...]
    pieces: tuple[Piece, ...]
    columns: int
    tick_var: int
    tick_name: str
    pending: tuple[tuple[str, str], ...]
    copier: Copier = dataclasses.field(compare=False, repr=False)

    def _iteration(self, j: IExpr, column: int) -> IExpr:
        """``v = j - column + s0``: the loop variable of the iteration a piece at ``column`` runs at tick ``j``."""
        return ibin("add", ibin("sub", j, IConst(column)), self.loop.start)

    def _body(self, j: IExpr, guarded: bool) -> ir.Block:
        """The tick body at tick ``j``: each piece for iteration ``j - column``, under its guard when ``guarded``."""
        out: list = list(self.locals)
        for pc in self.pieces:
            stmts = subst_node(pc.stmts, self.loop.var, self._iteration(j, pc.column))
            if not guarded:
                out += stmts
                continue
            i = ibin("sub", j, IConst(pc.column))
            cond = ibin("lt", i, self.loop.extent)
            if pc.column:
                cond = ibin("and", ibin("ge", i, IConst(0)), cond)
            out.append(L.If(cond, ir.Block((), stmts), self.loop.loc))
        return ir.Block((), tuple(out))

    def _ticks(self, var: int, name: str, start: IExpr, extent: IExpr, guarded: bool) -> L.Loop:
        j = IVar(var, 0)
        return L.Loop(var, name, extent, "serial", self._body(j, guarded), None, start, self.loop.loc)

    def statements(self) -> list:
        """What replaces the pipeline loop: the declarations, then the loop over ``N + C - 1`` ticks."""
        n = ibin("add", self.loop.extent, IConst(self.columns - 1))
        return list(self.decls) + [self._ticks(self.tick_var, self.tick_name, IConst(0), n, True)]

    def phases(self) -> list:
        """The declarations, then the prologue ``[0, C - 1)``, the steady state ``[C - 1, N)`` (no guard: every piece
        is active) and the epilogue ``[max(N, C - 1), N + C - 1)`` (the prologue and epilogue are copies with fresh
        loops and buffers; with one column there are none)."""
        copier, c1 = self.copier, IConst(self.columns - 1)
        n = self.loop.extent
        steady = self._ticks(self.tick_var, copier.loop_name(f"{self.loop.name}.steady"), c1,
                             ibin("max", IConst(0), ibin("sub", n, c1)), False)
        if self.columns == 1:
            return list(self.decls) + [steady]
        whole = self._body(IVar(self.tick_var, 0), True)
        out = list(self.decls)
        for tag, start, extent in (("prologue", IConst(0), c1),
                                   ("epilogue", ibin("max", n, c1), ibin("min", n, c1))):
            var = copier.new_var()
            body = copier.copy(whole, self.tick_var, IVar(var, 0), tag).body
            out.append(L.Loop(var, copier.loop_name(f"{self.loop.name}.{tag}"), extent, "serial", body, None, start,
                              self.loop.loc))
            if tag == "prologue":
                out.append(steady)
        return out


class _Slotted(Mapper):
    """Every access of a buffer of ``slots`` made to ``slots[buffer] = (name, lead)``: ``name[lead..., index...]``."""

    def __init__(self, slots: Mapping[str, tuple[str, tuple[IExpr, ...]]]) -> None:
        self.slots = slots

    def _moved(self, node: Any) -> Any:
        if node.buf not in self.slots:
            return node
        name, lead = self.slots[node.buf]
        return dataclasses.replace(node, buf=name, index=lead + node.index)

    def map_ld(self, e: L.Ld) -> L.SExpr:
        return self._moved(super().map_ld(e))

    def map_assign(self, st: L.Assign) -> Any:
        return self._moved(super().map_assign(st))

    def map_accum(self, st: L.Accum) -> Any:
        return self._moved(super().map_accum(st))


def overwrites(stmts: tuple, buf: L.Buffer) -> bool:
    """Whether the first of ``stmts`` that touches ``buf`` writes every cell of it before anything reads it: a nest of
    loops from 0 over ``buf``'s shape around one ``buf[loop variables] = value`` whose value does not read ``buf``."""
    for st in stmts:
        if buf.name not in touched(st):
            continue
        nest = []
        while isinstance(st, L.Loop) and st.start == IConst(0) and len(st.body.ops) == 1:
            nest.append(st)
            st = st.body.ops[0]
        return (isinstance(st, L.Assign) and st.buf == buf.name
                and st.index == tuple(IVar(lp.var, 0) for lp in nest)
                and tuple(lp.extent for lp in nest) == buf.shape
                and buf.name not in {ld.buf for ld in L.loads(st.value)})
    return False


def poison(dtype: str) -> L.Lit:
    """The value a slot holds while a copy into it is in flight: NaN, an integer's largest value, true."""
    dt = dtype_of(dtype)
    if dt.is_bool:
        return L.Lit(True, dtype)
    if dt.is_float:
        return L.Lit(float("nan"), dtype)
    return L.Lit(int(np.iinfo(dt.storage).max), dtype)


class _Builder:
    """The pieces of one realization (see the module docstring)."""

    def __init__(self, p: ir.Program, lp: L.Loop, graph: StageGraph, plan: ModuloPlan, model: str) -> None:
        self.p, self.lp, self.graph, self.plan, self.model = p, lp, graph, plan, model
        self.copier = Copier(p)
        self.buffers = buffer_names(p)
        self.derived: Derived = derive(graph, plan)
        self.stages = stage_blocks(lp)
        self.i = ibin("sub", IVar(lp.var, 0), lp.start) if lp.start != IConst(0) else IVar(lp.var, 0)

    def slot(self, versions: int, distance: int = 0) -> tuple[IExpr, ...]:
        """The leading index of version ``i - distance`` in a buffer of ``versions`` slots (none for one slot)."""
        if versions == 1:
            return ()
        v = ibin("sub", self.i, IConst(distance)) if distance else self.i
        return (ibin("mod", v, IConst(versions)),)

    def nest(self, buf: L.Buffer, write: str, lead: tuple[IExpr, ...], value, tag: str) -> L.Loop:
        """``write[lead, u] = value(u)`` for every cell ``u`` of ``buf``'s shape (loops ``<buf>.<tag>.<axis>``)."""
        vars_ = [self.copier.new_var() for _ in buf.shape]
        u = tuple(IVar(v, 0) for v in vars_)
        st: Any = L.Assign(write, lead + u, value(u), self.lp.loc)
        for k in reversed(range(len(buf.shape))):
            st = L.Loop(vars_[k], self.copier.loop_name(f"{buf.name}.{tag}.{k}"), buf.shape[k], "parallel",
                        ir.Block((), (st,)), None, IConst(0), self.lp.loc)
        return st

    def build(self) -> Realization:
        lp, plan, graph = self.lp, self.plan, self.graph
        decls = [st for st in lp.body.ops if isinstance(st, L.Decl)]
        users = {d.buf.name: [s for s in self.stages if d.buf.name in touched(s)] for d in decls}
        shared = {d.buf.name: d.buf for d in decls if len(users[d.buf.name]) > 1}
        versions = {b: (self.derived.ring(b).versions if self.derived.ring(b) else 1) for b in shared}
        copies = {s.ordinal for s in self.stages if graph.stages[s.ordinal].cls == "copy"} \
            if self.model == "async" else set()
        pending = {b: fresh_buffer(f"{b}.inflight", self.buffers) for b in shared
                   if any(st.ordinal in copies for st in users[b])}
        out_decls: list[L.Decl] = []
        for b, buf in shared.items():
            lead = (IConst(versions[b]),) if versions[b] > 1 else ()
            d = next(x for x in decls if x.buf.name == b)
            out_decls.append(dataclasses.replace(d, buf=dataclasses.replace(buf, shape=lead + buf.shape)))
            if b in pending:
                out_decls.append(dataclasses.replace(d, buf=dataclasses.replace(buf, name=pending[b],
                                                                                shape=lead + buf.shape)))
        pieces: list[Piece] = []
        for st in self.stages:
            s = st.ordinal
            access = {b: (pending[b] if s in copies and b in pending else b, self.slot(versions[b])) for b in shared}
            zero = tuple(self.nest(shared[b], b, (), lambda u, b=b: L.Lit(0, shared[b].dtype), "zero")
                         for b in shared if users[b][0] is st and not overwrites(st.body.ops, shared[b]))
            body = _Slotted(access).map_block(ir.Block((), zero + st.body.ops))
            if s in copies:  # the slot's old content is gone at the copy's issue
                body = ir.Block((), tuple(self.nest(shared[b], b, self.slot(versions[b]),
                                                    lambda u, b=b: poison(shared[b].dtype), "poison")
                                          for b in pending if st in users[b]) + body.ops)
            block = L.If(IConst(1), body, st.loc)  # realized: the stage is a block of its tick, no longer a stage
            waits = tuple(self.waits(s, shared, pending, versions))
            theta, ii = plan.offsets[s], plan.interval
            if self.model == "async" and graph.stages[s].cls == "mma":
                done = theta + stage_latency(graph, s, plan.target)
                if waits:
                    pieces.append(Piece(theta // ii, (theta % ii, 1, theta // ii, -s), waits))
                pieces.append(Piece(done // ii, (done % ii, 0, done // ii, -s), (block,)))
            else:
                pieces.append(Piece(theta // ii, (theta % ii, 1, theta // ii, -s), waits + (block,)))
        pieces.sort(key=lambda pc: pc.key)
        locals_ = tuple(d for d in decls if d.buf.name not in shared)
        columns = max(pc.column for pc in pieces) + 1 if pieces else 1
        return Realization(lp, tuple(out_decls), locals_, tuple(pieces), columns, self.copier.new_var(),
                           self.copier.loop_name(f"{lp.name}.ticks"), tuple(pending.items()), self.copier)

    def waits(self, consumer: int, shared: dict[str, L.Buffer], pending: dict[str, str], versions: dict[str, int]):
        """The moves ``b[slot] = b.inflight[slot]`` of the copies the waits of stage ``consumer`` complete: each wait
        of the protocol on an edge from a copy stage that comes at least its latency after the copy's issue."""
        plan, graph = self.plan, self.graph
        for p, c, b in self.derived.waits:
            if c != consumer or b not in pending or graph.stages[p].cls != "copy" or p == c:
                continue
            edge = next((e for e in graph.edges if (e.producer, e.consumer, e.buffer, e.dep) == (p, c, b, "flow")),
                        None)
            d = edge.distance if edge is not None else 0
            if plan.offsets[c] + d * plan.interval - plan.offsets[p] < stage_latency(graph, p, plan.target):
                continue  # the copy has not completed when the wait comes: nothing lands
            lead = self.slot(versions[b], d)
            yield self.nest(shared[b], b, lead, lambda u, b=b, lead=lead: L.Ld(pending[b], lead + u, shared[b].dtype),
                            "wait")


def realization(program: ir.Program, loop: str, graph: StageGraph, plan: ModuloPlan,
                model: str = "sync") -> Realization:
    """The realization of pipeline loop ``loop`` of ``program`` under ``plan`` (see the module docstring)."""
    if model not in MODELS:
        raise ScheduleError(f"realize: unknown model {model!r}", program.loc, f"models: {', '.join(MODELS)}")
    lp = the_loop(program, loop, "realize")
    stages = stage_blocks(lp)
    if not stages or lp.pipeline is None:
        raise ScheduleError(f"realize: loop {loop!r} is not a pipeline loop", lp.loc,
                            "realize the innermost loop of a tc.pipeline region")
    if len(plan.offsets) != len(stages) or len(graph.stages) != len(stages):
        raise ScheduleError(f"realize: loop {loop!r} has {len(stages)} stages; the plan gives {len(plan.offsets)} "
                            f"offsets and the graph {len(graph.stages)} stages", lp.loc,
                            "give one offset per stage, in ordinal order")
    bound = [st.buf.name for st in lp.body.ops if isinstance(st, L.Decl)
             and any((lp.var, 0) in free_vars(e) for e in st.buf.shape)]
    if bound:
        raise ScheduleError(f"realize: the shape of {', '.join(bound)} depends on pipeline loop {loop!r}", lp.loc,
                            "a buffer of the pipeline body needs a shape fixed across iterations to get slots")
    if plan.interval < 1 or min(plan.offsets) < 0:
        raise ScheduleError(f"realize: interval {plan.interval} and offsets {plan.offsets} of loop {loop!r}", lp.loc,
                            "the interval must be >= 1 and every offset >= 0")
    return _Builder(program, lp, graph, plan, model).build()


def ordering_violations(program: ir.Program, loop: str, graph: StageGraph, plan: ModuloPlan) -> tuple[Edge, ...]:
    """The edges the realization relies on that ``plan`` breaks: every flow edge, and every anti and output edge of
    a buffer the pipeline body does not declare (one copy), must have ``theta(c) + d * II - theta(p) >=
    latency(e)`` (``Issue(c, i + d) - Issue(p, i)`` is that for every ``i``; a larger distance only adds ``II``s)."""
    declared = {st.buf.name for st in the_loop(program, loop, "realize").body.ops if isinstance(st, L.Decl)}
    theta, ii = plan.offsets, plan.interval
    return tuple(e for e in graph.edges if (e.dep == "flow" or e.buffer not in declared)
                 and not (e.producer == e.consumer and e.distance == 0)
                 and theta[e.consumer] + e.distance * ii - theta[e.producer] < edge_latency(graph, e, plan.target))


def realize(program: ir.Program, loop: str, graph: StageGraph, plan: ModuloPlan, model: str = "sync", *,
            phases: bool = False) -> ir.Program:
    """``program`` with pipeline loop ``loop`` replaced by its realization under ``plan`` (the module docstring):
    one tick loop, or with ``phases`` its prologue, steady state and epilogue (``Realization.phases``)."""
    r = realization(program, loop, graph, plan, model)
    return with_body(program, replace_loop(program.body, r.loop, r.phases() if phases else r.statements()))


Plans = Mapping[str, tuple[StageGraph, ModuloPlan]]


def run_overlapped(subject: Any, plans: Optional[Plans], inputs: Mapping[str, Any],
                   sizes: Optional[Mapping[str, int]] = None, model: str = "sync") -> dict[str, np.ndarray]:
    """The outputs of ``subject`` (a ``Schedule``, a ``@tc.kernel`` or a loop-form ``Program``) on ``inputs`` (arrays
    and sizes by name) with every pipeline loop of ``plans`` (loop name -> its stage graph and plan; None: every
    loop whose ``Loop.pipeline.plan`` is set, with its ``stage_graph``) realized under ``model`` and run by the
    loop interpreter. Nothing is checked first: a plan whose obligations fail runs as written."""
    from ..inputs import prepare_inputs
    from ..kernel import Kernel
    from ..loopinterp import interpret_loops
    from ..sched import Schedule

    bound: dict[str, int] = {}
    if isinstance(subject, Kernel):
        subject = Schedule.create(subject)
    if isinstance(subject, Schedule):
        program, bound = subject.program, dict(subject.sizes)
    elif isinstance(subject, ir.Program) and L.is_loop_form(subject.body):
        program = subject
    else:
        raise ScheduleError(f"run_overlapped: expected a Schedule, a @tc.kernel or a loop-form Program, got "
                            f"{type(subject).__name__}", hint="pass tc.schedule(kernel) or its program")
    arrays, all_sizes = prepare_inputs(program, {**dict(inputs), **dict(sizes or {})}, bound)
    for name, (graph, plan) in _plans(program, plans, all_sizes).items():
        program = realize(program, name, graph, plan, model)
    interpret_loops(program, all_sizes, arrays)
    return {name: arrays[name] for name in program.outputs}


def _plans(program: ir.Program, plans: Optional[Plans], sizes: Mapping[str, int]) -> dict[str, tuple]:
    if plans is not None:
        return dict(plans)
    from .stages import pipeline_loops
    planned = [lp for lp in pipeline_loops(program.body) if lp.pipeline.plan is not None]
    if not planned:
        return {}
    from .graph import stage_graph  # the stage graph (semantics.pipeline.graph)
    return {lp.name: (stage_graph(program, lp.name, sizes), lp.pipeline.plan) for lp in planned}


__all__ = ["MODELS", "Piece", "Realization", "realization", "realize", "ordering_violations", "run_overlapped",
           "overwrites", "poison"]
