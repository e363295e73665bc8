"""The example kernels against independent numpy references, and the IR utilities on them.

For every example of ``examples.EXAMPLES``: the interpreter's output matches a float64
numpy reference (exactly for integer kernels) in checked and unchecked mode, under the
canonical and the reverse instance order, for sizes that are ragged with respect to the
tile factors (including sizes smaller than one tile); JSON round trips preserve the
program; the structural digest ignores names but sees structure; and the printed IR
shows each region's kind, domain and policy.
"""
import os
import re

import numpy as np
import pytest

import examples
import tilecert as tc
from examples import EXAMPLES, expected, output_names
from tilecert import f32, i32

NAMES = sorted(EXAMPLES)

# Size variants per example (on top of the defaults of its make_inputs). Each list has a
# variant smaller than one tile in every dim, one ragged in every dim, and one that the
# tile factors divide exactly. Tile factors are the kernels' config defaults.
SIZES = {
    # bm=3, bn=5, bk=7
    "gemm": [dict(M=2, K=3, N=4), dict(M=7, K=15, N=6), dict(M=6, K=14, N=10), dict(M=1, K=1, N=1)],
    "gemm_i32": [dict(M=2, K=3, N=4), dict(M=7, K=15, N=6), dict(M=6, K=14, N=10), dict(M=1, K=1, N=1)],
    # no tiles: one scalar accumulator per output cell
    "gemm_scalar": [dict(M=2, K=3, N=4), dict(M=7, K=15, N=6), dict(M=1, K=1, N=1), dict(M=3, K=0, N=2)],
    # bm=4, bn=8
    "rowreduce": [dict(M=3, N=5), dict(M=5, N=17), dict(M=8, N=16), dict(M=1, N=1)],
    # bm=4; make_inputs widens bc to cover N
    "softmax": [dict(M=3, N=5), dict(M=5, N=37), dict(M=8, N=16), dict(M=1, N=1)],
    "layernorm": [dict(M=3, N=5), dict(M=5, N=17), dict(M=8, N=16), dict(M=1, N=2)],
    "rmsnorm": [dict(M=3, N=5), dict(M=5, N=17), dict(M=8, N=16), dict(M=1, N=1)],
    # bm=4, bn=3
    "transpose": [dict(M=2, N=2), dict(M=5, N=7), dict(M=8, N=9), dict(M=1, N=5)],
    # bh=bw=4; the filter may be even-sized or larger than the image
    "conv2d": [dict(H=2, W=3, R=3, S=5), dict(H=7, W=6, R=2, S=4), dict(H=8, W=8, R=1, S=1),
               dict(H=5, W=9, R=5, S=3)],
    # bm=bn=bk=4
    "all_regions": [dict(M=2, K=3, N=1), dict(M=5, K=9, N=13), dict(M=8, K=8, N=8), dict(M=3, K=1, N=6)],
    "reduction_policy": [dict(N=1), dict(N=17), dict(N=64), dict(N=0)],
    # bn=4
    "elementwise": [dict(N=3), dict(N=13), dict(N=16), dict(N=1)],
    # bh=4, bw=3
    "stencil": [dict(H=2, W=2), dict(H=7, W=8), dict(H=8, W=9), dict(H=1, W=5)],
}
VARIANTS = [(name, i) for name in NAMES for i in range(1 + len(SIZES[name]))]  # i = 0: the defaults


def variant_inputs(name, i, seed=0):
    entry = EXAMPLES[name]
    rng = np.random.default_rng(1000 * seed + i)
    return entry.make_inputs(rng) if i == 0 else entry.make_inputs(rng, **SIZES[name][i - 1])


def assert_matches(entry, inputs, out, what=""):
    for name, ref in expected(entry, inputs).items():
        got = out[name]
        assert got.shape == ref.shape, f"{what} {name}: shape {got.shape} != {ref.shape}"
        assert got.dtype == inputs[name].dtype, f"{what} {name}: dtype {got.dtype}"
        if entry.exact:
            np.testing.assert_array_equal(got.astype(np.float64), ref, err_msg=f"{what} {name}")
        else:
            scale = max(1.0, float(np.abs(ref).max())) if ref.size else 1.0
            np.testing.assert_allclose(got.astype(np.float64), ref, rtol=1e-5, atol=1e-5 * scale,
                                       err_msg=f"{what} {name}")


def split_config(entry, inputs):
    """(config, arrays): the config values make_inputs chose and the tensors."""
    cfg = {k: v for k, v in inputs.items() if k in entry.kernel.config_defaults}
    arrays = {k: v for k, v in inputs.items() if k not in cfg}
    return cfg, arrays


# ---------------------------------------------------------------------------- the registry


def test_registry_covers_every_example_module():
    here = os.path.dirname(examples.__file__)
    modules = {f[:-3] for f in os.listdir(here) if f.endswith(".py") and f != "__init__.py"}
    assert examples.SCHEDULE_MODULES <= modules
    modules -= examples.SCHEDULE_MODULES
    assert modules == set(EXAMPLES)
    for name in modules:
        mod = __import__(f"examples.{name}", fromlist=["_"])
        assert mod.__doc__ and len(mod.__doc__.strip()) > 40, f"examples/{name}.py needs a module docstring"
        assert getattr(mod, name) is EXAMPLES[name].kernel


def test_registry_entries_are_five_tuples():
    for name, entry in EXAMPLES.items():
        kernel, make_inputs, reference, output, exact = entry
        assert isinstance(kernel, tc.Kernel) and kernel.name == name
        assert isinstance(exact, bool)
        inputs = make_inputs(np.random.default_rng(0))
        p = tc.capture(kernel, **split_config(entry, inputs)[0])
        assert set(output_names(entry)) <= set(p.outputs), name
        assert set(expected(entry, inputs)) == set(output_names(entry))


# ---------------------------------------------------------------------------- outputs vs numpy


@pytest.mark.parametrize("checked", [True, False], ids=["checked", "unchecked"])
@pytest.mark.parametrize("name,variant", VARIANTS, ids=[f"{n}-{i}" for n, i in VARIANTS])
def test_matches_numpy_reference(name, variant, checked):
    entry = EXAMPLES[name]
    inputs = variant_inputs(name, variant)
    originals = {k: v.copy() for k, v in inputs.items() if isinstance(v, np.ndarray)}
    for order in ("canonical", "reverse"):
        out = tc.run(entry.kernel, checked=checked, order=order, **inputs)
        assert_matches(entry, inputs, out, f"{name} sizes#{variant} checked={checked} order={order}")
    for k, v in originals.items():  # tc.run works on copies
        np.testing.assert_array_equal(inputs[k], v)


@pytest.mark.parametrize("name", NAMES)
def test_adversarial_trees_and_shuffled_orders(name):
    """Random tree shapes for every tree-policy reduction and random instance orders."""
    entry = EXAMPLES[name]
    inputs = variant_inputs(name, 2)
    for seed in range(3):
        out = tc.run(entry.kernel, order="shuffle", reduce_mode="adversarial", seed=seed, checked=seed == 0,
                     **inputs)
        assert_matches(entry, inputs, out, f"{name} adversarial seed={seed}")


def test_reduction_policy_folds():
    entry = EXAMPLES["reduction_policy"]
    inputs = entry.make_inputs(np.random.default_rng(0))
    np.testing.assert_array_equal(inputs["X"], [1, 2, 3])
    for checked in (True, False):
        for mode in ("canonical", "adversarial"):
            out = tc.run(entry.kernel, checked=checked, reduce_mode=mode, **inputs)["Out"]
            assert out.tolist() == [-6, 2, 6, 6], (checked, mode)


def test_fallbacks_are_the_reduction_identities():
    """All-negative rows: a max padded with 0 (the default fallback) would report 0."""
    entry = EXAMPLES["rowreduce"]
    inputs = entry.make_inputs(np.random.default_rng(3), M=5, N=11)
    inputs["A"] = -np.abs(inputs["A"]) - 1
    inputs["A"][1] = np.abs(inputs["A"][1]) + 1  # and an all-positive row for the min
    out = tc.run(entry.kernel, **inputs)
    assert (out["Mx"] < 0).sum() == 4 and out["Mn"][1] > 0
    assert_matches(entry, inputs, out)


def test_softmax_ignores_the_padding_columns():
    entry = EXAMPLES["softmax"]
    inputs = entry.make_inputs(np.random.default_rng(4), M=6, N=5)
    assert inputs["bc"] > 5
    y = tc.run(entry.kernel, **inputs)["Y"]
    np.testing.assert_allclose(y.sum(axis=1), 1.0, rtol=1e-6)


def test_conv2d_negative_origins_read_zero_padding():
    """A one-hot filter tap shifts the image; cells shifted in from outside are 0."""
    entry = EXAMPLES["conv2d"]
    x = np.arange(1, 1 + 6 * 7, dtype=np.float32).reshape(6, 7)
    f = np.zeros((3, 3), np.float32)
    f[0, 0] = 1.0  # Y[i, j] = X[i - 1, j - 1]
    y = tc.run(entry.kernel, X=x, F=f, Y=np.zeros_like(x))["Y"]
    assert (y[0, :] == 0).all() and (y[:, 0] == 0).all()
    np.testing.assert_array_equal(y[1:, 1:], x[:-1, :-1])


# ---------------------------------------------------------------------------- JSON round trip


@pytest.mark.parametrize("name", NAMES)
def test_json_round_trip(name):
    entry = EXAMPLES[name]
    inputs = variant_inputs(name, 1)
    cfg, arrays = split_config(entry, inputs)
    for p in {id(q): q for q in (tc.capture(entry.kernel), tc.capture(entry.kernel, **cfg))}.values():
        text = tc.dump(p)
        q = tc.load(text)
        assert q == p
        assert tc.dump(q) == text
        assert tc.digest(q) == tc.digest(p)
    # the loaded program is runnable and means the same
    q = tc.load(tc.dump(tc.capture(entry.kernel, **cfg)))
    assert_matches(entry, inputs, tc.run(q, **arrays), f"{name} loaded")


# ---------------------------------------------------------------------------- digest


@tc.kernel
def renamed_gemm(P: tc.Tensor[f32, "rows", "depth"], Q: tc.Tensor[f32, "depth", "cols"],
                 R: tc.Tensor[f32, "rows", "cols"], tile_r: int = 3, tile_c: int = 5, tile_d: int = 7):
    nr, nd = P.shape
    nc = Q.shape[1]
    for blk in tc.parallel(tc.cdiv(nr, tile_r), tc.cdiv(nc, tile_c)):
        r0 = blk.index(0) * tile_r
        c0 = blk.index(1) * tile_c
        total = tc.zeros(f32, (tile_r, tile_c))
        for step in blk.pipeline(tc.cdiv(nd, tile_d), window=2, interval=1):
            step.stage("fetch")
            lhs = P.tile((r0, step.index() * tile_d), (tile_r, tile_d)).load()
            rhs = Q.tile((step.index() * tile_d, c0), (tile_d, tile_c)).load()
            step.stage("math")
            total = tc.mma(lhs, rhs, total)
        R.tile((r0, c0), (tile_r, tile_c)).store(total)


@tc.kernel
def gemm_add_matmul(A: tc.Tensor[f32, "M", "K"], B: tc.Tensor[f32, "K", "N"],
                    C: tc.Tensor[f32, "M", "N"], bm: int = 3, bn: int = 5, bk: int = 7):
    """gemm with ``acc = acc + matmul(a, b)`` instead of ``mma``: the same values, other ops."""
    M, K = A.shape
    N = B.shape[1]
    for nest in tc.parallel(tc.cdiv(M, bm), tc.cdiv(N, bn)):
        m0 = nest.index(0) * bm
        n0 = nest.index(1) * bn
        acc = tc.zeros(f32, (bm, bn))
        for k in nest.pipeline(tc.cdiv(K, bk), window=2, interval=1):
            k.stage("load")
            a = A.tile((m0, k.index() * bk), (bm, bk)).load()
            b = B.tile((k.index() * bk, n0), (bk, bn)).load()
            k.stage("compute")
            acc = acc + tc.matmul(a, b)
        C.tile((m0, n0), (bm, bn)).store(acc)


@tc.kernel
def gemm_window3(A: tc.Tensor[f32, "M", "K"], B: tc.Tensor[f32, "K", "N"],
                 C: tc.Tensor[f32, "M", "N"], bm: int = 3, bn: int = 5, bk: int = 7):
    M, K = A.shape
    N = B.shape[1]
    for nest in tc.parallel(tc.cdiv(M, bm), tc.cdiv(N, bn)):
        m0 = nest.index(0) * bm
        n0 = nest.index(1) * bn
        acc = tc.zeros(f32, (bm, bn))
        for k in nest.pipeline(tc.cdiv(K, bk), window=3, interval=1):
            k.stage("load")
            a = A.tile((m0, k.index() * bk), (bm, bk)).load()
            b = B.tile((k.index() * bk, n0), (bk, bn)).load()
            k.stage("compute")
            acc = tc.mma(a, b, acc)
        C.tile((m0, n0), (bm, bn)).store(acc)


@tc.kernel
def softmax_of_product(P: tc.Tensor[f32, "r", "d"], Q: tc.Tensor[f32, "d", "c"], Z: tc.Tensor[f32, "r", "c"],
                       tr: int = 4, tcols: int = 4, td: int = 4):
    nr, nd = P.shape
    nc = Q.shape[1]
    for blk in tc.parallel(tc.cdiv(nr, tr)):
        r0 = blk.index() * tr
        run_max = tc.full(f32, (tr,), float("-inf"), dims=("r",))
        run_sum = tc.zeros(f32, (tr,), dims=("r",))
        for j in blk.pipeline(tc.cdiv(nc, tcols), window=2):
            c0 = j.index() * tcols
            j.stage("s0")
            z = tc.zeros(f32, (tr, tcols), dims=("r", "c"))
            for step in j.reduce(tc.cdiv(nd, td), policy="ordered_tree"):
                lhs = P.tile((r0, step.index() * td), (tr, td)).load()
                rhs = Q.tile((step.index() * td, c0), (td, tcols)).load()
                z = tc.mma(lhs, rhs, z)
            j.stage("s1")
            Z.tile((r0, c0), (tr, tcols)).store(z)
            idx = c0 + tc.iota(i32, (tcols,), dims=("c",))
            masked = tc.where(idx < nc, z, float("-inf"))
            new_max = tc.maximum(run_max, tc.reduce(masked, "c", "max"))
            run_sum = run_sum * tc.exp(run_max - new_max) + tc.reduce(tc.exp(masked - new_max), "c", "add")
            run_max = new_max
        for j in blk.serial(tc.cdiv(nc, tcols)):
            view = Z.tile((r0, j.index() * tcols), (tr, tcols))
            view.store(tc.exp(view.load() - run_max) / run_sum)


@tc.kernel
def folds_renamed(V: tc.Tensor[i32, "len"], W: tc.Tensor[i32, "four"]):
    n = V.shape[0]
    left = tc.full(i32, (), 0)
    for it in tc.reduction(n, policy="fold_left"):
        left = left - V.at(it.index()).load()
    W.at(0).store(left)
    right = tc.full(i32, (), 0)
    for it in tc.reduction(n, policy="fold_right"):
        right = V.at(it.index()).load() - right
    W.at(1).store(right)
    tree = tc.full(i32, (), 0)
    for it in tc.reduction(n, policy="ordered_tree"):
        tree = tree + V.at(it.index()).load()
    W.at(2).store(tree)
    W.at(3).store(tc.reduce(V.tile((0,), (n,)).load(), 0, "add", policy="unordered_tree"))


@tc.kernel
def folds_both_left(V: tc.Tensor[i32, "len"], W: tc.Tensor[i32, "four"]):
    """folds_renamed with the second fold's policy changed to fold_left."""
    n = V.shape[0]
    left = tc.full(i32, (), 0)
    for it in tc.reduction(n, policy="fold_left"):
        left = left - V.at(it.index()).load()
    W.at(0).store(left)
    right = tc.full(i32, (), 0)
    for it in tc.reduction(n, policy="fold_left"):
        right = V.at(it.index()).load() - right
    W.at(1).store(right)
    tree = tc.full(i32, (), 0)
    for it in tc.reduction(n, policy="ordered_tree"):
        tree = tree + V.at(it.index()).load()
    W.at(2).store(tree)
    W.at(3).store(tc.reduce(V.tile((0,), (n,)).load(), 0, "add", policy="unordered_tree"))


def test_digest_ignores_renaming():
    pairs = [("gemm", renamed_gemm), ("all_regions", softmax_of_product), ("reduction_policy", folds_renamed)]
    for name, twin in pairs:
        p, q = tc.capture(EXAMPLES[name].kernel), tc.capture(twin)
        assert p != q and p.name != q.name  # really written differently ...
        assert tc.digest(p) == tc.digest(q), name  # ... with the same structure
    # the renamed twins also compute the same thing
    inputs = EXAMPLES["gemm"].make_inputs(np.random.default_rng(5))
    out = tc.run(renamed_gemm, P=inputs["A"], Q=inputs["B"], R=inputs["C"])["R"]
    np.testing.assert_array_equal(out, tc.run(EXAMPLES["gemm"].kernel, **inputs)["C"])


def test_digest_sees_structural_changes():
    base = tc.digest(tc.capture(EXAMPLES["gemm"].kernel))
    changed = {
        "tile size bk=8": tc.capture(EXAMPLES["gemm"].kernel, bk=8),
        "tile size bm=4": tc.capture(EXAMPLES["gemm"].kernel, bm=4),
        "add+matmul instead of mma": tc.capture(gemm_add_matmul),
        "pipeline window 3": tc.capture(gemm_window3),
        "i32 instead of f32": tc.capture(EXAMPLES["gemm_i32"].kernel),
    }
    for what, p in changed.items():
        assert tc.digest(p) != base, what
    assert tc.digest(tc.capture(folds_both_left)) != tc.digest(tc.capture(folds_renamed))
    # the same config under another spelling of the call is the same program
    assert tc.digest(tc.capture(EXAMPLES["gemm"].kernel, bk=7)) == base


def test_digests_of_the_examples_are_distinct():
    digests = {tc.digest(tc.capture(e.kernel)) for e in EXAMPLES.values()}
    assert len(digests) == len(EXAMPLES)


# ---------------------------------------------------------------------------- printed IR


def region_lines(text):
    """(depth, kind, rest) of each region header line of a formatted program."""
    out = []
    for line in text.splitlines()[1:]:
        m = re.match(r"^( *)(parallel|serial|pipeline|reduce) \S+ (.*):$", line)
        if m:
            out.append((len(m.group(1)) // 2, m.group(2), m.group(3)))
    return out


def test_printed_ir_all_regions_tree():
    text = tc.format_program(tc.capture(EXAMPLES["all_regions"].kernel))
    assert text.startswith("kernel all_regions(A: f32[M, K], B: f32[K, N], Y: f32[M, N] out)")
    regions = region_lines(text)
    assert [(d, k) for d, k, _ in regions] == [(1, "parallel"), (2, "pipeline"), (3, "reduce"), (2, "serial")]
    assert regions[0][2] == "[((M + 3) // 4)]"
    assert regions[1][2].startswith("[((N + 3) // 4)] window=2 interval=1 carry(")
    assert regions[2][2].startswith("[((K + 3) // 4)] policy=ordered_tree carry(")
    assert regions[3][2] == "[((N + 3) // 4)]"
    assert "stage 0 'scores'" in text and "stage 1 'online_softmax'" in text
    assert "mma" in text and "reduce.max" in text and "select" in text


def test_printed_ir_policies_and_domains():
    fmt = {name: tc.format_program(tc.capture(e.kernel)) for name, e in EXAMPLES.items()}
    rp = fmt["reduction_policy"]
    for policy in ("fold_left", "fold_right", "ordered_tree"):
        assert re.search(rf"^  reduce \w+ \[N\] policy={policy} carry\(", rp, re.M), policy
    assert "reduce.add" in rp and "policy=unordered_tree" in rp
    assert [k for _, k, _ in region_lines(rp)] == ["reduce"] * 3

    g = fmt["gemm"]
    assert "parallel nest [((M + 2) // 3), ((N + 4) // 5)]:" in g
    assert "pipeline k [((K + 6) // 7)] window=2 interval=1" in g
    assert "stage 0 'load'" in g and "stage 1 'compute'" in g and "config bk=7 bm=3 bn=5" in g
    assert "window=2" in fmt["rmsnorm"] and "stage 1 'accumulate'" in fmt["rmsnorm"]
    assert "window=3" in tc.format_program(tc.capture(gemm_window3))

    assert "reduce tap [R, S] policy=unordered_tree" in fmt["conv2d"]
    assert "(R // 2)" in fmt["conv2d"] and "bounds=zero" in fmt["conv2d"]
    assert [k for _, k, _ in region_lines(fmt["layernorm"])] == ["parallel", "reduce", "reduce", "serial"]
    assert fmt["layernorm"].count("policy=ordered_tree carry(") == 2
    assert [k for _, k, _ in region_lines(fmt["rowreduce"])] == ["parallel", "serial"]
    assert fmt["rowreduce"].count("fallback=%") == 2
    assert "reduce.max" in fmt["rowreduce"] and "reduce.min" in fmt["rowreduce"]
    assert "fallback=%" in fmt["softmax"] and "full -inf" in fmt["softmax"]
    # the transpose stores the (M, N) tile into the (N, M) box of B
    assert re.search(r"%a = load A\[.*\] box \[4, 3\].* f32\[M=4, N=3\]", fmt["transpose"])
    assert "store B[(nest.1 * 3), (nest.0 * 4)] box [3, 4] <- %a" in fmt["transpose"]


# ---------------------------------------------------------------------------- patterns the examples rely on


@tc.kernel
def sibling_loops_reuse_names(A: tc.Tensor[f32, "N"], B: tc.Tensor[f32, "N"], C: tc.Tensor[f32, "N"]):
    N = A.shape[0]
    for p in tc.parallel(tc.cdiv(N, 4)):
        x = A.tile((p.index() * 4,), (4,)).load()
        B.tile((p.index() * 4,), (4,)).store(x)
    for p in tc.parallel(1):
        for j in p.serial(tc.cdiv(N, 4)):
            x = A.tile((j.index() * 4,), (4,)).load()
            C.tile((j.index() * 4,), (4,)).store(x)
        for j in p.serial(tc.cdiv(N, 4)):
            x = C.tile((j.index() * 4,), (4,)).load()
            C.tile((j.index() * 4,), (4,)).store(x * 2.0)


@tc.kernel
def stale_value_read_in_next_loop(A: tc.Tensor[f32, "N"]):
    for p in tc.parallel(1):
        for j in p.serial(2):
            x = A.tile((j.index() * 4,), (4,)).load()
        for j in p.serial(2):
            x = x + 1.0
        A.tile((0,), (4,)).store(x)


def test_sibling_loops_may_reuse_a_temporary_name():
    a = np.arange(7, dtype=np.float32)
    z = np.zeros_like(a)
    out = tc.run(sibling_loops_reuse_names, A=a, B=z, C=z)
    np.testing.assert_array_equal(out["B"], a)
    np.testing.assert_array_equal(out["C"], 2 * a)
    with pytest.raises(tc.CaptureError, match="region that has closed"):
        tc.capture(stale_value_read_in_next_loop)
