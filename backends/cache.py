"""The build cache: a private per-user folder of compiled objects, each verified before use.

- The folder is ``$TILECERT_CACHE`` (default ``~/.cache/tilecert``), created with mode 0700. An
  existing folder is used only when it is a directory owned by this user, not writable by group
  or others, and writable by this process; otherwise (a file, read-only, foreign, shared) the
  builds go to a private temporary folder (``tempfile.mkdtemp``, mode 0700, removed at exit)
  and a ``CacheWarning`` says why, once per process.
- An entry's name is ``sha256(parts)`` (``key``): the callers hash the exact source text, the
  flags and the compiler's path and version line, so equal names mean equal builds.
- ``publish`` moves a finished object to ``KEY-SHA.ext`` (its own sha256 in the name; atomic
  ``os.replace``) and then points ``KEY.ext.sha256`` at it (atomic too), so concurrent builders of
  one key each leave a complete, consistent entry. ``lookup`` returns the object only when its
  bytes hash to the recorded digest: a missing, truncated, tampered or foreign object is no entry,
  and the caller rebuilds it. Nothing is ever compiled from a file found in the folder: sources
  are written afresh to a private name (``scratch``).
"""
from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import stat
import tempfile
import warnings
from pathlib import Path
from typing import Optional, Union

from .errors import CacheWarning

_FALLBACK: dict[str, Path] = {}


def root() -> Path:
    """The configured cache root (not yet checked)."""
    return Path(os.environ.get("TILECERT_CACHE") or Path.home() / ".cache" / "tilecert")


def _unusable(path: Path) -> Optional[str]:
    """Why ``path`` cannot serve as a private cache folder (created with mode 0700 if missing); None if it can."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.stat()
    except OSError as e:
        return f"it cannot be created ({e.strerror or e})"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    if st.st_uid != os.getuid():
        return f"it is owned by uid {st.st_uid}, not by this user (uid {os.getuid()})"
    if st.st_mode & 0o022:
        return f"it is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    try:
        fd, probe = tempfile.mkstemp(dir=path, prefix=".probe-")
    except OSError as e:
        return f"it is not writable ({e.strerror or e})"
    os.close(fd)
    os.unlink(probe)
    return None


def directory(sub: str) -> Path:
    """The checked folder ``sub`` of the cache root, or of this process's private fallback folder."""
    base = root()
    folder = base / sub
    why = _unusable(base) or _unusable(folder)
    if why is None:
        return folder
    if str(folder) not in _FALLBACK:
        tmp = Path(tempfile.mkdtemp(prefix="tilecert-cache-"))
        atexit.register(shutil.rmtree, tmp, ignore_errors=True)
        _FALLBACK[str(folder)] = tmp
        warnings.warn(CacheWarning(f"the build cache {folder} is unusable: {why}; building in the private "
                                   f"temporary folder {tmp} instead (set TILECERT_CACHE to a private folder)"),
                      stacklevel=3)
    return _FALLBACK[str(folder)]


def key(*parts: Union[str, bytes]) -> str:
    """The entry name of a build: the sha256 of its parts (each length-prefixed, so no two splits collide)."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def digest(path: Path) -> str:
    """The sha256 of the file at ``path``."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _object(folder: Path, name: str, digest: str) -> Path:
    """Where the object of entry ``name`` with content sha256 ``digest`` lives (named by both)."""
    stem, dot, ext = name.partition(".")
    return folder / f"{stem}-{digest[:16]}{dot}{ext}"


def lookup(folder: Path, name: str) -> Optional[Path]:
    """The object of entry ``name`` when its bytes match the sha256 published for it; else None."""
    try:
        recorded = (folder / f"{name}.sha256").read_text().strip()
        obj = _object(folder, name, recorded)
        if len(recorded) != 64 or not stat.S_ISREG(obj.lstat().st_mode):
            return None
        return obj if digest(obj) == recorded else None
    except (OSError, UnicodeDecodeError):
        return None


def scratch(folder: Path, prefix: str, suffix: str, data: bytes = b"") -> Path:
    """A new private file in ``folder`` (a unique name, opened exclusively) holding ``data``."""
    fd, name = tempfile.mkstemp(dir=folder, prefix=f".{prefix}-", suffix=suffix)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return Path(name)


def publish(folder: Path, name: str, tmp: Path) -> Path:
    """Publish the finished object ``tmp`` as entry ``name``: it is moved (atomically) to a name
    that carries its sha256, then the entry's digest file is replaced (atomically) to point at it.
    Objects are never overwritten with other bytes, so a reader always verifies a complete one."""
    sha = digest(tmp)
    obj = _object(folder, name, sha)
    os.replace(tmp, obj)
    os.replace(scratch(folder, name, ".tmp", sha.encode()), folder / f"{name}.sha256")
    return obj
