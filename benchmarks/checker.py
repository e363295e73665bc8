"""Checker cost: a tiled, bound GEMM schedule checked with sizes symbolic, 64 and 2^20, beside brute force.

The schedule (``gemm_schedule``, 11 ops on the i32 GEMM example): the two output-tile loops
on grid slots, the tile product tiled 4 x 4 with its tile loops on block slots and one
inner loop unrolled, the A copy split with its loops on block slots, the store on block
slots. ``s.check()`` discharges every obligation of the initial program and of each op
(coverage, prefix_cut, dependence, noninterference, reduction_policy, barrier_uniform,
bounds, and containment and hardware_limits for the final program).

Printed, as ratios taken in one run (best of ``--repeat``):

- the whole check with the sizes symbolic, bound to 64, bound to 2^20, and the ratio
  2^20 / 64 (targets: each under 2 s, the ratio within 1.5: isl decides Presburger
  formulas whatever the constants, so the cost does not grow with the extents);
- the brute-force enumeration checker (``checker/brute.py``: every instance, every pair on
  a cell) on the same schedule with smaller tiles at small sizes, beside the symbolic check
  of that schedule, and how the brute-force time grows with the sizes.

Run: ``python benchmarks/checker.py [--repeat 3]``.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tilecert as tc  # noqa: E402
from examples.gemm_i32 import gemm_i32_blocked  # noqa: E402
from tilecert.checker.brute import brute_check_schedule  # noqa: E402


gemm_schedule = gemm_i32_blocked


def best(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def summary(report: tc.checker.Report) -> str:
    c = report.counts()
    return f"{len(report)} obligations: {c['proved']} proved, {c['disproved']} disproved, {c['unknown']} unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print("checker benchmark: tiled, bound i32 GEMM schedule, best of", args.repeat)
    rows = {}
    for label, sizes in (("symbolic sizes", {}), ("M = N = K = 64", dict(M=64, N=64, K=64)),
                         ("M = N = K = 2^20", dict(M=2 ** 20, N=2 ** 20, K=2 ** 20))):
        s = gemm_schedule(32, 8, **sizes)
        seconds, report = best(args.repeat, s.check)
        rows[label] = seconds
        print(f"  tiles 32x32x8, {len(s.history)} ops, {label:17s} {seconds:6.3f} s   ({summary(report)})")
        for r in report:
            if not r.verdict.proved:
                print(f"      {r.subject}: {r.kind} {r.status}: "
                      f"{r.verdict.witness.summary if r.verdict.witness else r.verdict.reason}")
    ratio = rows["M = N = K = 2^20"] / rows["M = N = K = 64"]
    slowest = max(rows.values())
    print(f"  ratio 2^20 / 64: {ratio:.2f} (target <= 1.5: {'met' if ratio <= 1.5 else 'MISSED'}); "
          f"slowest whole check {slowest:.3f} s (target < 2 s: {'met' if slowest < 2 else 'MISSED'})")
    print("brute-force enumeration beside the symbolic check (tiles 8x8x4, same ops)")
    small = gemm_schedule(8, 4)
    symbolic, _ = best(args.repeat, small.check)
    print(f"  symbolic, sizes symbolic: {symbolic:6.3f} s")
    previous = None
    for n in (8, 16, 24):
        sizes = dict(M=n, N=n, K=8)
        seconds, found = best(1, lambda: brute_check_schedule(small, sizes))
        bad = sum(1 for _, _, count in found if count)
        growth = f", x{seconds / previous:.1f} over the previous size" if previous else ""
        print(f"  brute force at M = N = {n:2d}, K = 8: {seconds:6.3f} s = {seconds / symbolic:5.1f} x symbolic"
              f" ({len(found)} obligations, {bad} with violations{growth})")
        previous = seconds
    return 0


if __name__ == "__main__":
    sys.exit(main())
