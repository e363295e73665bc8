"""Build CUDA sources: nvcc for a GPU, g++ against the host emulation header, nvcc checks for sm_90.

Executables are ``source + standalone_main`` (the C backend's file protocol), built once per
key in the C backend's cache (``backends.c.build``). The key covers the scheduled program's
digest, the bound sizes, the flags, the compiler's version and a digest of the lowering, the
C backend's emitter and this backend's sources (the emulation header included).

- ``cuda-host``: ``g++ -std=c++20 -O1 -pthread -include tc_cuda_emu.h -x c++``; with
  ``sanitize`` ThreadSanitizer and UndefinedBehaviorSanitizer (``-O1 -g``). The header is
  included from a copy in the cache beside its precompiled form for those flags (built once;
  g++ parses the header itself when the precompiled one does not fit).
- ``cuda``: ``nvcc -O2 -arch=native -x cu`` (the GPU of this machine).
- ``nvcc_check(source)``: ``nvcc -arch=sm_90 -c -keep``, which writes the PTX and the object
  of the source; returns the PTX (cached by the source's digest).
"""
from __future__ import annotations

import functools
import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterable

from ..c import build as cbuild
from ..errors import CompileError
from .errors import NoDevice

HERE = Path(__file__).resolve().parent
HEADER = HERE / "tc_cuda_emu.h"
EMULATION_FLAGS = ("-std=c++20", "-O1", "-pthread")
# ThreadSanitizer alone: combined with UBSan, UBSan's own memory probes (pipe() in
# IsAccessibleMemoryRange) race inside the sanitizer runtimes and give false reports.
TSAN_FLAGS = ("-std=c++20", "-O1", "-g", "-fno-omit-frame-pointer", "-pthread", "-fsanitize=thread")
GPU_FLAGS = ("-O2", "-arch=native", "-lineinfo", "-x", "cu")
CHECK_ARCH = "sm_90"


@functools.lru_cache(maxsize=None)
def tool(name: str) -> tuple[str, str]:
    """The path and version line of ``g++`` or ``nvcc`` (``NoDevice`` when it is missing)."""
    path = shutil.which(name)
    if path is None:
        raise NoDevice(f"{name} is not on PATH",
                       hint="install g++ (C++20) for target 'cuda-host', the CUDA toolkit for target 'cuda'")
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    return path, (lines[-1] if name == "nvcc" else lines[0]) if lines else "unknown"


@functools.lru_cache(maxsize=None)
def gpu_present() -> bool:
    """Whether this machine has a CUDA GPU (``nvidia-smi -L`` lists one)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
    return out.returncode == 0 and "GPU" in out.stdout


@functools.lru_cache(maxsize=None)
def code_version() -> str:
    """A digest of the sources that decide what is emitted and how it is built."""
    h = hashlib.sha256(cbuild.code_version().encode())
    for path in sorted(HERE.glob("*.py")) + [HEADER]:
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def cache_key(digest: str, sizes: Iterable[tuple[str, int]], flags: Iterable[str], compiler: str) -> str:
    h = hashlib.sha256()
    for part in (digest, repr(tuple(sizes)), repr(tuple(flags)), tool(compiler)[1], code_version(), "cuda"):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def precompiled_header(flags: tuple[str, ...]) -> Path:
    """The emulation header, copied into the cache beside its precompiled form for ``flags``."""
    key = hashlib.sha256("\0".join((*flags, tool("g++")[1], code_version())).encode()).hexdigest()[:24]
    folder = cbuild.cache_dir() / f"emu-{key}"
    header = folder / HEADER.name
    if header.exists():
        return header
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        staged = Path(tmp) / HEADER.name
        staged.write_bytes(HEADER.read_bytes())
        res = subprocess.run([tool("g++")[0], *flags, "-x", "c++-header", str(staged), "-o", f"{staged}.gch"],
                             capture_output=True, text=True, timeout=cbuild.COMPILE_TIMEOUT_S)
        if res.returncode != 0:
            raise CompileError(f"g++ cannot compile the emulation header:\n{res.stderr[-2000:]}",
                               hint="the host emulation needs g++ with C++20 (std::atomic_ref)")
        Path(f"{staged}.gch").replace(f"{header}.gch")
        staged.replace(header)  # last: its presence means the pair is complete
    return header


def build_executable(source: str, digest: str, sizes: Iterable[tuple[str, int]], target: str,
                     sanitize: bool) -> Path:
    """The cached executable of ``source`` (with its ``main``) for ``cuda-host`` or ``cuda``."""
    if target == "cuda":
        if not gpu_present():
            raise NoDevice("target 'cuda' needs a CUDA GPU and this machine has none",
                           hint="run the same source on the CPU with target='cuda-host', or write a suite for a GPU "
                                "machine with `tilecert gpu-suite DIR`")
        compiler, flags = "nvcc", GPU_FLAGS
    else:
        compiler, base = "g++", TSAN_FLAGS if sanitize else EMULATION_FLAGS
        flags = base + ("-include", str(precompiled_header(base)), "-x", "c++")
    key = cache_key(digest, sizes, flags, compiler)
    return cbuild.build(source, key, flags, shared=False, command=tool(compiler)[0], suffix=".cu")


def nvcc_check(source: str, arch: str = CHECK_ARCH) -> str:
    """Compile ``source`` with nvcc for ``arch`` to PTX and to an object file; the PTX text.

    ``CompileError`` (with nvcc's messages) when nvcc rejects it; ``NoDevice`` without nvcc."""
    nvcc, version = tool("nvcc")
    key = hashlib.sha256("\0".join((source, arch, version)).encode()).hexdigest()[:32]
    cached = cbuild.cache_dir() / f"{key}.{arch}.ptx"
    if cached.exists():
        return cached.read_text()
    with tempfile.TemporaryDirectory(prefix="tilecert-nvcc-") as tmp:
        folder = Path(tmp)
        src = folder / "kernel.cu"
        src.write_text(source)
        cmd = [nvcc, f"-arch={arch}", "-c", "-keep", "-keep-dir", str(folder), "-o", str(folder / "kernel.o"),
               str(src)]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=cbuild.COMPILE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise CompileError(f"nvcc took over {cbuild.COMPILE_TIMEOUT_S} s", hint="compile a smaller schedule") \
                from None
        ptx = folder / "kernel.ptx"
        if res.returncode != 0 or not ptx.exists() or not (folder / "kernel.o").exists():
            kept = cbuild.cache_dir() / f"{key}.cu"
            kept.write_text(source)
            tail = "\n".join(res.stderr.splitlines()[-12:])
            raise CompileError(f"nvcc -arch={arch} failed on {kept}:\n{tail}",
                               hint="this is a tilecert bug; please report it with the source file")
        text = ptx.read_text()
    cached.write_text(text)
    return text
