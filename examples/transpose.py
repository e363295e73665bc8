"""Tiled transpose ``B[N, M] = A[M, N]^T``.

A tile loaded from ``A`` has dims ``(M, N)``; the view of ``B`` has dims ``(N, M)``.
A store aligns the tile to the view by dim *identity*, not by position, so storing the
``(M, N)`` tile into the ``(N, M)`` box transposes it; no explicit transpose op exists.
"""
import tilecert as tc
from tilecert import f32


@tc.kernel
def transpose(A: tc.Tensor[f32, "M", "N"], B: tc.Tensor[f32, "N", "M"], bm: int = 4, bn: int = 3):
    M, N = A.shape
    for nest in tc.parallel(tc.cdiv(M, bm), tc.cdiv(N, bn)):
        m0 = nest.index(0) * bm
        n0 = nest.index(1) * bn
        a = A.tile((m0, n0), (bm, bn)).load()
        B.tile((n0, m0), (bn, bm)).store(a)
