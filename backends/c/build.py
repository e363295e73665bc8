"""Compile emitted C with the system compiler, cache the result, load it with ctypes.

Builds live in the private build cache (``backends.cache``, folder ``c/``), keyed by the
sha256 of the exact source, the flags, the kind of binary and the compiler's path and version
line, each beside its source; an entry is verified against its recorded sha256 before use, and
anything else is rebuilt.
"""
from __future__ import annotations

import ctypes
import functools
import os
import shutil
import subprocess
from pathlib import Path

from .. import cache
from ..errors import BackendError, CompileError

FLAGS = ("-std=c99", "-O3", "-march=native", "-fopenmp", "-ffp-contract=off", "-fno-math-errno")
SANITIZE_FLAGS = ("-std=c99", "-O1", "-g", "-fopenmp", "-ffp-contract=off", "-fno-omit-frame-pointer",
                  "-fsanitize=address,undefined", "-fno-sanitize-recover=all")
COMPILE_TIMEOUT_S = 300


@functools.lru_cache(maxsize=None)
def compiler() -> tuple[str, str]:
    """The C compiler command (``$CC`` or ``cc``) and its ``--version`` text."""
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        raise BackendError(f"no C compiler {cc!r} on PATH", hint="install gcc (with OpenMP) or set CC")
    return cc, _version(cc)


def build(source: str, flags: tuple[str, ...], shared: bool, command: str | None = None,
          suffix: str = ".c") -> Path:
    """The binary for ``source`` (built once per entry): a shared library, or an executable.

    ``command`` is the compiler (default: the C compiler); ``suffix`` names the kept source. The
    entry is ``cache.key(source, flags, kind, compiler path, compiler version)``; a verified entry
    is reused, anything else is rebuilt from ``source`` itself (never from a file in the folder)."""
    cc = command or compiler()[0]
    kind = "so" if shared else "exe"
    folder = cache.directory("c")
    name = f"{cache.key(source, chr(0).join(flags), kind, *identity(cc))}.{kind}"
    found = cache.lookup(folder, name)
    if found is not None:
        return found
    src = cache.scratch(folder, name, suffix, source.encode())
    tmp = cache.scratch(folder, name, ".tmp")
    cmd = [cc, *flags, *(("-fPIC", "-shared") if shared else ()), "-o", str(tmp), str(src), "-lm"]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        tmp.unlink()
        raise CompileError(f"{cc} took over {COMPILE_TIMEOUT_S} s on {src}",
                           hint="reduce unrolling, or compile a smaller schedule") from None
    if res.returncode != 0:
        tmp.unlink()
        tail = "\n".join(res.stderr.splitlines()[-12:])
        raise CompileError(f"{cc} failed on {src}:\n{tail}",
                           hint="this is a tilecert bug; please report it with the source file")
    binary = cache.publish(folder, name, tmp)
    os.replace(src, binary.with_suffix(suffix))  # the source beside its binary, for reports
    return binary


@functools.lru_cache(maxsize=None)
def _version(command: str) -> str:
    """What ``command --version`` prints (all of it: nvcc names its release on a later line)."""
    out = subprocess.run([command, "--version"], capture_output=True, text=True, timeout=60)
    return out.stdout.strip() or "unknown"


def identity(command: str) -> tuple[str, str]:
    """A compiler's identity in entry keys: its resolved path and its version line."""
    return os.path.realpath(shutil.which(command) or command), _version(command)


_LOADED: dict[Path, ctypes.CDLL] = {}


def load(path: Path) -> ctypes.CDLL:
    """The shared library at ``path`` (a published build; loaded once per process)."""
    if path not in _LOADED:
        try:
            _LOADED[path] = ctypes.CDLL(str(path))
        except OSError as e:
            raise BackendError(f"cannot load the compiled kernel {path}: {e}",
                               hint="remove the build cache folder (TILECERT_CACHE) and compile again") from None
    return _LOADED[path]
