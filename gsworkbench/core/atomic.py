"""Atomic file writes: a file appears at its path whole or not at all.

Each file is written to a temporary name in the same folder and renamed into place, so an interrupted
run never leaves a half-written file and never loses what it already wrote. This module imports nothing
from gsworkbench (a foundation that scenes, trainers, file formats and run folders all use).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

_UMASK_LOCK = threading.Lock()


def _umask() -> int:
    """The process's file-creation mask (read by setting and restoring it)."""
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def _temp_beside(path: Path) -> tuple[int, str]:
    """An open temporary file in ``path``'s folder (created if needed), with the mode a new file gets
    (mkstemp makes 0600; a written file follows the umask like any other). It ends in ``.tmp`` plus
    ``path``'s last suffix, for writers that pick a format by name (``.gz``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp" + path.suffix)
    os.fchmod(fd, 0o666 & ~_umask())
    return fd, tmp


def remove_stale_temps(path: str | os.PathLike[str]) -> list[Path]:
    """Removes the temporaries that an atomic write of ``path`` left behind when its process was
    killed mid-write (``kill -9``, a power cut: no ``finally`` ran); returns what it removed.

    Call it where no other writer of ``path`` can be running, e.g. before a run (re)starts writing into
    its own folder."""
    path = Path(path)
    removed = []
    for tmp in path.parent.glob(f".{glob.escape(path.name)}.*.tmp{glob.escape(path.suffix)}"):
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
            removed.append(tmp)
    return removed


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """For writers that take a file name: a temporary path beside ``path``, renamed into place when the
    ``with`` block finishes without error, removed otherwise (an existing ``path`` is left as it was)."""
    path = Path(path)
    fd, tmp = _temp_beside(path)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A binary file that appears at ``path`` only once the ``with`` block finishes without error.

    It is a temporary file in the same folder, flushed, fsynced and renamed into place; on any error
    the temporary is removed and an existing ``path`` is left as it was.
    """
    path = Path(path)
    fd, tmp = _temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Writes ``data`` to ``path`` atomically (see :func:`atomic_writer`)."""
    with atomic_writer(path) as f:
        f.write(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Text version of :func:`atomic_write_bytes` (UTF-8)."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def write_json(path: str | os.PathLike[str], obj: Any) -> Path:
    """Atomically writes ``obj`` as indented JSON (non-JSON values are written with ``str``)."""
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def write_table(path: str | os.PathLike[str], df: Any) -> Path:
    """Atomically writes a pandas DataFrame as CSV."""
    return atomic_write_text(path, df.to_csv(index=False))
