"""Schedule replay cost: ``Schedule.from_json`` of long histories, against the number of ops.

Two histories that leave the program the same size, so a linear replay costs the same per op
at every length:

- ``swap``: the GEMM example (sizes 64) with its two output-tile loops swapped back and forth;
- ``split/fuse``: the elementwise example (N = 64) with its block loop split by 2 and the two
  halves fused back (explicit names), over and over.

For each history and length the schedule is built, written with ``to_json`` and replayed from
the text with the simplifier's decision memo cleared first (a fresh process would start with
it empty). Printed: seconds per replay and milliseconds per op; targets: 200 ops under 5 s,
3,000 ops under 60 s, per-op cost roughly flat in the length.

Run: ``python benchmarks/replay.py [--lengths 200 3000]``.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tilecert as tc  # noqa: E402
from examples import EXAMPLES  # noqa: E402
from tilecert.semantics.sched import simplify  # noqa: E402


def swaps(n: int) -> tc.Schedule:
    s = tc.schedule(EXAMPLES["gemm"].kernel, M=64, N=64, K=64)
    for k in range(n):
        s.swap(*(("nest.0", "nest.1") if k % 2 == 0 else ("nest.1", "nest.0")))
    return s


def split_fuse(n: int) -> tc.Schedule:
    s = tc.schedule(EXAMPLES["elementwise"].kernel, N=64)
    for _ in range(n // 2):
        outer, inner = s.split("nest", 2, outer="a", inner="b")
        s.fuse(outer, inner, name="nest")
    return s


HISTORIES: dict[str, Callable[[int], tc.Schedule]] = {"swap": swaps, "split/fuse": split_fuse}


def replay_seconds(s: tc.Schedule) -> float:
    text = s.to_json()
    simplify._decide.cache_clear()
    t0 = time.perf_counter()
    tc.Schedule.from_json(text, s.kernel)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[200, 3000])
    args = parser.parse_args()
    for name, build in HISTORIES.items():
        for n in args.lengths:
            s = build(n)
            seconds = replay_seconds(s)
            print(f"{name:>10} {len(s.history):5d} ops: replay {seconds:7.2f} s, {1000 * seconds / len(s.history):6.2f} ms/op")


if __name__ == "__main__":
    main()
