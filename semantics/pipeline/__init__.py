"""Pipelines (seed 003): stage subregions, the stage graph, modulo plans, their protocol and realization.

- ``stages``: a pipeline loop's stage blocks (``loopir.StageBlock``) and the rule that infers them;
- ``plan``: the data a plan is made of (stages, edges, the stage graph, ``ModuloPlan``);
- ``latency``: the per-target latency table the planner and the obligations read;
- ``graph``: the stage graph of a pipeline loop (its edges from isl on memory effects);
- ``planner``: ``plan_modulo``, the least II and earliest offsets under the window (iterative modulo scheduling);
- ``describe``: the plan printout (ticks, issue points, rings, waits, releases, events).
"""
