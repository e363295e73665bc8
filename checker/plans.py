"""The plan obligations of a program: ``pipeline_schedule``, ``versions`` and ``release`` of every pipeline loop
whose ``Loop.pipeline.plan`` is set, on the loop's stage graph (``semantics.pipeline.graph.stage_graph``, built
once per loop at the bound sizes; the trip count stays symbolic where they do not fix it)."""
from __future__ import annotations

import functools
from typing import Callable, Mapping

from tilecert.semantics import ir
from tilecert.semantics.pipeline.graph import stage_graph
from tilecert.semantics.pipeline.stages import pipeline_loops
from tilecert.semantics.transform import Kind

from .obligations import pipeline_schedule, release, versions
from .verdict import Verdict

MODULES = ((Kind.PIPELINE_SCHEDULE, pipeline_schedule), (Kind.VERSIONS, versions), (Kind.RELEASE, release))


def plan_checks(program: ir.Program, sizes: Mapping[str, int],
                timeout_ms: int) -> list[tuple[Kind, str, Callable[[], Verdict]]]:
    """``(kind, formula, decide)`` for each plan obligation of each planned pipeline loop of ``program``."""
    out: list[tuple[Kind, str, Callable[[], Verdict]]] = []
    for lp in pipeline_loops(program.body):
        if lp.pipeline.plan is None:
            continue
        graph = functools.cache(functools.partial(stage_graph, program, lp.name, sizes))
        for kind, module in MODULES:
            def decide(check=module.check, graph=graph, plan=lp.pipeline.plan) -> Verdict:  # noqa: ANN001
                return check(graph(), plan, sizes=sizes, timeout_ms=timeout_ms)
            out.append((kind, f"pipeline loop {lp.name}: {module.FORMULA}", decide))
    return out
