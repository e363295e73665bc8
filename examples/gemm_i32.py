"""The GEMM of ``gemm.py`` on 32-bit integers: ragged in every dim, pipelined over K.

Integer arithmetic is exact (it wraps on overflow, like the hardware), so the result
must equal ``A @ B`` bit for bit whatever tile sizes, instance order or tree shape.
"""
import tilecert as tc
from tilecert import i32


@tc.kernel
def gemm_i32(A: tc.Tensor[i32, "M", "K"], B: tc.Tensor[i32, "K", "N"],
             C: tc.Tensor[i32, "M", "N"], bm: int = 3, bn: int = 5, bk: int = 7):
    M, K = A.shape
    N = B.shape[1]
    for nest in tc.parallel(tc.cdiv(M, bm), tc.cdiv(N, bn)):
        m0 = nest.index(0) * bm
        n0 = nest.index(1) * bn
        acc = tc.zeros(i32, (bm, bn))
        for k in nest.pipeline(tc.cdiv(K, bk), window=2, interval=1):
            k.stage("load")
            a = A.tile((m0, k.index() * bk), (bm, bk)).load()
            b = B.tile((k.index() * bk, n0), (bk, bn)).load()
            k.stage("compute")
            acc = tc.mma(a, b, acc)
        C.tile((m0, n0), (bm, bn)).store(acc)


def gemm_i32_blocked(tile: int = 8, depth: int = 4, **sizes: int) -> tc.Schedule:
    """An 11-op GPU schedule: output tiles on the grid, a 4 x 4 thread tile per block (one row of it
    unrolled), the A-tile load split over the block's threads (the checker's benchmark and tests)."""
    s = tc.schedule(gemm_i32, bm=tile, bn=tile, bk=depth, **sizes)
    s.bind("nest.0", "grid1")
    s.bind("nest.1", "grid0")
    s.tile(["acc.mma.p1", "acc.mma.p0"], [4, 4])
    s.bind("acc.mma.p1.o", "block1")
    s.bind("acc.mma.p0.o", "block0")
    s.unroll("acc.mma.p1.i")
    s.split("a.load.M", 4)
    s.bind("a.load.M.o", "block1")
    s.bind("a.load.K", "block0")
    s.bind("C.store.M", "block1")
    s.bind("C.store.N", "block0")
    return s
