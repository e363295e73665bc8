"""The end-to-end demo: the GEMM example (``tilecert.examples.gemm``) from capture to compiled C.

Capture, interpret against numpy, schedule (tile, bind to cores, vectorize, unroll),
check every obligation of every op, emit C, run the differential harness, and print a
short report. Returns 0 only when everything matched and was proved.
"""
from __future__ import annotations

import importlib
import time
from typing import Callable

import numpy as np

import tilecert as tc


def gemm_schedule(gemm: tc.Kernel, n: int) -> tc.Schedule:
    """GEMM with 16x16 output tiles: row tiles on the cores, a 4-row unrolled register block
    over a vectorized column loop in the tile product."""
    s = tc.schedule(gemm, M=n, N=n, K=n, bm=16, bn=16, bk=8)
    s.tile(["nest.0", "nest.1"], [2, 2])
    s.bind("nest.0.o", "core")
    s.split("acc.mma.p1", 4, outer="rows", inner="row")
    s.bind("row", "unrolled")
    s.bind("acc.mma.p0", "vector")
    return s


def run_demo(n: int, seed: int, out: Callable[[str], None] = print) -> int:
    gemm = importlib.import_module("tilecert.examples.gemm").gemm
    program = tc.capture(gemm)
    out("== 1. the captured program (tile IR)")
    out(tc.format_program(program))
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n - 3, n + 5)).astype(np.float32)  # ragged in every dim
    b = rng.standard_normal((n + 5, n - 1)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    ok = True
    out("\n== 2. the reference interpreter against numpy (float64)")
    for checked in (True, False):
        t0 = time.perf_counter()
        c = tc.run(gemm, A=a, B=b, C=np.zeros(ref.shape, np.float32), checked=checked)["C"]
        err = float(np.abs(c - ref).max() / max(1.0, float(np.abs(ref).max())))
        ok &= err < 1e-5
        out(f"  {'checked' if checked else 'unchecked':9s} {1e3 * (time.perf_counter() - t0):7.1f} ms  "
            f"max rel. error {err:.1e}  {'MATCH' if err < 1e-5 else 'MISMATCH'}")
    out(f"  digest {tc.digest(program)[:16]}; JSON round trip "
        f"{'ok' if tc.load(tc.dump(program)) == program else 'BROKEN'}")

    out(f"\n== 3. a schedule (sizes {n}x{n}x{n}): tile, bind to cores, unroll, vectorize")
    s = gemm_schedule(gemm, n)
    out(s.explain())
    out(s.loop_tree())

    out("\n== 4. the checker: every obligation of every op")
    report = s.check()
    counts = report.counts()
    out("  " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    for result in report:
        if result.status != "proved":
            out(f"  {result.status}: {result}")
    ok &= report.ok

    out("\n== 5. C emission (first lines of the kernel)")
    source = tc.emit(s, target="c")
    body = source[source.find("void tc_kernel"):] if "void tc_kernel" in source else source
    out("\n".join(body.splitlines()[:24]) + "\n  ...")

    out("\n== 6. the differential harness: the specification, the scheduled program, the compiled C")
    diff = tc.differential(s, target="c", trials=5, seed=seed)
    out(f"  {diff}")
    ok &= diff.matched

    out(f"\n== report: obligations proved {counts.get('proved', 0)}/{len(report)}, "
        f"differential cases matched {sum(t.agrees for t in diff.trials)}/{len(diff.trials)} -> "
        f"{'ALL GOOD' if ok else 'SOMETHING FAILED'}")
    return 0 if ok else 1
