"""Random schedules: every op drawn from the registry keeps the interpreter's results.

Hypothesis draws a kernel (a random one from ``tc.strategies.kernels``, or an example) and
a sequence of ops from whatever ``semantics.sched.OPS`` holds (``tc.strategies.op_calls``:
arguments from each op's declared argument kinds and the current loop tree). A draw whose preconditions
fail raises ``ScheduleError`` and is skipped; any other exception fails the test. After
every applied op the scheduled program is interpreted and compared with the program
before the op (exactly for integer kernels): the initial loop form against the tile-level
interpreter, each step against the previous one.

Ops whose legality the checker must still establish are compared only where the loops they
reorder make them legal by construction: a permutation (swap, reorder, tile) or a lockstep
binding (block, warp, lane, vector) of parallel and reduce loops only (reduce loops combine
through commutative updates, which integers make exact). A bound loop runs concurrently, so
checked mode may catch a race such a step made (a bound reduce loop's updates of one cell);
the example ends there. Any other step, and any op this
file does not know, is followed without comparison: the next step is compared against
its result. Finally the schedule's JSON replays (op by op, from the kernel) to the same
program (digest), and so does a save / load through a file.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import event, given, settings, strategies as st

import tilecert as tc
from examples import EXAMPLES, output_names
from tilecert import strategies
from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.loopinterp import LOCKSTEP
from tilecert.semantics.sched import OPS, Schedule
from tilecert.semantics.sched.base import ScheduleError

MAX_OPS = 5
CAMPAIGN = max(settings.default.max_examples, 40)
PER_EXAMPLE = max(settings.default.max_examples // 4, 3)
# ops that keep the order of every iteration (their own lemmas prove it for any program)
ORDER_PRESERVING = {"split", "pad", "partition", "unroll", "insert_unit", "remove_unit", "expand_zero", "fuse",
                    "coalesce", "reshape", "expand_dim"}
PERMUTING = {"swap", "reorder", "tile"}
FREELY_ORDERED = ("parallel", "reduce")
RAGGED = {
    "gemm": dict(M=4, K=8, N=6), "gemm_i32": dict(M=4, K=8, N=6), "gemm_scalar": dict(M=4, K=5, N=3),
    "rowreduce": dict(M=5, N=11),
    "softmax": dict(M=5, N=7), "layernorm": dict(M=5, N=11), "rmsnorm": dict(M=5, N=11),
    "transpose": dict(M=5, N=4), "conv2d": dict(H=5, W=6, R=3, S=2), "all_regions": dict(M=5, K=6, N=7),
    "reduction_policy": dict(N=5), "elementwise": dict(N=7), "stencil": dict(H=6, W=5),
}


def named_loops(p: ir.Program, kwargs: dict[str, Any]) -> list[str]:
    """The loops of ``p`` that an op's arguments name."""
    names = {lp.name for lp in L.loops(p.body)}
    found: list[str] = []
    for value in kwargs.values():
        for v in (value if isinstance(value, (list, tuple)) else [value]):
            if isinstance(v, str) and v in names:
                found.append(v)
    return found


def legal_by_construction(before: ir.Program, op: str, kwargs: dict[str, Any]) -> bool:
    """Whether the step must keep the interpreter's results whatever the checker would say (see the doc)."""
    kinds = {lp.name: lp.kind for lp in L.loops(before.body)}
    if op in ORDER_PRESERVING:
        return True
    if op in PERMUTING:
        return all(kinds[n] in FREELY_ORDERED for n in named_loops(before, kwargs))
    if op == "bind":
        return kinds[kwargs["loop"]] in FREELY_ORDERED or L.binding_kind(kwargs["kind"]) not in LOCKSTEP
    return False


def binds_a_reduce_loop(before: ir.Program, op: str, kwargs: dict[str, Any]) -> bool:
    return op == "bind" and any(lp.name == kwargs["loop"] and lp.kind == "reduce" for lp in L.loops(before.body))


def assert_close(want: dict, got: dict, names, exact: bool, what: str) -> None:
    for name in names:
        if exact:
            np.testing.assert_array_equal(got[name], want[name], err_msg=f"{what}: {name}")
        else:
            scale = max(1.0, float(np.abs(want[name]).max())) if want[name].size else 1.0
            np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-4 * scale, err_msg=f"{what}: {name}")


def check_steps(data: st.DataObject, s: Schedule, reference: dict, arrays: dict, outputs, exact: bool) -> None:
    """Apply up to ``MAX_OPS`` drawn ops to ``s``, comparing the interpreter's results after each."""
    order = data.draw(st.sampled_from(["canonical", "reverse"]), label="order")
    checked = data.draw(st.booleans(), label="checked")

    def run() -> dict:
        return s.run(order=order, checked=checked, **{k: v.copy() for k, v in arrays.items()})

    before = run()
    assert_close(reference, before, outputs, exact, "the initial loop form vs the tile program")
    for step in range(data.draw(st.integers(1, MAX_OPS), label="steps")):
        op, kwargs = data.draw(strategies.op_calls(s.program, s.sizes), label=f"step {step}")
        program = s.program
        try:
            s.apply(op, **kwargs)
        except ScheduleError:
            event(f"{op}: precondition failed")
            continue
        try:
            after = run()
        except tc.NoninterferenceError:
            # checked mode catches a race the step made: never one a legal step could make, except
            # binding a reduce loop (its updates commute for reordering, never for parallelization)
            assert checked and (not legal_by_construction(program, op, kwargs) or binds_a_reduce_loop(
                program, op, kwargs)), f"{op}({kwargs}) raced, step {step} of {s.history}"
            event(f"{op}: a race caught in checked mode")
            break
        if legal_by_construction(program, op, kwargs):
            event(f"{op}: applied and compared")
            assert_close(before, after, outputs, exact, f"after {op}({kwargs}), step {step} of {s.history}")
        else:
            event(f"{op}: applied, legality left to the checker")
        before = after
    replayed = Schedule.from_json(s.to_json(), s.kernel)
    assert [op for op, _ in replayed.history] == [op for op, _ in s.history]
    assert tc.digest(replayed.program) == tc.digest(s.program)


@pytest.mark.slow
@settings(max_examples=CAMPAIGN)
@given(strategies.kernels(max_size=6), st.booleans(), st.data())
def test_random_schedules_of_random_kernels(case, bind_sizes, data):
    s = tc.schedule(case.kernel, **(case.sizes if bind_sizes else {}))
    reference = tc.run(case.kernel, **case.inputs())
    check_steps(data, s, reference, case.arrays, case.outputs, exact=True)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXAMPLES))
@settings(max_examples=PER_EXAMPLE)
@given(bind_sizes=st.booleans(), data=st.data())
def test_random_schedules_of_the_examples(name, bind_sizes, data):
    entry = EXAMPLES[name]
    inputs = entry.make_inputs(np.random.default_rng(3), **RAGGED[name])
    config = {k: v for k, v in inputs.items() if k in entry.kernel.config_defaults}
    arrays = {k: v for k, v in inputs.items() if k not in config}
    sizes = {}
    if bind_sizes:
        p = tc.capture(entry.kernel, **config)
        sizes = {str(n): arrays[t.name].shape[a] for t in p.tensors for a, n in enumerate(t.shape)}
    s = tc.schedule(entry.kernel, **sizes, **config)
    reference = tc.run(entry.kernel, **inputs)
    check_steps(data, s, reference, arrays, output_names(entry), entry.exact)


@settings(max_examples=PER_EXAMPLE * 2)
@given(strategies.schedules(EXAMPLES["stencil"].kernel, {"H": 6, "W": 5}, max_ops=MAX_OPS))
def test_drawn_schedules_replay(s):
    assert all(op in OPS for op, _ in s.history)
    assert len(s.history) == len(s.transforms) <= MAX_OPS
    replayed = s.replay()
    assert tc.digest(replayed.program) == tc.digest(s.program)
    assert [op for op, _ in replayed.history] == [op for op, _ in s.history]


def test_every_registered_op_can_be_drawn():
    """The argument strategies cover every op's required parameters (no op is silently never drawn)."""
    p = tc.schedule(EXAMPLES["gemm_i32"].kernel).program
    drawn: set[str] = set()

    @settings(max_examples=200, derandomize=True)
    @given(strategies.op_calls(p))
    def collect(call):
        drawn.add(call[0])

    collect()
    assert drawn == set(OPS)


def test_save_load_replays_to_the_same_program(tmp_path):
    k = EXAMPLES["gemm_i32"].kernel
    s = tc.schedule(k, M=7, N=6)
    names = [lp.name for lp in L.loops(s.program.body)]
    outer = names[0]
    s.split(outer, 2, tail="partition")
    s.insert_unit(s.loops()[0].name)
    path = tmp_path / "gemm.json"
    s.save(path)
    loaded = Schedule.load(path, k)
    assert [op for op, _ in loaded.history] == ["split", "insert_unit"]
    assert tc.digest(loaded.program) == tc.digest(s.program)
    assert tc.digest(loaded.program) != tc.digest(s.initial)
    inputs = EXAMPLES["gemm_i32"].make_inputs(np.random.default_rng(1), M=7, N=6)
    np.testing.assert_array_equal(loaded.run(**inputs)["C"], s.run(**inputs)["C"])
    np.testing.assert_array_equal(loaded.run(**inputs)["C"], inputs["A"] @ inputs["B"])


def test_legality_by_construction_is_conservative():
    """Only order-preserving ops, and permutations / lockstep bindings of freely ordered loops, count."""
    p = tc.schedule(EXAMPLES["all_regions"].kernel).program
    kinds = {lp.name: lp.kind for lp in L.loops(p.body)}
    serial = next(n for n, k in kinds.items() if k == "serial")
    parallel = next(n for n, k in kinds.items() if k == "parallel")
    assert legal_by_construction(p, "split", {"loop": serial, "factor": 2})
    assert not legal_by_construction(p, "swap", {"outer": serial, "inner": parallel})
    assert legal_by_construction(p, "bind", {"loop": parallel, "kind": "block0"})
    assert not legal_by_construction(p, "bind", {"loop": serial, "kind": "lane"})
    assert legal_by_construction(p, "bind", {"loop": serial, "kind": "unrolled"})
    assert not legal_by_construction(p, "an op this file does not know", {})
