"""Scalar-descent GEMM: one scalar accumulator per output cell, a serial K loop into it."""
import tilecert as tc
from tilecert import f32


@tc.kernel
def gemm_scalar(A: tc.Tensor[f32, "M", "K"], B: tc.Tensor[f32, "K", "N"], C: tc.Tensor[f32, "M", "N"]):
    M, K = A.shape
    N = B.shape[1]
    for nest in tc.parallel(M, N):
        i, j = nest.index(0), nest.index(1)
        acc = tc.zeros(f32, ())
        for k in nest.serial(K):
            acc = acc + A.at(i, k.index()).load() * B.at(k.index(), j).load()
        C.at(i, j).store(acc)
