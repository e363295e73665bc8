"""A 2-D five-point stencil (the discrete negative Laplacian) with zero boundary values.

``Y[i, j] = 4 X[i, j] - X[i - 1, j] - X[i + 1, j] - X[i, j - 1] - X[i, j + 1]`` where cells
outside ``X`` count as 0. Each parallel instance owns a ``bh x bw`` output tile and loads
the centre tile and its four neighbours: the same box shifted by one cell up, down, left
and right, i.e. the tile's halo. On the first row and column of tiles those boxes have a
negative origin, and on the last ones they run past the edge; under ``bounds="zero"``
those cells read 0, which is exactly the boundary condition. The data are 32-bit
integers, so the result is exact.
"""
import tilecert as tc
from tilecert import i32


@tc.kernel
def stencil(X: tc.Tensor[i32, "H", "W"], Y: tc.Tensor[i32, "H", "W"], bh: int = 4, bw: int = 3):
    H, W = X.shape
    for nest in tc.parallel(tc.cdiv(H, bh), tc.cdiv(W, bw)):
        i0 = nest.index(0) * bh
        j0 = nest.index(1) * bw
        centre = X.tile((i0, j0), (bh, bw), bounds="zero").load()
        up = X.tile((i0 - 1, j0), (bh, bw), bounds="zero").load()
        down = X.tile((i0 + 1, j0), (bh, bw), bounds="zero").load()
        left = X.tile((i0, j0 - 1), (bh, bw), bounds="zero").load()
        right = X.tile((i0, j0 + 1), (bh, bw), bounds="zero").load()
        Y.tile((i0, j0), (bh, bw), bounds="zero").store(4 * centre - up - down - left - right)
