"""stage(source, tile_loops, ...): read ``source`` through a fresh tile.

Every read of buffer ``source`` uses one index vector; per axis ``a`` it splits against the
``tile_loops`` as ``o_a + t_a`` (``index_terms``): ``t_a = sum_i c_i * v_i`` the tile part
(positive coefficients, loops starting at 0), ``o_a`` the outer part. The tile has one axis per
source axis, of extent ``d_a = 1 + sum_i c_i * (n_i - 1)``. The *anchor* is the deepest loop
carrying a loop variable of an outer part. The op rewrites (packing, ``shared=False``)

    for x in anchor { B[... source[o + t] ...] }

into

    for x in anchor {
        local tile: p[d_0, ..., d_{r-1}]
        for u in [0, d) (serial):  tile[u] = G(u) ? cvt(source[o + u], p) : 0      (the load)
        B[... tile[t] ...]                                                        (reads remapped)
    }

with ``G(u) = and_a (0 <= o_a + u_a < shape_a)`` the edge guard, constructed then folded under
the enclosing loops and the bound sizes (no select at all where it always holds), and ``p`` the
tile precision (``tile_prec``, default the source's; a read ``cvt(source[..], p)`` becomes
``tile[t]``, a bare read ``cvt(tile[t], dtype(source))``, exact since ``p`` widens). With no
anchor (outer parts free of loop variables) the declaration and load go just before the
outermost tile loop (at a pipeline anchor, the load opens the first stage block that reads the
tile: ``pipeline.stages.around_stages``). The tile is returned; the load loops are the handles. Datamap: the tile
is a read-only ``Copy`` of ``source``, cell ``u`` standing for ``o + u``.

``pad_stride=p`` rounds the declared minor extent up to a multiple of ``p``; the loops iterate
the unpadded extents, so padded slots are neither written nor read. The shared, cooperative,
pipelined and hoisted modes are described in ``stage_shared`` and ``stage_hoist`` (``s.constant``
marks a source constant: ``constant.py``).

Preconditions (``ScheduleError`` otherwise, each saying what to change): ``tile_loops`` name
distinct loops enclosing every read; ``tile_prec`` equals the source's dtype or widens it exactly
(f32 / f64 over f16 / bf16, f64 over f32); ``cooperative`` needs ``shared``; ``pipeline_depth`` is
1, or 2 with ``cooperative``; ``hoisted`` excludes ``shared`` and padding; ``swizzle`` needs
``shared`` and rank >= 2; ``pad_stride`` is > 1 on a tile of rank >= 2; ``source`` is read at
least once, never written, and all its reads share one index vector, increasing-affine in the tile
loops, each of which it reads; with ``shared=False`` no tile loop is bound to hardware and every
tile loop runs inside the anchor.

Legality: tau is the identity (the load nest is new work, the other statements keep their
coordinates). ``source`` is unwritten, so ``source[o + u]`` holds one value throughout the
routine; the load copies it into ``tile[u]`` at the start of each anchor iteration, before every
read of that iteration, and nothing else writes the tile; each read ``tile[t]`` (``0 <= t < d``)
therefore reads the value ``source[o + t]`` holds, the cell it read before (``datamap``,
``dependence``). The load's source cells lie in bounds wherever the guard lets it read
(``bounds``).
"""
from __future__ import annotations

from typing import Any, Optional

from .. import ir
from .. import loopir as L
from ..dtypes import DTYPES
from ..index import IVar, ibin
from ..pipeline.stages import around_stages
from . import args as A
from .base import ScheduleError, buffer_names, buffer_type, fresh_buffer, hardware_bound
from .registry import schedule_op
from .stage_plan import SWIZZLES, LoadNest, ToTile, analyse, check_modes, copy_holds, edge_guarded, fringe_obligations, \
    obligations, padded, place, serial_load
from .stage_hoist import stage_hoisted
from .stage_shared import stage_shared
from ..transform import Copy, Live, Tau, Transformed

def _stage_tile(t: Transformed) -> str:
    return t.datamaps[0].buffer


@schedule_op("stage", [A.BufferName(), A.ListOf(A.LoopName(), distinct=True), A.Bool(), A.Optional(A.PosInt()),
                       A.Optional(A.Enum(SWIZZLES)), A.Optional(A.PosInt()), A.Bool(), A.PosInt(),
                       A.Optional(A.Enum(tuple(DTYPES))), A.BoundSizes()], returns=_stage_tile)
def stage(p: ir.Program, source: str, tile_loops: list[str], *, shared: bool = False,
          cooperative: Optional[int] = None, swizzle: Optional[str] = None, pad_stride: Optional[int] = None,
          hoisted: bool = False, pipeline_depth: int = 1, tile_prec: Optional[str] = None,
          bound_sizes: Optional[dict[str, int]] = None) -> Transformed:
    """Stage the reads of ``source`` through a fresh tile over ``tile_loops``; returns (as a ``Schedule``
    method) the tile's name."""
    dtype, _ = buffer_type(p, source, "stage")
    check_modes(dtype, shared, cooperative, swizzle, pad_stride, hoisted, pipeline_depth, tile_prec)
    plan = analyse(p, source, tile_loops)
    prec = tile_prec or dtype
    declared = padded(plan.dims, pad_stride)
    if shared:
        return stage_shared(p, plan, prec, declared, cooperative, swizzle, pipeline_depth, bound_sizes)
    bound = next((lp for lp in plan.tile_loops if hardware_bound(lp)), None)
    if bound is not None:
        raise ScheduleError(f"stage: tile loop {bound.name!r} is bound to {bound.binding}; a packing copy "
                            "(shared=False) is loaded by one thread", hint="pass shared=True to stage into "
                            f"block-shared memory, or stage before binding {bound.name!r}")
    if hoisted:
        return stage_hoisted(p, plan, prec, bound_sizes)
    if plan.anchor is not None:
        outside = next((lp for lp in plan.tile_loops if lp in plan.chain[:plan.chain.index(plan.anchor) + 1]),
                       None)
        if outside is not None:
            raise ScheduleError(f"stage: tile loop {outside.name!r} encloses the anchor {plan.anchor.name!r} (the "
                                f"deepest loop the outer part of {source!r}'s index reads); the tile would be "
                                "reloaded whole on every iteration of it", hint=f"reorder so that "
                                f"{outside.name!r} runs inside {plan.anchor.name!r}")
    tile = fresh_buffer(f"{source}.tile", buffer_names(p))
    new_var, taken = L.fresh_var(p), set()
    loc = (plan.anchor or plan.tile_loops[0]).loc
    made: list[LoadNest] = []

    def make(sts: list, ctx: Any) -> list:
        made.append(serial_load(p, plan, tile, prec, ctx, new_var, taken, loc))
        remapped = ToTile(plan, tile, prec).map_block(ir.Block((), tuple(sts))).ops
        head = [L.Decl(L.Buffer(tile, prec, declared, "local"), loc), made[0].stmt]
        if plan.anchor is not None and plan.anchor.pipeline is not None:  # the load opens the stage reading it
            return around_stages(remapped, head, [], tile)
        return [*head, *remapped]

    out = place(p, plan, make, bound_sizes)
    (ld,) = made
    cell = tuple(ibin("add", o, IVar(u, 0)) for o, u in zip(plan.outer, ld.axes))
    where = f"loaded at the start of each iteration of {plan.anchor.name!r}" if plan.anchor is not None else \
        "loaded once before the tile loops"
    obs = obligations(plan, tile, ld.names, copy_holds(plan, tile, where)) + fringe_obligations(tile, [ld.load],
                                                                                                ld.names)
    return Transformed(out, Tau(), obs, ld.names,
                       (Copy(tile, source, ld.axes, cell, Live(ld.load), zero_fringe=edge_guarded([ld.load])),))

