"""Every region kind in one kernel: the row softmax of a matrix product, ``Y = softmax(A @ B)``.

This is the score-normalization step of attention, written the way a flash-style kernel
computes it, so that every region has a job:

- ``parallel``: one instance per block of ``bm`` rows;
- ``pipeline`` (window 2) over the column tiles of the scores, carrying the running row
  max ``m`` and the running sum ``l`` of ``exp(score - m)`` (online softmax: when the max
  grows, the old sum is rescaled by ``exp(m_old - m_new)``); each raw score tile is
  stored to ``Y``;
- ``reduce`` inside the pipeline body: the score tile is ``sum_k A[:, k] @ B[k, :]`` over
  the K tiles, an ``mma`` accumulation that an implementation may split and combine
  as an ordered tree;
- ``serial`` after the pipeline: a second pass over the column tiles rewrites each stored
  score tile as ``exp(score - m) / l``.

Padding columns of the ragged last column tile would hold score 0; they are masked to
``-inf`` before they reach the max and the sum.
"""
import tilecert as tc
from tilecert import f32, i32

NEG_INF = float("-inf")


@tc.kernel
def all_regions(A: tc.Tensor[f32, "M", "K"], B: tc.Tensor[f32, "K", "N"], Y: tc.Tensor[f32, "M", "N"],
                bm: int = 4, bn: int = 4, bk: int = 4):
    M, K = A.shape
    N = B.shape[1]
    for rows in tc.parallel(tc.cdiv(M, bm)):
        m0 = rows.index() * bm
        m = tc.full(f32, (bm,), NEG_INF, dims=("M",))
        l = tc.zeros(f32, (bm,), dims=("M",))
        for col in rows.pipeline(tc.cdiv(N, bn), window=2):
            n0 = col.index() * bn
            col.stage("scores")
            acc = tc.zeros(f32, (bm, bn), dims=("M", "N"))
            for k in col.reduce(tc.cdiv(K, bk), policy="ordered_tree"):
                a = A.tile((m0, k.index() * bk), (bm, bk)).load()
                b = B.tile((k.index() * bk, n0), (bk, bn)).load()
                acc = tc.mma(a, b, acc)
            col.stage("online_softmax")
            Y.tile((m0, n0), (bm, bn)).store(acc)
            cols = n0 + tc.iota(i32, (bn,), dims=("N",))
            s = tc.where(cols < N, acc, NEG_INF)
            m_new = tc.maximum(m, tc.reduce(s, "N", "max"))
            l = l * tc.exp(m - m_new) + tc.reduce(tc.exp(s - m_new), "N", "add")
            m = m_new
        for col in rows.serial(tc.cdiv(N, bn)):
            box = Y.tile((m0, col.index() * bn), (bm, bn))
            box.store(tc.exp(box.load() - m) / l)
