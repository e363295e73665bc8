"""Not a tile program: ``acc`` is rebound inside a parallel nest, whose instances have no order; capturing
it raises the ``CaptureError`` README.md's "Errors" section shows (this file, line 12)."""
import tilecert as tc
from tilecert import f32


@tc.kernel
def running_sum(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"]):
    acc = tc.zeros(f32, ())
    N = X.shape[0]
    for p in tc.parallel(N):
        acc = acc + X.at(p.index()).load()
    Y.at(0).store(acc)
