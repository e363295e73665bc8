"""A worked GPU schedule: the GEMM example tiled into 16 x 16 blocks of 16 x 16 threads.

Each output tile (one instance of the DSL's ``nest``) becomes a thread block (``grid1`` /
``grid0``); every tile op inside it runs with one thread per element of its 16 x 16 loop
nest (``block1`` / ``block0``); the K pipeline and the contraction stay serial per thread.
"""
import tilecert as tc

from .gemm import gemm


def gemm_gpu(n: int = 64) -> tc.Schedule:
    s = tc.schedule(gemm, M=n, N=n, K=n, bm=16, bn=16, bk=16)
    s.bind("nest.0", "grid1")  # one block per 16 x 16 output tile
    s.bind("nest.1", "grid0")
    for rows, cols in [("acc.full.p1", "acc.full.p0"), ("a.load.M", "a.load.K"), ("b.load.K", "b.load.N"),
                       ("acc.mma.p1", "acc.mma.p0"), ("C.store.M", "C.store.N")]:
        s.bind(rows, "block1")  # 16 x 16 threads per block
        s.bind(cols, "block0")
    return s
