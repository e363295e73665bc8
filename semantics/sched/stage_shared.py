"""Shared staging (``stage(..., shared=True)``): a block-shared tile loaded by the threads of a block.

In loop form a GPU kernel's block-level statements (outside every thread loop) run once per
block and its thread loops (bound ``block<d>``) spread over the threads; the barrier pass
(``lowering/barriers.py``) turns a block-level ``Decl`` into ``__shared__`` memory and runs a
block-level statement on one representative thread per coordinate of the slots bound around it
(``t_d == 0`` for the others). So a shared stage rewrites the anchor's body ``B`` into

    local tile: p[d] (scope shared)
    L                              (the cooperative load nest)
    barrier(block)
    B[source[o + t] := tile[t]]
    barrier(block)

where the load nest has, per tile axis in source order, a fresh loop over ``[0, d_a)``: for an
axis whose tile part is exactly one tile loop bound ``block<s>`` (coefficient 1), a new loop with
that binding and extent (the loop *reused* as the cooperating thread index); for any other axis a
fresh serial loop. The threads of the slots the nest does not bind load it once, by the barrier
pass's representative rule. With no anchor the statements replace the outermost tile loop.

``cooperative=w``: a fresh lane loop ``l in [0, w)`` bound ``block0`` takes the innermost serial
copy loop (extent ``e``): ``e <= w``: the lane is its index, under ``l < e`` (folded when equal);
``w | e``: ``e / w`` serial chunks at ``w*c + l``; otherwise the nest runs on lane 0 only.

Grouping: when the anchor's body already is a phase ``[decls; loads; barrier; ...; barrier]`` whose
loads read no ``source``, the new declaration joins its declarations and the new load goes just
before its first barrier; no barrier is added (one phase per anchor iteration for every stage on it).

``pipeline_depth=2`` (double buffering; the anchor is serial or a pipeline, starts at 0 and runs at
least once): the tile gets a leading axis of 2 slots and is declared before the anchor

    local tile: p[2, d] (shared)
    L[k := 0, slot 0]                                  (prologue: version 0)
    for k in [0, n) {
        barrier(block)
        if k < n - 1: L[k := k + 1, slot (k + 1) mod 2]   (prefetch; folded when n = 1)
        B[source[o + t] := tile[k mod 2, t]]
    }
    barrier(block)

so ``N + 1`` barriers run instead of ``2N``, and each compute reads exactly the values depth 1
reads (bitwise identical). Datamap: ``Ring(tile, source, 2, k, k mod 2, u, o[k] + u, fills, uses)``.
A second pipelined stage on the same anchor (whose body is such a rotor, closed by the barrier
after the loop, and whose prefetch reads no ``source``) joins it: its prologue follows the first,
its prefetch goes under the same guard, and no barrier is added.

At a pipeline anchor (a loop whose body is its stage blocks) the statements put at the start of an
iteration (the loads and their barrier; the rotor's barrier and prefetch) open the first stage block
that reads the tile, and a closing barrier ends the last stage block (``pipeline.stages.around_stages``),
so the stages keep their blocks; stages on one pipeline anchor then neither group nor join.

Preconditions (``ScheduleError``): no tile loop bound to a grid, warp or lane index, or unrolled; a
reused thread loop is its axis's only term, with coefficient 1, and no two share a slot (nor the
cooperative lanes slot 0); the staging point lies inside no thread loop (a declaration there is one
per thread, not shared, and threads differing in that slot would race on it).

Legality (checked, not trusted): the load writes each tile cell ``u`` once per phase with
``source[o + u]`` (the edge guard stores 0 outside the source), the barrier after it orders those
writes before every read of the phase and the closing barrier orders the reads before the next
phase's writes (``datamap``, ``noninterference`` per barrier phase); the barriers sit at block level,
under no guard or loop that a thread index reads (``barrier_uniform``); the tile's bytes, times the
depth, fit the block's shared memory (``hardware_limits``).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from .. import ir
from .. import loopir as L
from ..bindings import THREAD_SCOPES, slot_of
from ..layout import Swizzle
from ..index import IConst, IExpr, IVar, const_value, free_vars, ibin, substitute_many
from ..pipeline.stages import around_stages
from .base import (ScheduleError, buffer_names, context_at, enclosing, fresh_buffer, fresh_name, nest,
                   proves, replace_loop, with_body)
from .stage_plan import LoadNest, Plan, ToTile, copy_holds, edge_guarded, fringe_obligations, load_value, obligations, \
    place
from ..transform import Copy, Kind, Live, Obligation, Ring, Tau, Transformed, ring_slot


def _reused(plan: Plan) -> dict[int, L.Loop]:
    """The axis -> thread loop map of the tile loops bound ``block<s>`` (the cooperating thread indices)."""
    reused: dict[int, L.Loop] = {}
    slots: dict[int, str] = {}
    for lp in plan.tile_loops:
        scope = L.binding_kind(lp.binding)
        if scope in ("grid", "warp", "lane"):
            raise ScheduleError(f"stage: tile loop {lp.name!r} is bound to {lp.binding}; a shared tile is loaded "
                                "by the threads of one block", hint=f"stage over loops bound to block<d> or left "
                                                                    f"serial, or stage before binding {lp.name!r}")
        if scope == "unrolled":
            raise ScheduleError(f"stage: tile loop {lp.name!r} is unrolled",
                                hint="apply stage before (materializing) unroll")
        if scope != "block":
            continue
        axes = [a for a, part in enumerate(plan.parts) if (lp.var, 0) in free_vars(part)]
        if len(axes) != 1 or plan.parts[axes[0]] != IVar(lp.var, 0):
            raise ScheduleError(f"stage: thread loop {lp.name!r} ({lp.binding}) is not alone with coefficient 1 in "
                                f"one axis of the index of {plan.source!r}; it cannot be reused as the cooperating "
                                "thread index", hint=f"stage over {lp.name!r} where it indexes one axis directly, "
                                                     "or stage before binding it")
        slot = slot_of(lp.binding)
        if slot in slots:
            raise ScheduleError(f"stage: tile loops {slots[slot]!r} and {lp.name!r} both bind block{slot}",
                                hint="bind the tile loops to distinct block slots")
        slots[slot] = lp.name
        reused[axes[0]] = lp
    return reused


def _load_nest(p: ir.Program, plan: Plan, tile: str, prec: str, ctx: Any, new_var: Any, taken: set[str],
               slot: tuple[IExpr, ...], values: dict[int, IExpr], reused: dict[int, L.Loop],
               cooperative: Optional[int], sizes: Optional[dict[str, int]], loc: Any) -> LoadNest:
    """The cooperative load nest (module doc), its load writing ``tile[slot + u]`` from the cell of
    ``values`` (the anchor's variable at the version a pipelined fill loads)."""
    us, loops, names = [], [], []
    for a, d in enumerate(plan.dims):
        u = new_var()
        lp = reused.get(a)
        name = fresh_name(p, f"{tile}.load{a}", taken)
        taken.add(name)
        us.append(u)
        names.append(name)
        loops.append(L.Loop(u, name, d, "parallel" if lp else "serial", ir.Block((), ()),
                            lp.binding if lp else None, IConst(0), loc))
    index: list[IExpr] = [IVar(u, 0) for u in us]
    wrap: list[L.Loop] = []
    guard: IExpr = IConst(1)
    serial = [a for a in range(len(us)) if a not in reused]
    if cooperative is not None:
        lane_name = fresh_name(p, f"{tile}.lane", taken)
        taken.add(lane_name)
        names.append(lane_name)
        lane_var = new_var()
        lane = L.Loop(lane_var, lane_name, IConst(cooperative), "parallel", ir.Block((), ()), "block0", IConst(0), loc)
        lv = IVar(lane_var, 0)
        e = const_value(plan.dims[serial[-1]], sizes) if serial else None
        if e is not None and e <= cooperative:
            a = serial[-1]
            loops[a], index[a] = lane, lv
            guard = ibin("lt", lv, IConst(e))
        elif e is not None and e % cooperative == 0:
            a = serial[-1]
            loops[a] = dataclasses.replace(loops[a], extent=IConst(e // cooperative))
            loops.insert(a + 1, lane)
            index[a] = ibin("add", ibin("mul", IConst(cooperative), IVar(us[a], 0)), lv)
        else:
            wrap = [lane]
            guard = ibin("eq", lv, IConst(0))
    for lp in wrap + loops:
        ctx = ctx.with_loop(lp.var, IConst(0), lp.extent)
    holds = ctx.decide(guard) is True
    cell = tuple(substitute_many(ibin("add", o, u), values) for o, u in zip(plan.outer, index))
    st = L.Assign(tile, slot + tuple(index), load_value(plan, cell, prec, ctx if holds else ctx.with_fact(guard)), loc)
    body = ir.Block((), (st,) if holds else (L.If(guard, ir.Block((), (st,)), loc),))
    axes = tuple(i.region if isinstance(i, IVar) else u for i, u in zip(index, us))
    return LoadNest(nest(wrap + loops, body), st, axes, tuple(names))


def _staging_point_check(plan: Plan) -> None:
    """The staging point must lie inside no thread loop (its declaration would be per thread)."""
    inside = plan.chain[:plan.chain.index(plan.anchor) + 1] if plan.anchor is not None else \
        plan.chain[:plan.chain.index(next(lp for lp in plan.chain if lp in plan.tile_loops))]
    thread = next((lp for lp in inside if L.binding_kind(lp.binding) in THREAD_SCOPES), None)
    if thread is not None:
        raise ScheduleError(f"stage: the staging point of {plan.source!r} lies inside loop {thread.name!r}, bound to "
                            f"{thread.binding}: threads differing in that slot would race on the shared tile (a "
                            "declaration there is one per thread)", hint=f"reorder so that {thread.name!r} runs inside "
                            f"the anchor{'' if plan.anchor is None else ' ' + repr(plan.anchor.name)}, where it can "
                            "be a tile loop")


def _groups(sts: list, source: str) -> Optional[int]:
    """Where a new stage's loads join the phase already in place: the index of its first barrier (None: the body
    is no phase ``[loads; barrier; ...; barrier]``, or its loads read ``source``)."""
    first = next((k for k, st in enumerate(sts) if isinstance(st, L.Barrier)), None)
    if first is None or first == len(sts) - 1 or not isinstance(sts[-1], L.Barrier):
        return None
    reads = {ld.buf for st in ir.walk(ir.Block((), tuple(sts[:first])))
             if isinstance(st, (L.Assign, L.Accum)) for ld in L.loads(st.value)}
    return None if source in reads else first


def _tile_buffer(tile: str, prec: str, shape: tuple[IExpr, ...], swizzle: Optional[str],
                 sizes: Optional[dict[str, int]]) -> L.Buffer:
    """The shared tile's buffer, with its swizzled layout when ``swizzle`` names one (refused where the layout's
    requirements fail at the schedule's bound sizes: the checker's ``layout`` obligation then proves the map a
    bijection of each row)."""
    buf = L.Buffer(tile, prec, shape, "shared")
    if swizzle is None:
        return buf
    buf = dataclasses.replace(buf, layout=Swizzle(swizzle))
    bound = tuple(e if const_value(e, sizes) is None else IConst(const_value(e, sizes)) for e in shape)
    why = buf.layout.requirements(dataclasses.replace(buf, shape=bound))
    if why is not None:
        raise ScheduleError(f"stage: swizzle={swizzle!r} does not apply to the tile: {why}",
                            hint="bind the sizes when making the schedule, and choose tile loops (or a pad_stride) "
                                 "giving the minor dim the power-of-two extent the swizzle needs")
    return buf


def stage_shared(p: ir.Program, plan: Plan, prec: str, declared: tuple[IExpr, ...], cooperative: Optional[int],
                 swizzle: Optional[str], pipeline_depth: int, sizes: Optional[dict[str, int]]) -> Transformed:
    """The shared modes of ``stage`` (module doc)."""
    reused = _reused(plan)
    if cooperative is not None and 0 in {slot_of(lp.binding) for lp in reused.values()}:
        name = next(lp.name for lp in reused.values() if slot_of(lp.binding) == 0)
        raise ScheduleError(f"stage: the cooperative lanes bind block0, which tile loop {name!r} binds already",
                            hint=f"bind {name!r} to another block slot, or leave cooperative out")
    _staging_point_check(plan)
    if len(declared) < 2 and swizzle is not None:
        raise ScheduleError(f"stage: a swizzle permutes the rows of a tile of rank >= 2 (this one has rank "
                            f"{len(declared)})", hint="drop swizzle for a one-axis tile")
    tile = fresh_buffer(f"{plan.source}.tile", buffer_names(p))
    new_var, taken = L.fresh_var(p), set()
    loc = (plan.anchor or plan.tile_loops[0]).loc
    if pipeline_depth == 2:
        return _pipelined(p, plan, prec, declared, tile, reused, cooperative, sizes, new_var, taken, loc, swizzle)
    made: list[LoadNest] = []

    def make(sts: list, ctx: Any) -> list:
        made.append(_load_nest(p, plan, tile, prec, ctx, new_var, taken, (), {}, reused, cooperative, sizes, loc))
        decl = L.Decl(_tile_buffer(tile, prec, declared, swizzle, sizes), loc)
        at = _groups(sts, plan.source) if plan.anchor is not None else None
        if at is not None:  # the declarations together (their zero fills share one barrier), the loads together
            lead = next(k for k, st in enumerate(sts) if not isinstance(st, L.Decl))
            rest = ToTile(plan, tile, prec).map_block(ir.Block((), tuple(sts[at:]))).ops
            return [*sts[:lead], decl, *sts[lead:at], made[0].stmt, *rest]
        remapped = ToTile(plan, tile, prec).map_block(ir.Block((), tuple(sts))).ops
        if plan.anchor is not None and plan.anchor.pipeline is not None:  # the phase spans the reading stages
            return around_stages(remapped, [decl, made[0].stmt, L.Barrier("block", loc)], [L.Barrier("block", loc)],
                                 tile)
        return [decl, made[0].stmt, L.Barrier("block", loc), *remapped, L.Barrier("block", loc)]

    out = place(p, plan, make, sizes)
    (ld,) = made
    cell = tuple(ibin("add", o, IVar(u, 0)) for o, u in zip(plan.outer, ld.axes))
    where = (f"loaded by the block's threads at the start of each iteration of {plan.anchor.name!r}, behind a "
             "barrier" if plan.anchor is not None else "loaded once by the block's threads, behind a barrier")
    obs = (obligations(plan, tile, ld.names, copy_holds(plan, tile, where)) + _barrier_obligations(tile, ld.names)
           + fringe_obligations(tile, [ld.load], ld.names))
    return Transformed(out, Tau(), obs, ld.names, (Copy(tile, plan.source, ld.axes, cell, Live(ld.load),
                                                        zero_fringe=edge_guarded([ld.load])),))


def _closed(p: ir.Program, a: L.Loop) -> bool:
    """Whether the statement right after loop ``a`` is a block barrier (a pipelined stage's closer)."""
    path = enclosing(p.body, a) or []
    block = path[-1].body if path else p.body
    k = next(i for i, st in enumerate(block.ops) if st is a)
    return k + 1 < len(block.ops) and isinstance(block.ops[k + 1], L.Barrier) and block.ops[k + 1].scope == "block"


def _rotor_head(ops: list, prefetches: int, source: str) -> Optional[int]:
    """Where the compute starts in a rotor body ``[barrier; prefetch?; compute]`` an earlier pipelined stage left
    (``prefetches``: whether it has a prefetch statement, as this one would); None when the body is no such rotor
    or its prefetch reads ``source`` (the new remap would change it)."""
    head = 1 + prefetches
    if len(ops) < head or not (isinstance(ops[0], L.Barrier) and ops[0].scope == "block"):
        return None
    reads = {ld.buf for st in ir.walk(ir.Block((), tuple(ops[1:head])))
             if isinstance(st, (L.Assign, L.Accum)) for ld in L.loads(st.value)}
    return None if source in reads else head


def _barrier_obligations(tile: str, handles: tuple[str, ...]) -> tuple[Obligation, ...]:
    return (
        Obligation(Kind.NONINTERFERENCE, "stage", f"per barrier phase, no thread writes a cell of {tile} another "
                   "thread accesses: the loads of a phase write distinct cells, the reads follow the barrier", handles),
        Obligation(Kind.BARRIER_UNIFORM, "stage", "the inserted barriers sit at block level, under no guard or loop "
                   "a thread index reads: every thread of the block reaches each of them", handles),
        Obligation(Kind.HARDWARE_LIMITS, "stage", f"{tile}'s bytes (times its slots) fit the block's shared memory",
                   handles),
    )


def _pipelined(p: ir.Program, plan: Plan, prec: str, declared: tuple[IExpr, ...], tile: str,
               reused: dict[int, L.Loop], cooperative: Optional[int], sizes: Optional[dict[str, int]], new_var: Any,
               taken: set[str], loc: Any, swizzle: Optional[str]) -> Transformed:
    """``pipeline_depth=2`` (module doc)."""
    a = plan.anchor
    if a is None:
        raise ScheduleError(f"stage: pipeline_depth=2 rotates the tile over the anchor loop, and the reads of "
                            f"{plan.source!r} have none (their outer part reads no loop)",
                            hint="pipeline a stage whose outer part reads a serial loop (the K block loop)")
    if a.kind not in ("serial", "pipeline") or a.binding is not None or a.start != IConst(0):
        raise ScheduleError(f"stage: pipeline_depth=2 needs a serial anchor from 0; {a.name!r} is {a.kind}"
                            f"{' bound to ' + a.binding if a.binding else ''} from {a.start}",
                            hint=f"pipeline over a serial loop starting at 0 (split or reorder so {a.name!r} is one)")
    if not proves(p, a, ibin("ge", a.extent, IConst(1)), sizes):
        raise ScheduleError(f"stage: pipeline_depth=2 needs anchor {a.name!r} to run at least once (its prologue "
                            f"loads iteration 0); its extent {a.extent} is not proved >= 1",
                            hint="bind the sizes so that the anchor runs, or stage without pipeline_depth")
    ctx = context_at(p, a, sizes)
    k = IVar(a.var, 0)
    ring_var = new_var()
    pro = _load_nest(p, plan, tile, prec, ctx, new_var, taken, (IConst(0),), {a.var: IConst(0)}, reused,
                     cooperative, sizes, loc)
    nxt = ibin("add", k, IConst(1))
    inner = ctx.with_loop(a.var, a.start, a.extent)
    last = ibin("lt", k, ibin("sub", a.extent, IConst(1)))
    fold = inner.decide(last)
    fetch = _load_nest(p, plan, tile, prec, inner.with_fact(last), new_var, taken, (ibin("mod", nxt, IConst(2)),),
                       {a.var: nxt}, reused, cooperative, sizes, loc)
    prefetch = [] if fold is False else [fetch.stmt] if fold is True else [L.If(last, ir.Block((), (fetch.stmt,)), loc)]
    mapper = ToTile(plan, tile, prec, (ring_slot(a.var, 2),))
    ops, closed = list(a.body.ops), _closed(p, a)
    joined = _rotor_head(ops, len(prefetch), plan.source) if closed else None
    if joined is not None:  # a pipelined stage on this anchor already: its barrier, its prefetch guard, its closer
        if prefetch and isinstance(prefetch[0], L.If):  # one guard k < n - 1 for every prefetch
            prefetch = [dataclasses.replace(ops[1], body=ir.Block((), ops[1].body.ops + (fetch.stmt,)))]
        else:
            prefetch = ops[1:joined] + prefetch
        ops = ops[joined:]
    rest = mapper.map_block(ir.Block((), tuple(ops))).ops
    rotor = [L.Barrier("block", loc), *prefetch]
    body = around_stages(rest, rotor, [], tile) if a.pipeline is not None else [*rotor, *rest]
    new_anchor = dataclasses.replace(a, body=ir.Block(a.body.args, tuple(body), a.body.yields))
    decl = L.Decl(_tile_buffer(tile, prec, (IConst(2),) + declared, swizzle, sizes), loc)
    closer = [] if joined is not None else [L.Barrier("block", loc)]
    out = with_body(p, replace_loop(p.body, a, [decl, pro.stmt, new_anchor, *closer]))
    uses = tuple((st, k) for st in ir.walk(new_anchor.body) if isinstance(st, (L.Assign, L.Accum))
                 and any(ld.buf == tile for ld in L.loads(st.value)))
    version = IVar(ring_var, 0)
    cell = tuple(substitute_many(ibin("add", o, IVar(u, 0)), {a.var: version}) for o, u in zip(plan.outer, pro.axes))
    fills = ((pro.load, IConst(0)),) + (((fetch.load, nxt),) if prefetch else ())
    loads = [load for load, _ in fills]
    ring = Ring(tile, plan.source, 2, ring_var, ring_slot(ring_var, 2), pro.axes, cell, fills, uses,
                zero_fringe=edge_guarded(loads))
    handles = pro.names + (fetch.names if prefetch else ())
    holds = (f"{tile}[k mod 2, u] holds version k of {plan.source}[o(k) + u] wherever iteration k of {a.name!r} "
             "reads it: version 0 filled before the loop, version k + 1 after iteration k's barrier, each slot "
             "refilled only after the barrier that ends its reads")
    obs = obligations(plan, tile, handles, holds) + _barrier_obligations(tile, handles) + fringe_obligations(
        tile, loads, handles)
    return Transformed(out, Tau(), obs, handles, (ring,))
