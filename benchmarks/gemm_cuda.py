"""f32 GEMM 4096^3 through the CUDA backend against cuBLAS (via CuPy), as a ratio taken in one run.

On a machine with a CUDA GPU, nvcc and CuPy: each candidate schedule of the GEMM example
(``candidates``) is validated, emitted, compiled with ``nvcc -cubin -O3`` for the GPU's
architecture and loaded with CuPy; its result is checked against ``cupy.matmul`` (cuBLAS
SGEMM) and its kernel time (CUDA events, best of ``--reps`` after a warm-up) compared with
cuBLAS's. Prints one row per candidate and the best schedule's time ratio
``ours / cuBLAS`` (lower is better) with both TFLOP/s.

The candidates: ``bm x bn`` output tiles on the grid, the K pipeline in ``bk``-deep panels
staged in shared memory, 16 x 16 threads each computing an ``r x r`` register block
(``split`` + ``reorder`` + ``bind`` to block slots, the block unrolled), the copies, the
zero fill and the store spread over the same 16 x 16 threads.

Without a GPU it says so and exits 0: the host emulation runs the same source on CPU
threads to check it, and its time is not a performance figure.

Run: ``python benchmarks/gemm_cuda.py [--n 4096] [--reps 10]``.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tilecert as tc  # noqa: E402
from examples.gemm import gemm  # noqa: E402
from tilecert.backends.cuda import gpu_present, lowered  # noqa: E402
from tilecert.backends.cuda.build import tool  # noqa: E402
from tilecert.backends.cuda.plan import plan  # noqa: E402
from tilecert.checker.gate import require  # noqa: E402
from tilecert.semantics.index import evaluate  # noqa: E402

THREADS = 16  # threads along x and along y
CANDIDATES = ((64, 64, 16, 4), (32, 32, 32, 2), (128, 64, 16, 4))  # (bm, bn, bk, r): 16 r = bm, 16 r = bn


def schedule(n: int, bm: int, bn: int, bk: int, r: int) -> tc.Schedule:
    s = tc.schedule(gemm, M=n, N=n, K=n, bm=bm, bn=bn, bk=bk)
    s.bind("nest.0", "grid1")
    s.bind("nest.1", "grid0")
    s.split("acc.mma.p1", bm // THREADS, outer="mo", inner="mi")
    s.split("acc.mma.p0", r, outer="no", inner="ni")
    s.reorder(["mo", "mi", "no", "ni", "acc.mma.K"])
    s.reorder(["mo", "no", "acc.mma.K", "mi", "ni"])
    for loop, kind in (("mo", "block1"), ("no", "block0"), ("mi", "unrolled"), ("ni", "unrolled")):
        s.bind(loop, kind)
    extents = {"acc.full.p1": bm, "acc.full.p0": bn, "a.load.M": bm, "a.load.K": bk, "b.load.K": bk, "b.load.N": bn,
               "C.store.M": bm, "C.store.N": bn}
    for rows, cols in (("acc.full.p1", "acc.full.p0"), ("a.load.M", "a.load.K"), ("b.load.K", "b.load.N"),
                       ("C.store.M", "C.store.N")):
        row = list(s.split(rows, THREADS)) if extents[rows] > THREADS else [rows]
        col = list(s.split(cols, THREADS)) if extents[cols] > THREADS else [cols]
        if len(row) + len(col) > 2:
            s.reorder(row + col)
            s.reorder(row[:-1] + col[:-1] + [row[-1], col[-1]])
        s.bind(row[-1], "block1")
        s.bind(col[-1], "block0")
    return s


def candidates(n: int):
    for bm, bn, bk, r in CANDIDATES:
        yield f"{bm}x{bn} tiles, bk {bk}, {bm // THREADS}x{r} per thread", schedule(n, bm, bn, bk, r)


def load_kernel(s: tc.Schedule, arch: str, folder: Path):
    """The schedule's kernel as a CuPy function, and its grid and block dimensions."""
    import cupy as cp
    proof = require(s, allow_unproved=False, action="benchmark")  # only a proved schedule is timed
    low, source = lowered(s.program, s.sizes, proof)
    if not low.validation.ok:
        raise SystemExit(f"translation validation of the schedule is not proved:\n{low.validation.explain()}")
    _, launches = plan(low.lowered)
    if len(launches) != 1:
        raise SystemExit(f"expected one launch, the schedule has {len(launches)}")
    src, cubin = folder / "gemm.cu", folder / "gemm.cubin"
    src.write_text(source)
    subprocess.run([tool("nvcc")[0], "-cubin", "-O3", f"-arch={arch}", "-o", str(cubin), str(src)], check=True)
    function = cp.RawModule(path=str(cubin)).get_function(f"tc_k0_{low.lowered.name}")
    grid, block = (tuple(int(evaluate(e, dict(s.sizes), {})) for e in dims) for dims in launches[0].launch_dims())
    return function, grid, block


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    if not gpu_present():
        print("no CUDA GPU on this machine: the CUDA GEMM benchmark needs one (the host emulation runs the same "
              "kernels on CPU threads to check them; its time is not a performance figure and is not reported)")
        return 0
    try:
        import cupy as cp
    except ImportError:
        print("CuPy is not installed: pip install cupy-cuda12x (or the build matching the CUDA toolkit)")
        return 1
    n = args.n
    rng = np.random.default_rng(0)
    a = cp.asarray(rng.standard_normal((n, n)).astype(np.float32))
    b = cp.asarray(rng.standard_normal((n, n)).astype(np.float32))
    major, minor = cp.cuda.Device().compute_capability[:-1], cp.cuda.Device().compute_capability[-1]
    arch = f"sm_{major}{minor}"
    flops = 2.0 * n ** 3

    def best_time(run) -> float:
        run()
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        times = []
        for _ in range(args.reps):
            start.record()
            run()
            stop.record()
            stop.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, stop) * 1e-3)
        return min(times)

    want = cp.matmul(a, b)
    t_blas = best_time(lambda: cp.matmul(a, b))
    print(f"cuBLAS (cupy.matmul)          {t_blas * 1e3:9.3f} ms  {flops / t_blas * 1e-12:7.2f} TFLOP/s")
    best = None
    with tempfile.TemporaryDirectory(prefix="tilecert-bench-") as tmp:
        for label, s in candidates(n):
            function, grid, block = load_kernel(s, arch, Path(tmp))
            c = cp.zeros((n, n), cp.float32)
            err = cp.zeros(1, cp.int32)
            sizes = [np.int64(n)] * 3

            def run() -> None:
                function(grid, block, (a, b, c, *sizes, err))

            t = best_time(run)
            error = float(cp.max(cp.abs(c - want)) / cp.max(cp.abs(want)))
            ok = error < 1e-4 and int(err[0]) == 0
            print(f"{label:30s}{t * 1e3:9.3f} ms  {flops / t * 1e-12:7.2f} TFLOP/s  max rel. error {error:.1e}"
                  f"{'' if ok else '  WRONG RESULT'}")
            if ok and (best is None or t < best[1]):
                best = (label, t)
    if best is None:
        print("no candidate computed the right result")
        return 1
    print(f"best schedule ({best[0]}): {best[1] / t_blas:.2f}x cuBLAS's time "
          f"({t_blas / best[1] * 100:.1f}% of its throughput), n = {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
