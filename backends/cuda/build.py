"""Build CUDA sources: nvcc for a GPU, g++ against the host emulation header, nvcc checks for sm_90.

Executables are ``source + standalone_main`` (the C backend's file protocol), built once per
entry in the private build cache (``backends.cache`` through ``backends.c.build``): the entry
is the sha256 of the exact source, the flags (the emulation header's cached path, itself named
by the header's bytes, among them) and the compiler's path and ``--version`` text.

- ``cuda-host``: ``g++ -std=c++20 -O1 -pthread -include tc_cuda_emu.h -x c++``; with
  ``sanitize`` ThreadSanitizer and UndefinedBehaviorSanitizer (``-O1 -g``). The header is
  included from a copy in the cache beside its precompiled form for those flags (built once,
  verified by sha256 on each use; g++ parses the header itself when the precompiled one does not fit).
- ``cuda``: ``nvcc -O2 -arch=native -x cu`` (the GPU of this machine).
- ``nvcc_check(source)``: ``nvcc -arch=sm_90 -c -keep``, which writes the PTX and the object
  of the source; returns the PTX (cached by the sha256 of the source, the arch and nvcc, verified on use).
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from .. import cache
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


def precompiled_header(flags: tuple[str, ...]) -> Path:
    """The emulation header, copied into the build cache beside its precompiled form for ``flags``.

    The pair lives in a folder named by ``cache.key(header, flags, g++)``, built in a private
    temporary folder and renamed into place whole; a manifest records both files' sha256 and the
    folder is used only when they match (otherwise it is rebuilt)."""
    base = cache.directory("c")
    folder = base / f"emu-{cache.key(HEADER.read_bytes(), chr(0).join(flags), *cbuild.identity(tool('g++')[0]))[:32]}"
    header = folder / HEADER.name
    if _intact(folder):
        return header
    staging = Path(tempfile.mkdtemp(dir=base, prefix=".emu-"))
    staged = staging / HEADER.name
    staged.write_bytes(HEADER.read_bytes())
    res = subprocess.run([tool("g++")[0], *flags, "-x", "c++-header", str(staged), "-o", f"{staged}.gch"],
                         capture_output=True, text=True, timeout=cbuild.COMPILE_TIMEOUT_S)
    if res.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise CompileError(f"g++ cannot compile the emulation header:\n{res.stderr[-2000:]}",
                           hint="the host emulation needs g++ with C++20 (std::atomic_ref)")
    (staging / MANIFEST).write_text("".join(f"{cache.digest(staging / n)} {n}\n" for n in _PAIR))
    if folder.exists() and not _intact(folder):
        shutil.rmtree(folder, ignore_errors=True)
    try:
        os.rename(staging, folder)
    except OSError:  # a concurrent builder published the pair first
        shutil.rmtree(staging, ignore_errors=True)
    if not _intact(folder):
        raise CompileError(f"the precompiled emulation header in {folder} does not verify",
                           hint="remove the build cache folder (TILECERT_CACHE) and compile again")
    return header


MANIFEST = "sha256"
_PAIR = (HEADER.name, HEADER.name + ".gch")


def _intact(folder: Path) -> bool:
    """Whether ``folder`` holds the header pair with the sha256 its manifest records."""
    try:
        lines = (folder / MANIFEST).read_text().splitlines()
        recorded = dict(reversed(line.split(" ", 1)) for line in lines)
        return set(recorded) == set(_PAIR) and all(cache.digest(folder / n) == d for n, d in recorded.items()) \
            and (folder / HEADER.name).read_bytes() == HEADER.read_bytes()
    except (OSError, ValueError):
        return False


def build_executable(source: str, target: str, sanitize: bool) -> Path:
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
    return cbuild.build(source, flags, shared=False, command=tool(compiler)[0], suffix=".cu")


def nvcc_check(source: str, arch: str = CHECK_ARCH) -> str:
    """Compile ``source`` with nvcc for ``arch`` to PTX and to an object file; the PTX text.

    ``CompileError`` (with nvcc's messages) when nvcc rejects it; ``NoDevice`` without nvcc."""
    nvcc = tool("nvcc")[0]
    base = cache.directory("c")
    name = f"{cache.key(source, arch, *cbuild.identity(nvcc))}.{arch}.ptx"
    found = cache.lookup(base, name)
    if found is not None:
        return found.read_text()
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
            kept = base / f"{name.split('.')[0]}.cu"
            os.replace(cache.scratch(base, name, ".cu", source.encode()), kept)
            tail = "\n".join(res.stderr.splitlines()[-12:])
            raise CompileError(f"nvcc -arch={arch} failed on {kept}:\n{tail}",
                               hint="this is a tilecert bug; please report it with the source file")
        text = ptx.read_text()
    cache.publish(base, name, cache.scratch(base, name, ".tmp", text.encode()))
    return text
