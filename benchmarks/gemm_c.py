"""f32 GEMM 1024^3 through the C backend, as GFLOP/s ratios taken in one run.

Rows: numpy's ``A @ B`` (the BLAS it links), the scheduled kernel, the unscheduled kernel
(the example's default config, loops as written), and, when the ``halide`` package is
installed (``pip install -e .[bench]``), the same schedule written in Halide twice: with
``StrictFloat`` (the equivalent program: every product rounded, then added, in the same
order, so its result is bitwise ours) and with Halide's default float semantics (which let
LLVM contract each multiply-add into one FMA: a different, faster computation).

The schedule (``staged_schedule``: ``best_schedule`` plus a Stage of B over 16-column strips, see there; the row
"scheduled, B unpacked" is ``best_schedule`` alone): 128 x 256 output tiles, row tiles on the threads (grid0),
the K pipeline in 256-deep panels copied into per-thread tiles (A 128 x 256, B 256 x 256; with the Stage the C
backend reads the B tile from the pack instead of copying it);
the tile product as register blocks of 6 rows by 16 vectorised columns (12 vector
accumulators on AVX2), reordered so the contraction runs outside the block (``no, mo, K, mi,
ni``: a 16-column strip of the B tile stays in L1 while the row blocks pass over it); the row
blocks partitioned into the whole ones and the ragged last one; in each, the block's
accumulation privatized across K into a 6 x 16 local tile and its rows materialized, so every
tile index is a constant and the block stays in registers; the copies, the tile's
initialisation and the store vectorised. The lowering proves every local tile written before
it is read, so none is zero-filled. The staged schedule is checked proved (``s.check().ok``), and
results against float64 numpy, before timing; the scheduled rows and Halide strict are also
compared bit for bit. Halide's rows read B in place (its schedule copies no tiles at all): the
Stage changes where B is read from, not the loops or the arithmetic.

Threads: the kernel runs its row tiles on OpenMP's default team, numpy on OpenBLAS's and
Halide on its own pool; the header prints each count and the BLAS kernel numpy uses. For a
single-threaded comparison set ``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 HL_NUM_THREADS=1``; then
``--clock cpu`` times by the process's CPU time, which on a shared machine leaves out the time
other processes hold the core (it is refused unless every row runs one thread).
``make bench`` runs this with ``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` unset, so OpenBLAS
picks its kernel for the machine itself.

The machine may be shared: each round times every row (best of ``reps``), rounds
interleave the rows, and the table gives the best round and the range over rounds.

Run: ``python benchmarks/gemm_c.py [--n 1024] [--reps 5] [--rounds 3] [--clock wall|cpu]``.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time
from pathlib import Path
from typing import Callable, Optional

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tilecert as tc  # noqa: E402
from examples.gemm import gemm  # noqa: E402

TILE_M, TILE_N, PANEL_K, ROWS, COLS = 128, 256, 256, 6, 16
UNPACKED = "tilecert C, scheduled, B unpacked"


def best_schedule(n: int) -> tc.Schedule:
    s = tc.schedule(gemm, M=n, N=n, K=n, bm=TILE_M, bn=TILE_N, bk=PANEL_K)
    s.split("acc.mma.p1", ROWS, outer="mo", inner="mi")
    s.split("acc.mma.p0", COLS, outer="no", inner="ni")
    s.reorder(["no", "mo", "acc.mma.K", "mi", "ni"])
    s.partition("mo", s.partition_breakpoints("mo"))  # the whole row blocks (guard-free), then the ragged last one
    vector = ["a.load.K", "b.load.N", "C.store.N", "acc.full.p0"]
    for seg in ("s0", "s1"):
        _, init_cols, _, store_cols = s.privatize("acc", f"acc.mma.K.{seg}")
        vector += [init_cols, store_cols, *s.unroll(f"mi.{seg}", materialize=True)]
    s.bind("nest.0", "grid0")
    for loop in vector:
        s.bind(loop, "vector")
    return s


def staged_schedule(n: int) -> tc.Schedule:
    """``best_schedule`` with B marked constant and staged hoisted (``s.stage(..., hoisted=True)``) over 16-column
    strips of the B tile copy (``b.load.N`` split by 16, the strip loop outside ``b.load.K``): B packed once into
    ``B.packed[K / 256, N / 16, 256, 16]``, each 256 x 16 strip of panel k contiguous (16 KiB: what the register
    block's 2 vectors per k step stream). The C backend reads the B tile from the pack itself (the tile is a whole
    copy of 16 consecutive strips, its copy elided: ``backends/c/views.py``), so the kernel copies only A. The
    arithmetic (and so every rounding) is ``best_schedule``'s; the C runner computes the pack once per B and checks
    B's CRC-32 on every later call (a changed B is refused), which the timed calls include."""
    s = best_schedule(n)
    s.constant("B")
    strip, col = s.split("b.load.N", COLS, outer="b.strip", inner="b.col")
    s.reorder([strip, "b.load.K", col])
    s.stage("B", ["b.load.K", col], hoisted=True)
    return s


def halide_gemm(a: np.ndarray, b: np.ndarray, strict: bool) -> Optional[Callable[[], np.ndarray]]:
    """The same schedule in Halide, with ``StrictFloat`` when ``strict`` (None when Halide is not installed)."""
    try:
        import halide as hl
    except ImportError:
        return None
    n = a.shape[0]
    A, B = hl.Buffer(a), hl.Buffer(b)  # numpy [row, col] is Halide (col, row)
    j, i, jo, io, ji, ii, iio, iii, jjo, jji = (hl.Var(x) for x in ("j", "i", "jo", "io", "ji", "ii", "iio", "iii",
                                                                       "jjo", "jji"))
    k = hl.RDom([(0, n)])
    acc, out = hl.Func("acc"), hl.Func("out")
    acc[j, i] = hl.f32(0)
    acc[j, i] += A[k.x, i] * B[j, k.x]
    out[j, i] = acc[j, i]
    out.tile(j, i, jo, io, ji, ii, TILE_N, TILE_M).parallel(io).vectorize(ji, 16)
    acc.compute_at(out, jo).vectorize(j, 16)
    rko, rki = hl.RVar("rko"), hl.RVar("rki")
    (acc.update().split(k.x, rko, rki, PANEL_K).split(i, iio, iii, ROWS, hl.TailStrategy.GuardWithIf)
     .split(j, jjo, jji, COLS).reorder(jji, iii, rki, iio, jjo, rko).vectorize(jji, COLS).unroll(iii))
    target = hl.get_host_target()
    out.compile_jit(target.with_feature(hl.TargetFeature.StrictFloat) if strict else target)
    result = hl.Buffer(hl.Float(32), [n, n])

    def run() -> np.ndarray:
        out.realize(result)
        return np.asarray(result)

    return run


def threads() -> tuple[list[Optional[int]], str]:
    """What each row runs on, as counts (tilecert C, numpy, Halide; None where unknown) and a line: OpenMP's
    team size (the C kernels), OpenBLAS's threads and kernel (numpy), Halide's pool (``HL_NUM_THREADS``,
    else one thread per CPU)."""
    omp = ctypes.CDLL("libgomp.so.1").omp_get_max_threads()
    blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    count: Optional[int] = None
    kernel = "unknown kernel"
    for lib in (Path(np.__file__).parent.parent / "numpy.libs").glob("*openblas*"):
        so = ctypes.CDLL(str(lib))
        for prefix, suffix in (("scipy_openblas_", "64_"), ("openblas_", "64_"), ("openblas_", "")):
            fn = getattr(so, f"{prefix}get_corename{suffix}", None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                kernel, count = fn().decode(), int(getattr(so, f"{prefix}get_num_threads{suffix}")())
                break
    halide = int(os.environ.get("HL_NUM_THREADS") or os.cpu_count() or 0) or None
    line = (f"threads: tilecert C {omp} (OpenMP), numpy {count or '?'} ({blas.get('name', 'unknown BLAS')} "
            f"{blas.get('version', '')}, kernel {kernel}), Halide {halide or '?'}"
            f"{'' if 'HL_NUM_THREADS' in os.environ else ' (one per CPU)'}")
    return [omp, count, halide], line


def gflops(fn: Callable[[], object], n: int, reps: int, clock: Callable[[], float]) -> float:
    time.sleep(1.0)  # let the previous library's worker threads stop spinning before timing this one
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = clock()
        fn()
        best = min(best, clock() - t0)
    return 2.0 * n**3 / best / 1e9


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="cpu: the process's CPU time, which leaves out the time other processes hold the "
                             "core (single-threaded runs only)")
    args = parser.parse_args(argv)
    counts, thread_line = threads()
    if args.clock == "cpu" and counts != [1, 1, 1]:
        parser.error("--clock cpu needs every row single-threaded: "
                     "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 HL_NUM_THREADS=1")
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    n = args.n
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-4 * np.abs(ref).max()

    staged = staged_schedule(n)
    if not staged.check().ok:
        print("tilecert C, scheduled (staged_schedule): schedule NOT PROVED")
        return 1
    scheduled, unpacked = tc.compile(staged), tc.compile(best_schedule(n))
    plain = tc.compile(tc.schedule(gemm, M=n, N=n, K=n))
    c1, c2, c3 = (np.zeros((n, n), np.float32) for _ in range(3))
    rows = [("numpy A @ B", lambda: a @ b, a @ b)]
    scheduled.run_in_place(A=a, B=b, C=c1)  # packs B (once: later calls reuse the pack)
    rows.append(("tilecert C, scheduled", lambda: scheduled.run_in_place(A=a, B=b, C=c1), c1))
    unpacked.run_in_place(A=a, B=b, C=c3)
    rows.append((UNPACKED, lambda: unpacked.run_in_place(A=a, B=b, C=c3), c3))
    plain.run_in_place(A=a, B=b, C=c2)
    rows.append(("tilecert C, unscheduled", lambda: plain.run_in_place(A=a, B=b, C=c2), c2))
    strict, fused = halide_gemm(a, b, strict=True), halide_gemm(a, b, strict=False)
    if strict is not None and fused is not None:
        rows += [("Halide, same schedule, strict", strict, strict()), ("Halide, same schedule, fma", fused, fused())]
    for name, _, result in rows:
        if np.abs(result - ref).max() > tol:
            print(f"{name}: WRONG RESULT (max error {np.abs(result - ref).max():.3g})")
            return 1
    rates: dict[str, list[float]] = {name: [] for name, _, _ in rows}
    for _ in range(args.rounds):
        for name, fn, _ in rows:
            rates[name].append(gflops(fn, n, args.reps if "unscheduled" not in name else 1, clock))
    base = max(rates["numpy A @ B"])
    ours = max(rates["tilecert C, scheduled"])
    print(f"f32 GEMM {n}^3, {args.rounds} rounds of best-of-{args.reps}, one run, {args.clock} clock")
    print(f"  {thread_line}")
    for name, rs in rates.items():
        print(f"  {name:33s} {max(rs):7.1f} GFLOP/s (rounds {min(rs):5.1f}-{max(rs):5.1f})   "
              f"{max(rs) / base:5.2f}x numpy   {ours / max(rs):5.2f}x ours-over-it")
    print(f"  tilecert C, scheduled == {UNPACKED}, bit for bit: {'yes' if np.array_equal(c3, c1) else 'NO'}")
    if strict is None:
        print("  Halide: not installed (pip install -e .[bench])")
    else:
        same = np.array_equal(c1, rows[4][2])
        print(f"  tilecert C, scheduled == Halide strict, bit for bit: {'yes' if same else 'NO'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
