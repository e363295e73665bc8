"""The trust chain end to end: random kernels times random schedules.

- A schedule the checker proves compiles for ``c`` and ``cuda-host``, and both backends' results
  equal the specification's (the original kernel on the tile-level interpreter) in every instance
  order the harness cycles through (canonical, reverse, shuffle).
- A schedule with a disproved obligation whose witness replay is CONFIRMED really changes a
  result or fails: independently of the replay's own text, running the program before the op
  and the program after it on random integer inputs (both checked, several orders and seeds)
  finds a differing output cell or an error at the witness's sizes.

``make test`` runs a bounded, derandomized sample (the same draws on every run); ``TILECERT_FULL=1``
a long random campaign (see ``conftest.py``).
"""
import os

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import tilecert as tc
from tilecert import strategies
from tilecert.checker.replay import SEEDS, complete_sizes
from tilecert.semantics.dtypes import dtype_of
from tilecert.semantics.errors import TilecertError
from tilecert.semantics.index import evaluate
from tilecert.semantics.loopinterp import interpret_loops

FULL = os.environ.get("TILECERT_FULL") == "1"
ORDERS = ("canonical", "reverse", "shuffle")


RISKY_BINDINGS = ("core", "vector", "grid0", "block0")


@st.composite
def scheduled_cases(draw):
    """A random kernel, a random schedule of it, and with probability 1/2 one more bind of a random loop
    to a concurrent binding (often illegal: it may parallelize a carried dependence)."""
    case = draw(strategies.kernels(max_size=6))
    sizes = {n: v for n, v in case.sizes.items() if draw(st.booleans(), label=f"bind {n}")}
    s = draw(strategies.schedules(case.kernel, sizes=sizes, max_ops=3))
    if draw(st.booleans(), label="risky bind"):
        loop = draw(st.sampled_from([lp.name for lp in s.loops()]), label="loop")
        try:
            s.bind(loop, draw(st.sampled_from(RISKY_BINDINGS), label="kind"))
        except tc.ScheduleError:
            event("risky bind: precondition failed")
    return case, s


def _op_index(subject: str):
    """The history index of an op's report subject (``op 3: swap(...)``), or None for the initial program."""
    return int(subject.split(":")[0].split()[1]) if subject.startswith("op ") else None


def _outputs(program, sizes, arrays, order, seed):
    data = {k: v.copy() for k, v in arrays.items()}
    interpret_loops(program, sizes, data, order=order, seed=seed, checked=True)
    return {name: data[name] for name in program.outputs}


def check_really_differs(before, after, witness_sizes) -> bool:
    """Whether ``after`` fails or computes another result than ``before`` on some random integer input."""
    sizes = complete_sizes(before, dict(witness_sizes))
    for seed, rng in [(k, np.random.default_rng(k)) for k in SEEDS] + \
            [(k, np.random.default_rng([k, 99])) for k in range(4)]:  # the replay's inputs, then others
        arrays = {t.name: rng.integers(-4, 5, size=tuple(int(evaluate(d, sizes, {})) for d in t.shape))
                  .astype(dtype_of(t.dtype).storage) for t in before.tensors}
        try:
            want = _outputs(before, sizes, arrays, "canonical", seed)
        except TilecertError:
            continue  # no meaning on this input (e.g. a zero divisor)
        for order in ORDERS:
            try:
                got = _outputs(after, sizes, arrays, order, seed)
            except TilecertError:
                return True
            if any(not np.array_equal(want[n], got[n]) for n in before.outputs):
                return True
    return False


@settings(max_examples=300 if FULL else 10, deadline=None, database=None, derandomize=not FULL,
          suppress_health_check=list(HealthCheck))
@given(scheduled_cases())
def test_proved_schedules_match_the_specification_on_both_backends_and_disproved_replays_are_real(drawn):
    case, s = drawn
    report = s.check()
    if report.ok:
        event("proved")
        for target in ("c", "cuda-host"):
            diff = tc.differential(s, target=target, trials=3, sizes={n: v for n, v in case.sizes.items()
                                                                     if n not in s.sizes})
            assert diff.proved and diff.matched, (target, s.explain(), str(diff))
            assert {t.order for t in diff.trials} == set(ORDERS)
        return
    confirmed = _confirmed(report)
    event("disproved, replay confirmed" if confirmed else "not proved, no confirmed replay")
    for r in confirmed:
        k = _op_index(r.subject)
        assert check_really_differs(s.programs[k], s.programs[k + 1], {**dict(r.verdict.witness.sizes), **s.sizes}), \
            (r.subject, r.verdict.witness.lines())


def _confirmed(report):
    return [r for r in report if r.status == "disproved" and r.verdict.witness is not None
            and r.verdict.witness.replay.startswith("CONFIRMED") and _op_index(r.subject) is not None]


def test_the_disproved_examples_have_confirmed_replays_that_are_real_differences():
    from examples.prefix_sum import prefix_sum_on_cores
    from examples.shift import shift_swapped
    for s in (shift_swapped(), prefix_sum_on_cores()):
        report = s.check()
        assert not report.ok
        confirmed = _confirmed(report)
        assert confirmed, report.explain()
        for r in confirmed:
            k = _op_index(r.subject)
            assert check_really_differs(s.programs[k], s.programs[k + 1], r.verdict.witness.sizes)
        # the same program compared with itself never "differs": the check can fail both ways
        assert not check_really_differs(s.programs[0], s.programs[0], confirmed[0].verdict.witness.sizes)
