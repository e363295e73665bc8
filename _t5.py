import sys; sys.path.insert(0, "tests"); sys.path.insert(0, ".")
from test_cuda_backend import *
out = {"transpose": emit(transpose_schedule(), target="cuda"),
       "tree_reduction_ok": emit(cases.tree_reduction("ok"), target="cuda"),
       "warp_reduction_ok": emit(cases.warp_reduction("ok"), target="cuda"),
       "shadow_barrier": emit(shadow_barrier(), target="cuda"),
       "row_reverse": emit(row_reverse(), target="cuda"),
       "example_softmax": emit(example_schedule("softmax"), target="cuda"),
       "example_reduction_policy": emit(example_schedule("reduction_policy"), target="cuda")}
for k, s in out.items():
    open(f"/tmp/src_{k}.cu", "w").write(s)
print("done")
