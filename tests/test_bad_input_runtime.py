"""Hostile and careless input to the runtime: caller-owned memory, the build cache, the DSL and
the API, and resource bounds. Each battery asserts a typed error (with a hint) or a safe outcome."""
import math
import os
import stat
import subprocess
import warnings

import numpy as np
import pytest

import tilecert as tc
from tilecert import f32, i32
from tilecert.backends import cache
from tilecert.backends.c import build
from tilecert.backends.errors import CacheWarning
from tilecert.semantics.errors import InputError


@tc.kernel
def scale(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"]):
    N = X.shape[0]
    for p in tc.parallel(N):
        Y.tile((p.index(),), (1,)).store(X.tile((p.index(),), (1,)).load() * 2.0)


def raises_typed(exc_type: type, fn, *args, **kwargs) -> tc.TilecertError:
    with pytest.raises(exc_type) as info:
        fn(*args, **kwargs)
    assert info.value.hint
    return info.value


# ---------------------------------------------------------------------- memory the caller owns
def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def _memmap(tmp_path, mode: str) -> np.ndarray:
    path = tmp_path / "y.bin"
    np.zeros(8, np.float32).tofile(path)
    return np.memmap(path, dtype=np.float32, mode=mode, shape=(8,))


def _misaligned() -> np.ndarray:
    return np.frombuffer(bytearray(8 * 4 + 1), dtype=np.float32, count=8, offset=1)


OUTPUTS = {  # an array for the written tensor Y that native code must not be given in place
    "read-only array": lambda tmp: _readonly(np.zeros(8, np.float32)),
    "view of bytes": lambda tmp: np.frombuffer(bytes(32), dtype=np.float32),
    "read-only memmap": lambda tmp: _memmap(tmp, "r"),
    "big-endian": lambda tmp: np.zeros(8, ">f4"),
    "misaligned": lambda tmp: _misaligned(),
    "strided": lambda tmp: np.zeros(16, np.float32)[::2],
}
INPUTS = {  # an array for the read tensor X that native code must not be given at all
    "big-endian": lambda tmp: np.arange(8, dtype=">f4"),
    "misaligned": lambda tmp: _misaligned(),
    "a list": lambda tmp: [0.0] * 8,
    "bytes": lambda tmp: bytes(32),
}


@pytest.fixture(scope="module", params=["c", "cuda-host"])
def compiled(request):
    if request.param == "cuda-host" and build.shutil.which("g++") is None:
        pytest.skip("no g++")
    return tc.compile(scale, target=request.param, N=8)


@pytest.mark.parametrize("case", list(OUTPUTS))
def test_run_in_place_refuses_an_output_native_code_must_not_write(compiled, case, tmp_path):
    y = OUTPUTS[case](tmp_path)
    before = np.array(y, copy=True)
    err = raises_typed(InputError, compiled.run_in_place, X=np.ones(8, np.float32), Y=y)
    assert "Y" in err.message
    assert np.array_equal(np.asarray(y), before)  # nothing was written


@pytest.mark.parametrize("case", list(INPUTS))
def test_compiled_calls_refuse_an_input_native_code_must_not_read(compiled, case, tmp_path):
    for call in (compiled, compiled.run_in_place):
        err = raises_typed(InputError, call, X=INPUTS[case](tmp_path), Y=np.zeros(8, np.float32))
        assert "X" in err.message


def test_read_only_inputs_are_fine_and_calls_copy_read_only_outputs(compiled, tmp_path):
    x = _readonly(np.arange(8, dtype=np.float32))
    y = np.zeros(8, np.float32)
    compiled.run_in_place(X=x, Y=y)
    assert np.array_equal(y, 2 * np.arange(8))
    out = compiled(X=_memmap(tmp_path, "r"), Y=_readonly(np.zeros(8, np.float32)))["Y"]
    assert np.array_equal(out, np.zeros(8)) and out.flags.writeable


# ---------------------------------------------------------------------- the build cache
SOURCE = "int tc_answer(void) { return 42; }\n"


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("TILECERT_CACHE", str(root))
    return root


def _answer(path) -> int:
    import ctypes
    return ctypes.CDLL(str(path)).tc_answer()


def test_cache_folders_are_created_private(private_cache):
    binary = build.build(SOURCE, build.FLAGS, shared=True)
    for folder in (private_cache, private_cache / "c"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert binary.parent == private_cache / "c" and _answer(binary) == 42


def test_entries_are_keyed_by_exact_source_and_flags(private_cache):
    a = build.build(SOURCE, build.FLAGS, shared=True)
    assert build.build(SOURCE, build.FLAGS, shared=True) == a
    assert build.build(SOURCE + " ", build.FLAGS, shared=True) != a
    assert build.build(SOURCE, build.FLAGS + ("-DX",), shared=True) != a


def _entry(folder, binary):
    """The digest file of the entry ``binary`` belongs to."""
    return folder / (binary.name.split("-")[0] + ".so.sha256")


def test_a_truncated_entry_is_rebuilt(private_cache):
    binary = build.build(SOURCE, build.FLAGS, shared=True)
    data = binary.read_bytes()
    binary.write_bytes(data[: len(data) // 3])
    again = build.build(SOURCE, build.FLAGS, shared=True)
    assert again != binary and cache.digest(again) != cache.digest(binary) and _answer(again) == 42


def test_a_foreign_object_at_the_entry_is_never_loaded(private_cache):
    evil = "int tc_answer(void) { return 666; }\n"
    foreign = build.build(evil, build.FLAGS, shared=True)
    binary = build.build(SOURCE, build.FLAGS, shared=True)
    folder = binary.parent
    # plant the foreign library under every name the entry could use, and point nowhere valid
    binary.write_bytes(foreign.read_bytes())
    (folder / (binary.name.split("-")[0] + ".so")).write_bytes(foreign.read_bytes())
    again = build.build(SOURCE, build.FLAGS, shared=True)
    assert _answer(again) == 42
    _entry(folder, binary).write_text("not a digest")
    assert _answer(build.build(SOURCE, build.FLAGS, shared=True)) == 42


def test_a_tampered_source_in_the_folder_is_not_compiled(private_cache):
    binary = build.build(SOURCE, build.FLAGS, shared=True)
    folder = binary.parent
    for f in list(folder.iterdir()):
        if f.suffix in (".c",):
            f.write_text("int tc_answer(void) { return 666; }\n")
        elif f.name.endswith(".so") or f.name.endswith(".sha256"):
            f.unlink()
    assert _answer(build.build(SOURCE, build.FLAGS, shared=True)) == 42


def check_falls_back(root) -> None:
    with pytest.warns(CacheWarning, match="unusable"):
        binary = build.build(SOURCE, build.FLAGS, shared=True)
    assert not str(binary).startswith(str(root)) and _answer(binary) == 42
    assert stat.S_IMODE(binary.parent.stat().st_mode) == 0o700


def test_a_cache_root_that_is_a_file_falls_back_with_a_warning(tmp_path, monkeypatch):
    root = tmp_path / "file"
    root.write_text("x")
    monkeypatch.setenv("TILECERT_CACHE", str(root))
    check_falls_back(root)


def test_a_cache_under_a_file_falls_back_with_a_warning(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("TILECERT_CACHE", str(tmp_path / "file" / "cache"))
    check_falls_back(tmp_path / "file")


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702])
def test_a_shared_cache_folder_falls_back_with_a_warning(tmp_path, monkeypatch, mode):
    root = tmp_path / "shared"
    root.mkdir()
    root.chmod(mode)
    monkeypatch.setenv("TILECERT_CACHE", str(root))
    check_falls_back(root)


def test_a_cache_folder_owned_by_someone_else_falls_back(tmp_path, monkeypatch):
    if os.getuid() != 0:
        pytest.skip("changing a folder's owner needs root")
    root = tmp_path / "theirs"
    root.mkdir(mode=0o700)
    os.chown(root, 12345, 12345)
    monkeypatch.setenv("TILECERT_CACHE", str(root))
    check_falls_back(root)


def test_a_read_only_cache_folder_falls_back(tmp_path, monkeypatch):
    root = tmp_path / "ro"
    root.mkdir(mode=0o700)
    monkeypatch.setenv("TILECERT_CACHE", str(root))
    monkeypatch.setattr(cache.tempfile, "mkstemp", _read_only_mkstemp(root))
    check_falls_back(root)


def _read_only_mkstemp(root):
    real = cache.tempfile.mkstemp

    def mkstemp(*args, dir=None, **kwargs):
        if dir is not None and str(dir).startswith(str(root)):
            raise PermissionError(13, "Read-only file system")
        return real(*args, dir=dir, **kwargs)
    return mkstemp


CONCURRENT = r"""
import sys
from tilecert.backends.c import build
import ctypes
path = build.build("int tc_answer(void) { return 42; }\n", build.FLAGS, shared=True)
assert ctypes.CDLL(str(path)).tc_answer() == 42
"""


def test_concurrent_builders_of_one_entry_all_load_a_complete_object(private_cache):
    env = dict(os.environ, TILECERT_CACHE=str(private_cache))
    procs = [subprocess.Popen([os.sys.executable, "-c", CONCURRENT], env=env, stderr=subprocess.PIPE)
             for _ in range(4)]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read().decode()
    assert cache.lookup(private_cache / "c", next((private_cache / "c").glob("*.so.sha256")).name[:-7])


# ---------------------------------------------------------------------- the DSL and the API
THIS_FILE = os.path.abspath(__file__)

PROTOCOLS = {  # expression on the tile x (or the index N) -> a word the message or hint must contain
    "float(x)": "float", "int(x)": "int", "bool(x)": "truth", "len(x)": "len", "x[0]": "[]", "x[0] = 1": "[]",
    "list(x)": "iterable", "[v for v in x]": "iterable", "x @ x": "tc.matmul", "x ** 2": "**", "2 ** x": "**",
    "x << 1": "<<", "1 << x": "<<", "x >> 1": ">>", "x ^ x": "^", "divmod(x, 2)": "divmod", "round(x)": "round",
    "math.floor(x)": "floor", "math.ceil(x)": "ceil", "math.trunc(x)": "trunc", "complex(x)": "complex",
    "x in x": "in", "range(x)": "index", "reversed(x)": "reversed", "np.asarray(x)": "numpy",
    "np.exp(x)": "tc.exp", "np.log(x)": "tc.log", "np.sqrt(x)": "tc.sqrt", "np.tanh(x)": "tc.tanh",
    "np.abs(x)": "tc.abs", "np.maximum(x, x)": "tc.maximum", "np.fmin(x, x)": "tc.minimum",
    "np.sum(x)": "tc.reduce", "np.max(x)": "tc.reduce", "np.where(x > 0, x, x)": "tc.where",
    "np.reshape(x, (8,))": "tc.reshape", "np.matmul(x, x)": "tc.matmul", "np.sin(x)": "tile ops",
    "np.ones(8, np.float32) * x": "numpy arrays", "x.sum()": "sum", "float(N)": "Python number", "len(N)": "len",
    "N[0]": "[]", "N ** 2": "**", "N << 1": "<<", "list(N)": "iteration", "np.exp(N)": "tc.exp", "N @ N": "@",
}


def _protocol_kernel(expr: str):
    @tc.kernel
    def misuse(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"]):
        N = X.shape[0]
        x = X.tile((0,), (N,)).load()
        exec(expr, {"np": np, "math": math, "tc": tc}, {"x": x, "N": N})
        Y.tile((0,), (N,)).store(x)
    return misuse


@pytest.mark.parametrize("expr", list(PROTOCOLS))
def test_python_protocols_and_numpy_on_capture_values_raise_capture_errors(expr):
    err = raises_typed(tc.CaptureError, tc.run, _protocol_kernel(expr), X=np.ones(8, np.float32),
                       Y=np.zeros(8, np.float32))
    assert PROTOCOLS[expr] in err.message + " " + err.hint, err


def test_numpy_scalars_are_numbers_in_tile_arithmetic():
    @tc.kernel
    def affine(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"]):
        N = X.shape[0]
        x = X.tile((0,), (N,)).load()
        Y.tile((0,), (N,)).store(np.float32(2) * x + np.int64(1) - x * np.float64(0.5))
    x = np.arange(8, dtype=np.float32)
    assert np.array_equal(tc.run(affine, X=x, Y=np.zeros(8, np.float32))["Y"], 2 * x + 1 - x * 0.5)


def _capture_with(body: str):
    """A kernel whose body is ``body`` (with X, Y and N in scope)."""
    @tc.kernel
    def k(X: tc.Tensor[f32, "N"], Y: tc.Tensor[i32, "N"]):
        N = X.shape[0]
        exec(body, {"tc": tc, "i32": i32, "f32": f32, "np": np, "math": math}, {"X": X, "Y": Y, "N": N})
    return k


@pytest.mark.parametrize("body", [
    "X.dim(1)", "X.dim(-1)", "X.dim(1.0)", "X.dim('N')",
    "tc.full(i32, (N,), math.nan)", "tc.full(i32, (N,), math.inf)", "tc.full(i32, (N,), 0.5)",
    "tc.full(i32, (N,), 2 ** 70)", "tc.full(f32, (N,), 10 ** 400)", "tc.full(f32, (N,), 'x')",
    "tc.full(f32, (N,), None)", "tc.full(tc.bool_, (N,), 3)", "tc.full(i32, (N,), 1) + math.nan",
])
def test_bad_dsl_arguments_raise_typed_errors(body):
    err = raises_typed(tc.CaptureError, tc.run, _capture_with(body), X=np.ones(4, np.float32), Y=np.zeros(4, np.int32))
    assert err.loc.file == "<string>" or os.path.abspath(err.loc.file) == THIS_FILE


def test_a_kernel_with_a_stray_yield_is_refused_at_its_line():
    with pytest.raises(tc.CaptureError) as info:
        @tc.kernel
        def gen(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"]):
            Y.tile((0,), (4,)).store(X.tile((0,), (4,)).load())
            yield  # @L:yield
    assert info.value.hint and "yield" in info.value.message
    assert (os.path.abspath(info.value.loc.file), info.value.loc.line) == (THIS_FILE, _marked("yield"))


def test_async_kernels_are_refused():
    with pytest.raises(tc.CaptureError, match="coroutine"):
        @tc.kernel
        async def coro(X: tc.Tensor[f32, "N"]):
            X.tile((0,), (4,)).store(X.tile((0,), (4,)).load())


def test_double_decoration_classes_and_non_functions_are_refused_where_decorated():
    with pytest.raises(tc.CaptureError, match="already") as info:
        tc.kernel(scale)  # @L:twice
    assert (os.path.abspath(info.value.loc.file), info.value.loc.line) == (THIS_FILE, _marked("twice"))
    with pytest.raises(tc.CaptureError, match="class"):
        @tc.kernel
        class K:
            """A class is not a kernel."""
    for thing in (print, len, 3, "f", np.exp):
        raises_typed(tc.CaptureError, tc.kernel, thing)


def _marked(marker: str) -> int:
    """The line of this file that ends with the comment ``@L:marker``."""
    with open(THIS_FILE, encoding="utf-8") as f:
        return next(n for n, line in enumerate(f, 1) if line.rstrip().endswith(f"# @L:{marker}"))


def test_calling_a_kernel_directly_or_recursively_is_a_capture_error():
    with pytest.raises(tc.CaptureError) as info:
        scale(np.ones(8, np.float32), np.zeros(8, np.float32))  # @L:direct
    err = info.value
    assert "tc.run" in err.hint and (os.path.abspath(err.loc.file), err.loc.line) == (THIS_FILE, _marked("direct"))

    @tc.kernel
    def recursive(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"]):
        recursive(X=X, Y=Y)  # @L:recursive
    err = raises_typed(tc.CaptureError, tc.run, recursive, X=np.ones(8, np.float32), Y=np.zeros(8, np.float32))
    assert "recursion" in err.message
    assert (os.path.abspath(err.loc.file), err.loc.line) == (THIS_FILE, _marked("recursive"))

    def helper(n):
        return helper(n + 1)

    @tc.kernel
    def endless(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"]):
        helper(0)
    err = raises_typed(tc.CaptureError, tc.run, endless, X=np.ones(8, np.float32), Y=np.zeros(8, np.float32))
    assert "recursed" in err.message


def test_positional_arrays_are_refused_by_run_and_compiled_kernels(compiled):
    x, y = np.ones(8, np.float32), np.zeros(8, np.float32)
    raises_typed(InputError, tc.run, scale, x, y)
    raises_typed(InputError, compiled, x, y)
    raises_typed(InputError, compiled.run_in_place, x, Y=y)


BAD_SIZES = [2 ** 63, 2 ** 64 + 3, -1, True, False, 4.0, np.float32(4), "4", None, np.bool_(True)]


@pytest.mark.parametrize("value", BAD_SIZES, ids=repr)
def test_sizes_beyond_int64_bools_and_floats_are_refused_everywhere(value):
    raises_typed(InputError, tc.run, scale, X=np.ones(4, np.float32), Y=np.zeros(4, np.float32), N=value)
    raises_typed(tc.ScheduleError, tc.schedule, scale, N=value)
    raises_typed(InputError, tc.differential, scale, trials=1, sizes={"N": value})


def test_numpy_integer_sizes_are_sizes():
    assert tc.schedule(scale, N=np.int64(4)).sizes == {"N": 4}
    out = tc.run(scale, X=np.ones(4, np.float32), Y=np.zeros(4, np.float32), N=np.int32(4))["Y"]
    assert np.array_equal(out, 2 * np.ones(4))


@pytest.mark.parametrize("seed", [-1, 1.5, True, "0", None, 2 ** 64], ids=repr)
def test_seeds_that_are_not_non_negative_ints_are_refused(seed):
    args = dict(X=np.ones(4, np.float32), Y=np.zeros(4, np.float32))
    raises_typed(InputError, tc.run, scale, seed=seed, order="shuffle", **args)
    raises_typed(InputError, tc.schedule(scale, N=4).run, seed=seed, **args)
    raises_typed(InputError, tc.differential, scale, trials=1, seed=seed)


# ---------------------------------------------------------------------- resource bounds
def make_outer():
    """A fresh kernel (no interpreter cached for it) with an N x N f32 tile per parallel instance."""
    @tc.kernel
    def outer(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"]):
        N = X.shape[0]
        for p in tc.parallel(N):
            total = tc.reduce(tc.reduce(tc.zeros(f32, (N, N)), 1, "add"), 0, "add")
            Y.tile((p.index(),), (1,)).store(total + X.tile((p.index(),), (1,)).load())
    return outer


def test_an_allocation_beyond_the_bound_is_a_resource_error_before_numpy_tries(monkeypatch):
    from tilecert.semantics import limits
    x = np.ones(16, np.float32)
    assert np.array_equal(tc.run(make_outer(), X=x, Y=np.zeros(16, np.float32))["Y"], x)
    monkeypatch.setattr(limits, "MAX_BYTES", 16 * 16 * 4 - 1)
    err = raises_typed(tc.ResourceError, tc.run, make_outer(), X=x, Y=np.zeros(16, np.float32))
    assert "1,024 bytes" in err.message and "TILECERT_MAX_BYTES" in err.hint
    monkeypatch.setattr(limits, "MAX_BYTES", None)
    monkeypatch.setenv("TILECERT_MAX_BYTES", "1023")
    raises_typed(tc.ResourceError, tc.run, make_outer(), X=x, Y=np.zeros(16, np.float32))
    monkeypatch.setenv("TILECERT_MAX_BYTES", "lots")
    raises_typed(InputError, tc.run, make_outer(), X=x, Y=np.zeros(16, np.float32))


def test_a_terabyte_request_is_refused_by_the_default_bound():
    n = 2 ** 21  # an n x n f32 tile: 16 TiB
    err = raises_typed(tc.ResourceError, tc.run, make_outer(), X=np.ones(n, np.float32), Y=np.zeros(n, np.float32))
    assert "bound" in err.message


def test_the_differential_harness_bounds_its_random_inputs(monkeypatch):
    from tilecert.semantics import limits
    monkeypatch.setattr(limits, "MAX_BYTES", 64 * 8 - 1)
    raises_typed(tc.ResourceError, tc.differential, scale, trials=1, sizes={"N": 64})
