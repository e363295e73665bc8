"""Stage's ``Ring`` datamap read as a 2-stage modulo plan, so that the pipeline obligations check it.

``stage(..., pipeline_depth=2)`` declares ``Ring(tile, source, V, ...)`` whose steady fill, in iteration ``k`` of
the anchor loop, writes version ``k + a`` and whose uses read version ``k + b`` (``a = 1``, ``b = 0``: the copy of
version ``k + 1`` overlaps the compute of version ``k``; the prologue fills the versions before; ``a > b``, else
nothing overlaps). Indexing the
iterations by version, that is the stage graph

    stage 0 ``copy`` (class copy) -> stage 1 ``compute``, one flow edge of distance 0 through the tile

and the plan ``II = 1``, ``theta = (0, a - b)``, ``versions = {tile: V}``, on the latency row ``interp``: Stage's
fills are synchronous loads that the barrier opening the next iteration completes, so each stage completes within
its slot (the asynchronous copies of the ``cuda`` row are not what Stage emits). The trip count is the anchor's
extent. ``pipeline_schedule``, ``versions`` and ``release`` then decide the same question the ``datamap``
obligation decides of the ring: a use of version ``k`` never finds its slot refilled by another version.
"""
from __future__ import annotations

from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.index import IConst, IExpr, const_value, free_vars, substitute_many
from tilecert.semantics.pipeline.plan import Edge, ModuloPlan, StageGraph, StageInfo
from tilecert.semantics.transform import Ring

from .errors import CheckerError


def _offset(version: IExpr, var: int) -> int | None:
    """``c`` when ``version`` is ``var + c``, else None."""
    at0 = const_value(substitute_many(version, {var: IConst(0)}), None)
    at1 = const_value(substitute_many(version, {var: IConst(1)}), None)
    return at0 if at0 is not None and at1 == at0 + 1 else None


def ring_plan(ring: Ring, program: ir.Program) -> tuple[StageGraph, ModuloPlan]:
    """The stage graph and plan of ``ring`` in ``program`` (module doc); ``CheckerError`` when the ring is no
    rotation over one loop (its uses read version ``k + b`` of the anchor variable ``k``, some fill writes
    ``k + a``)."""
    anchors = {v for _, version in ring.uses for v, _ in free_vars(version)}
    loop = next((lp for lp in L.loops(program.body) if lp.var in anchors), None) if len(anchors) == 1 else None
    if loop is None:
        raise CheckerError(f"ring {ring.buffer}'s uses do not read versions of one loop of {program.name}",
                           hint="read as a plan only a ring that rotates over one anchor loop")
    uses = {_offset(version, loop.var) for _, version in ring.uses}
    fills = {_offset(version, loop.var) for _, version in ring.fills if (loop.var, 0) in free_vars(version)}
    if len(uses) != 1 or None in uses or len(fills) != 1 or None in fills:
        raise CheckerError(f"ring {ring.buffer} fills or reads versions that are no single offset of loop "
                           f"{loop.name!r}", hint="read as a plan only a ring with one steady fill and one use offset")
    (a,), (b,) = fills, uses
    if a <= b:
        raise CheckerError(f"ring {ring.buffer}'s steady fill writes version k + {a}, no later than its use reads "
                           f"k + {b}: nothing overlaps, the ring is no pipeline",
                           hint="read as a plan only a ring whose fill runs ahead of its use (a prefetch)")
    graph = StageGraph(-1, loop.name, (StageInfo(0, "copy", "copy"), StageInfo(1, "compute", "compute")),
                       (Edge(0, 1, 0, "effect", ring.buffer, "flow", 0),), (ring.buffer,), loop.extent)
    return graph, ModuloPlan(1, (0, a - b), target="interp", versions=((ring.buffer, ring.versions),))
