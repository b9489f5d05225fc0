"""Run folders under ``results/``: one per run (a notebook, a benchmark), holding its tables (CSV),
plots (PNG), executed notebooks and a ``metadata.json`` with its parameters and environment.

A run folder is held by one run at a time (:func:`run_lock`); every file in it is written atomically
(:mod:`gsworkbench.core.atomic`).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import sys
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from gsworkbench.core.atomic import write_json
from gsworkbench.core.project import results_root
from gsworkbench.core.provenance import environment


def new_run_dir(kind: str, root: str | os.PathLike[str] | None = None) -> Path:
    """Creates ``<root>/<UTC time>-<kind>-<random>/`` and returns it."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = Path(root) if root is not None else results_root()
    run = path / f"{stamp}-{kind}-{uuid.uuid4().hex[:6]}"
    run.mkdir(parents=True, exist_ok=False)
    return run


LOCK_NAME = ".gsworkbench-run.lock"


def _lock_holder(path: Path) -> str:
    """What the lock file at ``path`` says about the run that holds it (its process and command)."""
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
        return f"process {info['pid']} ({info['command']}), started {info['started']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


@contextlib.contextmanager
def run_lock(run_dir: str | os.PathLike[str], command: str = "") -> Iterator[Path]:
    """Holds the run folder ``run_dir`` (created if needed) for one run: a second run into the same
    folder gets a ValueError naming the process that holds it, instead of both writing there and the
    folder ending up with a mix of their files. The lock (``flock`` on ``.gsworkbench-run.lock``, which
    names the holder) goes when the run ends, however it ends, and the file with it. A folder that
    cannot be made or written (an existing file, a read-only mount) is a ValueError saying so."""
    folder = Path(run_dir)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"the run folder {folder} is an existing file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise ValueError(f"cannot write the run folder {folder}: {err.strerror or err}") from None
    try:
        import fcntl
    except ImportError:  # no flock here (Windows): no lock
        os.close(fd)
        yield folder
        return
    path = folder / LOCK_NAME
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise ValueError(f"the run folder {folder} is in use by {_lock_holder(path)}: wait for that run "
                             f"to end, or give another folder") from None  # fmt: skip
        try:  # the holder before may have removed the file after this process opened it: lock the new one
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        started = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        info = {"pid": os.getpid(), "command": command or " ".join(sys.argv), "started": started}
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(info).encode())
        yield folder
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
        os.close(fd)


def write_metadata(run_dir: str | os.PathLike[str], params: Mapping[str, Any], **extra: Any) -> Path:
    """Writes ``metadata.json`` (parameters + environment + extra fields) into ``run_dir``."""
    return write_json(Path(run_dir) / "metadata.json", {"parameters": dict(params), **extra, **environment()})
