"""The C realization of a modulo plan: prologue, steady state and epilogue over rings (issue 13 part 7).

The three phases show in the emitted C, and the compiled kernel's outputs equal the interpreter's (of the
sequential program: bitwise) for trip counts 0..9; the lowering refuses a plan the checker has not proved.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import tilecert as tc
from tilecert.lowering.pipeline import lower_for
from tilecert.lowering.program import LoweringError
from tilecert.semantics.pipeline.plan import ModuloPlan
from tilecert.semantics.pipeline.realize import realize
from tilecert.semantics.sched.base import replace_loop, the_loop, with_body

from test_pipeline_realize import case, graph_of, inputs, legal, sequential, tiles, GEMM_EDGES


def phased(name: str, plan: ModuloPlan):
    program, graph = case(name)
    assert legal(graph, plan)
    return program, realize(program, "k", graph, plan, phases=True)


def test_the_c_shows_prologue_steady_state_and_epilogue_and_matches():
    program, p = phased("three", ModuloPlan(1, (0, 1, 3), 0, "c"))
    source = tc.emit(p, allow_unproved=True)
    parts = [source.index(f"k.{phase}") for phase in ("prologue", "steady", "epilogue")]
    assert parts == sorted(parts)
    kernel = tc.compile(p, allow_unproved=True)
    for n in range(10):
        arrays = inputs(program, n, n)
        want, got = sequential(program, arrays), kernel(**arrays)
        assert np.array_equal(want["Y"], got["Y"]), n


@pytest.mark.parametrize("name,plan", [("alias", ModuloPlan(2, (0, 3), 0, "c")),
                                       ("four", ModuloPlan(2, (0, 1, 2, 3), 0, "c"))])
def test_aliasing_and_carried_plans_match_in_c(name, plan):
    program, p = phased(name, plan)
    kernel = tc.compile(p, allow_unproved=True)
    for n in (0, 1, 2, 5, 9):
        arrays = inputs(program, n, n)
        want, got = sequential(program, arrays), kernel(**arrays)
        for t in want:
            assert np.array_equal(want[t], got[t]), (n, t)


def test_the_gemm_ring_in_c_matches_the_interpreter():
    program = tc.schedule(tiles).program
    graph = graph_of(program, ("copy", "mma"), GEMM_EDGES)
    plan = ModuloPlan(1, (0, 1), 0, "c")
    kernel = tc.compile(realize(program, "k", graph, plan, phases=True), allow_unproved=True)
    rng = np.random.default_rng(0)
    for k in (0, 1, 2, 5):
        arrays = {"A": rng.standard_normal((2, 2 * k)).astype(np.float32),
                  "B": rng.standard_normal((2 * k, 3)).astype(np.float32), "C": np.zeros((2, 3), np.float32)}
        want = tc.run(program, **arrays)["C"]
        assert np.allclose(kernel(**arrays)["C"], want, atol=1e-5)


def test_the_lowering_refuses_a_plan_the_checker_has_not_proved():
    program, _ = case("two")
    lp = the_loop(program, "k", "test")
    plan = ModuloPlan(1, (0, 0), 0, "c")  # the compute stage issues with the load it reads: a latency violation
    planned = dataclasses.replace(lp, pipeline=dataclasses.replace(lp.pipeline, plan=plan))
    p = with_body(program, replace_loop(program.body, lp, [planned]))
    with pytest.raises(LoweringError, match="not proved") as e:
        lower_for("c", p, {"N": 8})
    assert "pipeline_schedule" in str(e.value) and e.value.hint
    lower_for("c", program, {"N": 8})  # no plan: the loop lowers in its sequential order
