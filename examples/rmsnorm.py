"""RMS normalization over the last axis: ``Y[m, :] = X[m, :] / sqrt(mean(X[m, :]**2) + eps) * gamma``.

Each parallel instance owns ``bm`` rows. A two-stage pipeline over column tiles (load,
then square-and-accumulate) carries the per-row sum of squares; out-of-bounds columns
load 0 and add nothing, so the ragged last tile needs no mask. A serial loop then scales
each column tile and stores it.
"""
import tilecert as tc
from tilecert import f32


@tc.kernel
def rmsnorm(X: tc.Tensor[f32, "M", "N"], gamma: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "M", "N"],
            bm: int = 4, bn: int = 8, eps: float = 1e-6):
    M, N = X.shape
    for nest in tc.parallel(tc.cdiv(M, bm)):
        m0 = nest.index() * bm
        sumsq = tc.zeros(f32, (bm,), dims=("M",))
        for j in nest.pipeline(tc.cdiv(N, bn), window=2):
            j.stage("load")
            x = X.tile((m0, j.index() * bn), (bm, bn)).load()
            j.stage("accumulate")
            sumsq = sumsq + tc.reduce(x * x, "N", "add")
        scale = 1.0 / tc.sqrt(sumsq / N + eps)
        for j in nest.serial(tc.cdiv(N, bn)):
            n0 = j.index() * bn
            x = X.tile((m0, n0), (bm, bn)).load()
            g = gamma.tile((n0,), (bn,)).load()
            Y.tile((m0, n0), (bm, bn)).store(x * scale * g)
