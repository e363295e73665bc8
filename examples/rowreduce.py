"""Row sum, row max and row min of a matrix into three vectors.

Each parallel instance owns a block of ``bm`` rows and walks the columns in tiles of
``bn`` with a serial loop carrying three per-row accumulators. The column extent is
ragged: the last column tile hangs over the edge of ``A``. Out-of-bounds cells of a load
read the load's *fallback*, which must be the identity of the reduction it feeds: 0 for
the sum (the default), -inf for the max and +inf for the min. Rows past ``M`` are
computed but never stored (stores skip out-of-bounds cells under ``bounds="zero"``).
"""
import tilecert as tc
from tilecert import f32

INF = float("inf")


@tc.kernel
def rowreduce(A: tc.Tensor[f32, "M", "N"], S: tc.Tensor[f32, "M"], Mx: tc.Tensor[f32, "M"],
              Mn: tc.Tensor[f32, "M"], bm: int = 4, bn: int = 8):
    M, N = A.shape
    for nest in tc.parallel(tc.cdiv(M, bm)):
        m0 = nest.index() * bm
        # per-row accumulators share the dim "M" of A's rows, so reduce results broadcast onto them
        total = tc.zeros(f32, (bm,), dims=("M",))
        hi = tc.full(f32, (bm,), -INF, dims=("M",))
        lo = tc.full(f32, (bm,), INF, dims=("M",))
        for j in nest.serial(tc.cdiv(N, bn)):
            box = A.tile((m0, j.index() * bn), (bm, bn))
            total = total + tc.reduce(box.load(), "N", "add")
            hi = tc.maximum(hi, tc.reduce(box.load(fallback=-INF), "N", "max"))
            lo = tc.minimum(lo, tc.reduce(box.load(fallback=INF), "N", "min"))
        S.tile((m0,), (bm,)).store(total)
        Mx.tile((m0,), (bm,)).store(hi)
        Mn.tile((m0,), (bm,)).store(lo)
