"""Drawn modulo plans through the checker and the overlapped interpreter: every plan the checker proves runs
bitwise as the sequential meaning, and every plan it disproves replays: some input makes the overlapped run's
outputs differ from the sequential ones (at the schedule's sizes, whose trip count the witness names), except
where the witness itself says that only the protocol, not the timing, is at fault (a release a reader does not
join, whose overlap the timing of this plan hides), and one fault the overlapped interpreter does not model: an
mma that issues before the mma of the previous iteration completes (a carried accumulator's edge at
``II < latency``). The interpreter runs an asynchronous mma's whole body at its completion, so the chain of
updates of the accumulator stays in order there; on hardware the later mma would read the accumulator before
the earlier one wrote it. The checker disproves such a plan all the same (``carried_mma_race``)."""
from __future__ import annotations

import numpy as np
from hypothesis import given, strategies as st

import tilecert as tc
from examples.gemm import gemm
from tilecert.semantics.pipeline.realize import run_overlapped
from tilecert.semantics.pipeline.stages import pipeline_loops, stage_blocks

from test_pipeline_realize import four, three

PLAN_KINDS = ("pipeline_schedule", "versions", "release")
CASES = {  # kernel, sizes, the pipeline loop, its materialized buffers a plan may shrink
    "gemm": (gemm, dict(M=8, N=8, K=24, bm=4, bn=4, bk=4), ("a", "b")),
    "three": (three, dict(N=7), ("a", "b")),
    "four": (four, dict(N=6), ("a", "b")),
}
MODEL = {"c": "sync", "interp": "sync", "cuda": "async", "cuda-host": "async"}


def arrays(s: tc.Schedule, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {t.name: rng.standard_normal([int(d.value if hasattr(d, "value") else s.sizes[str(d)])
                                         for d in t.shape]).astype(np.float32) for t in s.program.tensors}


def sequential(kernel, sizes: dict, inputs: dict) -> dict:
    return run_overlapped(tc.schedule(kernel, **sizes), {}, {k: v.copy() for k, v in inputs.items()})


@st.composite
def drawn_plans(draw):
    name = draw(st.sampled_from(sorted(CASES)))
    kernel, sizes, buffers = CASES[name]
    s = tc.schedule(kernel, **sizes)
    lp = next(pipeline_loops(s.program.body))
    stages = [b.name for b in stage_blocks(lp)]
    target = draw(st.sampled_from(["c", "cuda"]))
    interval = draw(st.integers(1, 3))
    offsets = {n: draw(st.integers(0, 4)) for n in stages}
    versions = {b: draw(st.integers(1, 3)) for b in buffers if draw(st.booleans())}
    return name, s, lp.name, dict(interval=interval, offsets=offsets, versions=versions or None, window=0,
                                  target=target)


def plan_results(s: tc.Schedule) -> list:
    return [r for r in s.check() if str(r.kind) in PLAN_KINDS]


def carried_mma_race(r) -> bool:
    """Whether ``r`` is a ``pipeline_schedule`` fault on an edge from an mma stage to itself (its accumulator)."""
    if str(r.kind) != "pipeline_schedule":
        return False
    e = dict(getattr(r.verdict.witness, "facts", ()) or ()).get("edge")
    return e is not None and e.producer == e.consumer and e.dep == "flow"


def hidden(r) -> bool:
    """Whether the witness of a disproved plan says that this plan's timing hides its fault."""
    w = r.verdict.witness
    facts = dict(getattr(w, "facts", ()) or ())
    return bool(facts.get("hidden"))


@given(drawn_plans(), st.integers(0, 2 ** 16))
def test_a_proved_plan_matches_and_a_disproved_one_replays(drawn, seed):
    name, s, loop, args = drawn
    kernel, sizes, _ = CASES[name]
    s.modulo(loop, **args)
    results = plan_results(s)
    assert {str(r.kind) for r in results} == set(PLAN_KINDS)
    statuses = {str(r.kind): r.status for r in results}
    assert "unknown" not in statuses.values(), statuses  # these plans are all decidable
    model = MODEL[args["target"]]
    if all(v == "proved" for v in statuses.values()):
        for k in range(2):
            inputs = arrays(s, seed + k)
            got = run_overlapped(s, None, {n: v.copy() for n, v in inputs.items()}, model=model)
            want = sequential(kernel, sizes, inputs)
            assert all(np.array_equal(got[o], want[o]) for o in want), (args, statuses)
        return
    disproved = [r for r in results if r.status == "disproved"]
    assert all(r.verdict.witness is not None for r in disproved)
    if all(hidden(r) or carried_mma_race(r) for r in disproved):
        return
    differs = False
    for k in range(3):
        inputs = arrays(s, seed + k)
        got = run_overlapped(s, None, {n: v.copy() for n, v in inputs.items()}, model=model)
        want = sequential(kernel, sizes, inputs)
        differs = differs or any(not np.array_equal(got[o], want[o], equal_nan=False) for o in want)
    assert differs, (name, args, [(str(r.kind), r.verdict.witness.lines()[0]) for r in disproved])
