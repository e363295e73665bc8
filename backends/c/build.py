"""Compile emitted C with the system compiler, cache the result, load it with ctypes.

The cache key is the scheduled program's structural digest (``semantics.serialize.digest``),
the sizes compiled in, the build flags, the compiler's identity and a digest of this
backend's own sources (a changed lowering never reuses a stale binary). Binaries live in
``$TILECERT_CACHE`` (default ``~/.cache/tilecert``) under ``c/``, beside their source; they
are written to a temporary name and renamed, so concurrent builds of one key are safe.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterable

from ..errors import BackendError, CompileError

FLAGS = ("-std=c99", "-O3", "-march=native", "-fopenmp", "-ffp-contract=off", "-fno-math-errno")
SANITIZE_FLAGS = ("-std=c99", "-O1", "-g", "-fopenmp", "-ffp-contract=off", "-fno-omit-frame-pointer",
                  "-fsanitize=address,undefined", "-fno-sanitize-recover=all")
COMPILE_TIMEOUT_S = 300


def cache_dir() -> Path:
    root = Path(os.environ.get("TILECERT_CACHE") or Path.home() / ".cache" / "tilecert")
    path = root / "c"
    path.mkdir(parents=True, exist_ok=True)
    return path


@functools.lru_cache(maxsize=None)
def compiler() -> tuple[str, str]:
    """The C compiler command (``$CC`` or ``cc``) and its version line."""
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        raise BackendError(f"no C compiler {cc!r} on PATH", hint="install gcc (with OpenMP) or set CC")
    out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=60)
    return cc, (out.stdout.splitlines() or ["unknown"])[0]


@functools.lru_cache(maxsize=None)
def code_version() -> str:
    """A digest of the lowering and C backend sources (part of every cache key)."""
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for folder in (here, here.parent.parent / "lowering"):
        for path in sorted(folder.glob("*.py")):
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def cache_key(digest: str, sizes: Iterable[tuple[str, int]], flags: Iterable[str], kind: str) -> str:
    h = hashlib.sha256()
    for part in (digest, repr(tuple(sizes)), repr(tuple(flags)), compiler()[1], code_version(), kind):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def build(source: str, key: str, flags: tuple[str, ...], shared: bool, command: str | None = None,
          suffix: str = ".c") -> Path:
    """The binary for ``source`` (built once per key): a shared library, or an executable.
    ``command`` is the compiler (default: the C compiler); ``suffix`` names the cached source."""
    folder = cache_dir()
    out = folder / (f"{key}.so" if shared else f"{key}.exe")
    if out.exists():
        return out
    src = folder / f"{key}{suffix}"
    if not src.exists():
        _atomic_write(src, source.encode())
    cc = command or compiler()[0]
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=key, suffix=".tmp")
    os.close(fd)
    cmd = [cc, *flags, *(("-fPIC", "-shared") if shared else ()), "-o", tmp, str(src), "-lm"]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.unlink(tmp)
        raise CompileError(f"{cc} took over {COMPILE_TIMEOUT_S} s on {src}",
                           hint="reduce unrolling, or compile a smaller schedule") from None
    if res.returncode != 0:
        os.unlink(tmp)
        tail = "\n".join(res.stderr.splitlines()[-12:])
        raise CompileError(f"{cc} failed on {src}:\n{tail}",
                           hint="this is a tilecert bug; please report it with the source file")
    os.replace(tmp, out)
    return out


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


_LOADED: dict[Path, ctypes.CDLL] = {}


def load(path: Path) -> ctypes.CDLL:
    """The shared library at ``path`` (loaded once per process)."""
    if path not in _LOADED:
        _LOADED[path] = ctypes.CDLL(str(path))
    return _LOADED[path]
