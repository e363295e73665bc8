"""Single-channel 2-D convolution (cross-correlation) with 'same' zero padding.

``Y[i, j] = sum_{r, s} X[i + r - R//2, j + s - S//2] * F[r, s]`` for an ``R x S`` filter.
Each parallel instance owns a ``bh x bw`` output tile; a reduce region over the filter
taps loads, for each tap, the input window shifted by the tap's offset. Near the top and
left edges the window's origin is negative and near the bottom and right edges it runs
past the input: under ``bounds="zero"`` those cells read 0, which *is* the zero padding.
"""
import tilecert as tc
from tilecert import f32


@tc.kernel
def conv2d(X: tc.Tensor[f32, "H", "W"], F: tc.Tensor[f32, "R", "S"], Y: tc.Tensor[f32, "H", "W"],
           bh: int = 4, bw: int = 4):
    H, W = X.shape
    R, S = F.shape
    for nest in tc.parallel(tc.cdiv(H, bh), tc.cdiv(W, bw)):
        i0 = nest.index(0) * bh
        j0 = nest.index(1) * bw
        acc = tc.zeros(f32, (bh, bw), dims=("H", "W"))
        for tap in nest.reduce(R, S, policy="unordered_tree"):
            r = tap.index(0)
            s = tap.index(1)
            window = X.tile((i0 + r - R // 2, j0 + s - S // 2), (bh, bw), bounds="zero").load()
            acc = acc + window * F.at(r, s).load()
        Y.tile((i0, j0), (bh, bw)).store(acc)
