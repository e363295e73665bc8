"""A 1-D elementwise kernel: ``Y = a * X + B`` (the classic axpy with a per-element shift).

Each parallel instance owns a block of ``bn`` elements. The block size does not divide
``N`` in general, so the last block hangs over the end of the vectors: its loads read 0
past ``N`` (``bounds="zero"``) and its store skips those cells, so nothing outside ``Y``
is written. ``a`` is a config value (a Python float fixed at capture).
"""
import tilecert as tc
from tilecert import f32


@tc.kernel
def elementwise(X: tc.Tensor[f32, "N"], B: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"], bn: int = 4, a: float = 2.5):
    N = X.shape[0]
    for nest in tc.parallel(tc.cdiv(N, bn)):
        n0 = nest.index() * bn
        x = X.tile((n0,), (bn,), bounds="zero").load()
        b = B.tile((n0,), (bn,), bounds="zero").load()
        Y.tile((n0,), (bn,), bounds="zero").store(a * x + b)
