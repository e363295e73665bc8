"""The modulo pass: every pipeline loop with a plan becomes its prologue, steady state and epilogue (C).

With ``asynchronous`` (the CUDA targets) the realization is ``async_copy.realize_async_copies`` instead: one tick
loop whose copy stages issue ``cp.async`` into shared rings and whose consumers wait for them (``AsyncWait``).

``realize_plans(program, sizes)`` replaces each loop whose ``Loop.pipeline.plan`` is set by the realization of
its plan under the ``sync`` model (``semantics.pipeline.realize``: rings with a slot axis ``i mod V``, stages at
their columns), split into the ticks ``[0, C - 1)`` (prologue), ``[C - 1, N)`` (steady state, every stage active,
no guard) and ``[max(N, C - 1), N + C - 1)`` (epilogue): software prefetch order. A loop with no plan is left as
it is (it lowers sequentially).

The gate: a plan is realized only when the checker proved it. The checker's report on the program (cached,
``checker.gate.cached``) must hold a ``pipeline_schedule`` result, and ``versions`` and ``release`` results when
the plan gives a buffer a ring, every one of them proved; anything else (disproved, unknown, not decided) is a
``LoweringError`` naming what is open. So is a plan that breaks an edge the realization relies on
(``realize.ordering_violations``: carried state keeps one copy, whatever versions the plan gives it). The realization itself is not trusted beyond that: the lowering of the
realized program is validated like any other (``validation.validate``).
"""
from __future__ import annotations

from typing import Mapping

from tilecert.checker.check import check_program
from tilecert.checker.gate import cached
from tilecert.checker.verdict import PROVED, Report
from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.pipeline.derive import derive
from tilecert.semantics.pipeline.realize import ordering_violations, realize
from tilecert.semantics.pipeline.stages import pipeline_loops
from tilecert.semantics.serialize import dump
from tilecert.semantics.transform import Kind

from .async_copy import realize_async_copies
from .program import LoweringError

PLAN_KINDS = (Kind.PIPELINE_SCHEDULE, Kind.VERSIONS, Kind.RELEASE)


def realize_plans(program: ir.Program, sizes: Mapping[str, int], asynchronous: bool = False) -> ir.Program:
    """``program`` with every pipeline loop that has a proved plan realized in three phases (the module doc);
    ``LoweringError`` for a plan the checker has not proved."""
    planned = [lp for lp in pipeline_loops(program.body) if lp.pipeline.plan is not None]
    if not planned:
        return program
    report = cached(("modulo plans", dump(program)), sizes, lambda: check_program(program, sizes))
    out = program
    for lp in planned:
        plan = lp.pipeline.plan
        _gate(lp, report, PLAN_KINDS[:1])  # decided before anything is built from the plan
        from tilecert.semantics.pipeline.graph import stage_graph  # the stage graph (semantics.pipeline.graph)
        graph = stage_graph(program, lp.name, sizes)
        if derive(graph, plan).rings:
            _gate(lp, report, PLAN_KINDS)
        broken = ordering_violations(program, lp.name, graph, plan)
        if broken:
            raise LoweringError(f"the realization of pipeline loop {lp.name!r} keeps one copy of carried state, and "
                                f"the plan breaks its edge {broken[0]}", lp.loc,
                                "choose offsets that meet the edges of carried state (a larger interval or a later "
                                "consumer)")
        out = realize_async_copies(out, lp.name, graph, plan) if asynchronous else \
            realize(out, lp.name, graph, plan, "sync", phases=True)
    return out


def _gate(lp: L.Loop, report: Report, needed: tuple[str, ...]) -> None:
    """``LoweringError`` unless every kind of ``needed`` has a result and every result of a plan kind is proved."""
    open_ = [f"{kind} {report.status(kind) if report.verdicts(kind) else 'not decided'}" for kind in PLAN_KINDS
             if (kind in needed and not report.verdicts(kind))
             or (report.verdicts(kind) and report.status(kind) != PROVED)]
    if open_:
        plan = lp.pipeline.plan
        raise LoweringError(f"the modulo plan of pipeline loop {lp.name!r} (II={plan.interval}, theta={plan.offsets}) "
                            f"is not proved: {', '.join(open_)}", lp.loc,
                            "see the witnesses with s.check().explain(); fix the plan (s.modulo(...)) or drop it, "
                            "and the loop lowers in its sequential order")
