"""Layer normalization over the last axis, with per-column scale ``gamma`` and shift ``beta``.

``Y[m, :] = (X[m, :] - mean) / sqrt(var + eps) * gamma + beta`` with the mean and the
(biased) variance of row ``m``. Each parallel instance owns ``bm`` rows and makes three
passes over the columns in tiles of ``bn``:

1. a reduce region sums the row (out-of-bounds columns load 0, which a sum ignores);
2. a reduce region sums squared deviations; here the padding columns would add
   ``(0 - mean)**2``, so they are masked with ``tc.where`` on a column-index tile;
3. a serial loop normalizes and stores (stores skip the out-of-bounds cells).

Both statistics are reductions whose order does not matter up to rounding, so they use
the ``ordered_tree`` policy and an implementation may combine column tiles pairwise.
"""
import tilecert as tc
from tilecert import f32, i32


@tc.kernel
def layernorm(X: tc.Tensor[f32, "M", "N"], gamma: tc.Tensor[f32, "N"], beta: tc.Tensor[f32, "N"],
              Y: tc.Tensor[f32, "M", "N"], bm: int = 4, bn: int = 8, eps: float = 1e-5):
    M, N = X.shape
    for nest in tc.parallel(tc.cdiv(M, bm)):
        m0 = nest.index() * bm
        total = tc.zeros(f32, (bm,), dims=("M",))
        for j in nest.reduce(tc.cdiv(N, bn), policy="ordered_tree"):
            total = total + tc.reduce(X.tile((m0, j.index() * bn), (bm, bn)).load(), "N", "add")
        mean = total / N
        sq = tc.zeros(f32, (bm,), dims=("M",))
        for j in nest.reduce(tc.cdiv(N, bn), policy="ordered_tree"):
            x = X.tile((m0, j.index() * bn), (bm, bn)).load()
            col = j.index() * bn + tc.iota(i32, (bn,), dims=("N",))
            d = tc.where(col < N, x - mean, 0.0)
            sq = sq + tc.reduce(d * d, "N", "add")
        inv = 1.0 / tc.sqrt(sq / N + eps)
        for j in nest.serial(tc.cdiv(N, bn)):
            n0 = j.index() * bn
            x = X.tile((m0, n0), (bm, bn)).load()
            g = gamma.tile((n0,), (bn,)).load()
            b = beta.tile((n0,), (bn,)).load()
            Y.tile((m0, n0), (bm, bn)).store((x - mean) * inv * g + b)
