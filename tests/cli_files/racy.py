import tilecert as tc
from tilecert import f32


@tc.kernel
def racy(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"]):
    for nest in tc.parallel(X.shape[0]):
        v = X.tile((nest.index(),), (1,)).load()
        Y.tile((0,), (1,)).store(v)
