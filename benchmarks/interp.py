"""Interpreter speed: time over plain numpy for tile kernels, and element throughput.

Run as ``.venv/bin/python benchmarks/interp.py`` (``make bench``). Prints one table and
writes nothing. Times are best-of-N, the interpreter and numpy runs interleaved so that
both see the same machine state; ratios are interpreter time / numpy time. ``tc.run`` runs
the fast interpreter (``semantics/interp_fast.py``) in both modes; checked mode batches
like unchecked mode and records every parallel instance's accesses of written tensors.
Targets: each kernel ratio <= 10x in both modes (checked: noninterference recording on),
the scalar-descent and serial-fold throughputs >= 1e6 elements/s. A recurrence that cannot
be folded (it runs iteration by iteration) is reported for reference. The machine should be
otherwise idle: multi-threaded BLAS calls slow down by large factors when the cores are shared.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import tilecert as tc  # noqa: E402
from tilecert import f32  # noqa: E402

try:
    from examples.gemm import gemm  # noqa: E402
except ImportError:  # pragma: no cover - the example is part of the repository
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from gemm import gemm  # type: ignore  # noqa: E402

try:
    from examples.softmax import softmax as _example_softmax  # noqa: E402
except ImportError:  # pragma: no cover
    _example_softmax = None


@tc.kernel
def _row_softmax(X: tc.Tensor[f32, "M", "N"], Y: tc.Tensor[f32, "M", "N"], bm: int = 8, bc: int = 1024):
    """Row softmax: each instance owns ``bm`` full rows (``bc >= N``)."""
    M, N = X.shape
    for nest in tc.parallel(tc.cdiv(M, bm)):
        m0 = nest.index() * bm
        x = X.tile((m0, 0), (bm, bc)).load(fallback=float("-inf"))
        e = tc.exp(x - tc.reduce(x, "N", "max"))
        Y.tile((m0, 0), (bm, bc)).store(e / tc.reduce(e, "N", "add"))


softmax = _example_softmax if _example_softmax is not None else _row_softmax


@tc.kernel
def scale_shift(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"]):
    """Scalar descent: one element per parallel instance."""
    N = X.shape[0]
    for nest in tc.parallel(N):
        i = nest.index()
        Y.at(i).store(X.at(i).load() * 2 + 1)


@tc.kernel
def serial_sum(X: tc.Tensor[f32, "N"], S: tc.Tensor[f32, "P"]):
    """A strict left fold over the elements, one element per iteration."""
    N = X.shape[0]
    acc = tc.zeros(f32, ())
    for k in tc.serial(N):
        acc = acc + X.at(k.index()).load()
    S.at(0).store(acc)


@tc.kernel
def serial_recurrence(X: tc.Tensor[f32, "N"], S: tc.Tensor[f32, "P"]):
    """A recurrence with no merge (acc = acc / 2 + x): runs iteration by iteration."""
    N = X.shape[0]
    acc = tc.zeros(f32, ())
    for k in tc.serial(N):
        acc = acc * 0.5 + X.at(k.index()).load()
    S.at(0).store(acc)


def best_of(fns, repeat: int) -> list[float]:
    """Best wall time of each function, the functions run interleaved ``repeat`` times."""
    best = [float("inf")] * len(fns)
    for f in fns:
        f()  # warm up (captures, compiled interpreters, caches)
    for _ in range(repeat):
        for j, f in enumerate(fns):
            t0 = time.perf_counter()
            f()
            best[j] = min(best[j], time.perf_counter() - t0)
    return best


def checked_cell(t_c: float, t_np: float, t_u: float) -> str:
    """The checked-mode entry: time, ratio to numpy, and the factor over unchecked mode."""
    return f"{t_c * 1e3:.1f} ms  {t_c / t_np:.1f}x  ({t_c / t_u:.2f}x unchecked)"


def np_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def main() -> None:
    rng = np.random.default_rng(0)
    rows: list[tuple[str, str, str, str]] = []

    # GEMM 256^3, 32^3 tiles
    A = rng.standard_normal((256, 256)).astype(np.float32)
    B = rng.standard_normal((256, 256)).astype(np.float32)
    C = np.zeros((256, 256), np.float32)
    cfg = dict(bm=32, bn=32, bk=32)
    out = tc.run(gemm, A=A, B=B, C=C, checked=False, **cfg)["C"]
    assert np.allclose(out, A @ B, rtol=1e-4, atol=1e-3)
    t_u, t_c, t_np = best_of([lambda: tc.run(gemm, A=A, B=B, C=C, checked=False, **cfg),
                              lambda: tc.run(gemm, A=A, B=B, C=C, checked=True, **cfg),
                              lambda: A @ B], repeat=15)
    rows.append(("gemm 256^3, tiles 32^3", f"{t_np * 1e3:.3f} ms", f"{t_u * 1e3:.2f} ms  {t_u / t_np:.1f}x",
                 checked_cell(t_c, t_np, t_u)))

    # softmax 1024 x 1024
    X = rng.standard_normal((1024, 1024)).astype(np.float32)
    Y = np.zeros_like(X)
    scfg = dict(bm=8, bc=1024)
    out = tc.run(softmax, X=X, Y=Y, checked=False, **scfg)["Y"]
    assert np.allclose(out, np_softmax(X), rtol=1e-4, atol=1e-6)
    t_u, t_c, t_np = best_of([lambda: tc.run(softmax, X=X, Y=Y, checked=False, **scfg),
                              lambda: tc.run(softmax, X=X, Y=Y, checked=True, **scfg),
                              lambda: np_softmax(X)], repeat=10)
    rows.append(("softmax 1024x1024", f"{t_np * 1e3:.3f} ms", f"{t_u * 1e3:.2f} ms  {t_u / t_np:.1f}x",
                 checked_cell(t_c, t_np, t_u)))

    # element throughput
    n_u, n_c = 1 << 20, 1 << 13
    Xe = rng.standard_normal(n_u).astype(np.float32)
    Ye = np.zeros_like(Xe)
    S = np.zeros(1, np.float32)
    assert np.array_equal(tc.run(scale_shift, X=Xe, Y=Ye, checked=False)["Y"], Xe * np.float32(2) + np.float32(1))
    t_u, t_c = best_of([lambda: tc.run(scale_shift, X=Xe, Y=Ye, checked=False),
                        lambda: tc.run(scale_shift, X=Xe[:n_c], Y=Ye[:n_c], checked=True)], repeat=5)
    rows.append(("scalar descent Y[i] = 2 X[i] + 1", "elements/s", f"{n_u / t_u:.3g}/s  (N={n_u})",
                 f"{n_c / t_c:.3g}/s  (N={n_c})"))
    ref = np.add.accumulate(np.concatenate([[np.float32(0)], Xe]), dtype=np.float32)[-1]
    assert tc.run(serial_sum, X=Xe, S=S, checked=False)["S"][0] == ref
    t_u, t_c = best_of([lambda: tc.run(serial_sum, X=Xe, S=S, checked=False),
                        lambda: tc.run(serial_sum, X=Xe[:n_c], S=S, checked=True)], repeat=5)
    rows.append(("serial fold acc += X[k]", "elements/s", f"{n_u / t_u:.3g}/s  (N={n_u})",
                 f"{n_c / t_c:.3g}/s  (N={n_c})"))
    t_u, t_c = best_of([lambda: tc.run(serial_recurrence, X=Xe[:n_c], S=S, checked=False),
                        lambda: tc.run(serial_recurrence, X=Xe[:n_c], S=S, checked=True)], repeat=3)
    rows.append(("serial recurrence acc = acc/2 + X[k] *", "elements/s", f"{n_c / t_u:.3g}/s  (N={n_c})",
                 f"{n_c / t_c:.3g}/s  (N={n_c})"))

    head = ("kernel", "numpy", "unchecked (target <= 10x, >= 1e6/s)", "checked (target <= 10x)")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(4)]
    line = "  ".join("-" * w for w in widths)
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip())
    print(line)
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    print("* no known merge: the loop runs iteration by iteration in both modes (no target)")


if __name__ == "__main__":
    main()
