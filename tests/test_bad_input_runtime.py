"""Hostile and careless input to the runtime: caller-owned memory, the build cache, the DSL and
the API, and resource bounds. Each battery asserts a typed error (with a hint) or a safe outcome."""
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


def _fallback(root) -> None:
    with pytest.warns(CacheWarning, match="unusable"):
        binary = build.build(SOURCE, build.FLAGS, shared=True)
    assert not str(binary).startswith(str(root)) and _answer(binary) == 42
    assert stat.S_IMODE(binary.parent.stat().st_mode) == 0o700


def test_a_cache_root_that_is_a_file_falls_back_with_a_warning(tmp_path, monkeypatch):
    root = tmp_path / "file"
    root.write_text("x")
    monkeypatch.setenv("TILECERT_CACHE", str(root))
    _fallback(root)


def test_a_cache_under_a_file_falls_back_with_a_warning(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("TILECERT_CACHE", str(tmp_path / "file" / "cache"))
    _fallback(tmp_path / "file")


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702])
def test_a_shared_cache_folder_falls_back_with_a_warning(tmp_path, monkeypatch, mode):
    root = tmp_path / "shared"
    root.mkdir()
    root.chmod(mode)
    monkeypatch.setenv("TILECERT_CACHE", str(root))
    _fallback(root)


def test_a_cache_folder_owned_by_someone_else_falls_back(tmp_path, monkeypatch):
    if os.getuid() != 0:
        pytest.skip("changing a folder's owner needs root")
    root = tmp_path / "theirs"
    root.mkdir(mode=0o700)
    os.chown(root, 12345, 12345)
    monkeypatch.setenv("TILECERT_CACHE", str(root))
    _fallback(root)


def test_a_read_only_cache_folder_falls_back(tmp_path, monkeypatch):
    root = tmp_path / "ro"
    root.mkdir(mode=0o700)
    monkeypatch.setenv("TILECERT_CACHE", str(root))
    monkeypatch.setattr(cache.tempfile, "mkstemp", _read_only_mkstemp(root))
    _fallback(root)


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
