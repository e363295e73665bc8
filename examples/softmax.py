"""Row softmax with one column block covering the whole row.

Each parallel instance owns ``bm`` rows and loads them as a single ``(bm, bc)`` tile,
so the kernel requires ``bc >= N`` (pass a larger ``bc`` for wider rows). The columns
past ``N`` are masked by the load's fallback ``-inf``: they do not change the row max and
contribute ``exp(-inf) = 0`` to the row sum, so no explicit mask is needed.
"""
import tilecert as tc
from tilecert import f32


@tc.kernel
def softmax(X: tc.Tensor[f32, "M", "N"], Y: tc.Tensor[f32, "M", "N"], bm: int = 4, bc: int = 16):
    M, N = X.shape
    for nest in tc.parallel(tc.cdiv(M, bm)):
        m0 = nest.index() * bm
        x = X.tile((m0, 0), (bm, bc)).load(fallback=float("-inf"))
        row_max = tc.reduce(x, "N", "max")
        e = tc.exp(x - row_max)
        y = e / tc.reduce(e, "N", "add")
        Y.tile((m0, 0), (bm, bc)).store(y)
