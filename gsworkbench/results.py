"""Run directories, environment metadata and atomic writes under ``results/``.

Every run (a notebook, a benchmark) writes into ``results/<run-id>/``: its tables (CSV), plots
(PNG), executed notebooks and a ``metadata.json`` with its parameters and environment (git commit
and dirty flag, package versions, CPU model, thread settings, time). Each file is written to a
temporary name and renamed into place, so an interrupted run never leaves a half-written file and
never loses what it already wrote.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import glob
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator, Mapping
from importlib import metadata as _md
from pathlib import Path
from typing import Any, BinaryIO

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("torch", "numpy", "numba", "pandas", "matplotlib", "papermill", "plyfile", "gsworkbench")


def results_root() -> Path:
    """``$GSW_RESULTS_DIR`` or ``<repo>/results``."""
    return Path(os.environ.get("GSW_RESULTS_DIR", REPO_ROOT / "results"))


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


# ---- atomic writes ---------------------------------------------------------------------------

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


def save_figure(path: str | os.PathLike[str], fig: Any, dpi: int = 110, device: str = "cpu") -> Path:
    """Atomically saves a matplotlib figure as PNG, with the machine and commit in a footer
    (:func:`gsworkbench.plots.add_footer`; ``device`` says whether to name the CPU or the GPU)."""
    import io

    from gsworkbench.plots import add_footer

    add_footer(fig, device)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return atomic_write_bytes(path, buf.getvalue())


# ---- environment -----------------------------------------------------------------------------


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux, sysctl on macOS), else the architecture."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    if platform.system() == "Darwin":
        try:
            cmd = ["sysctl", "-n", "machdep.cpu.brand_string"]
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=5)
            if out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine()


def build_info() -> dict[str, Any] | None:
    """How the extension was compiled (compiler, version, flags incl. ``-march`` and what it resolved
    to), as setup.py recorded it in ``gsworkbench/_build_info.json``; None when not recorded."""
    try:
        return json.loads((Path(__file__).resolve().parent / "_build_info.json").read_text())
    except (OSError, ValueError):
        return None


def thread_settings() -> dict[str, Any]:
    """Threads that torch uses and the OpenMP variables that shape them."""
    import torch

    return {
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "cpu_count": os.cpu_count(),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }


def environment() -> dict[str, Any]:
    """Git commit and dirty flag, package versions, CPU, threads, Python, time."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = _md.version(name)
        except _md.PackageNotFoundError:
            versions[name] = None
    status = _git("status", "--porcelain", "--untracked-files=no")
    from gsworkbench._ext import has_cuda_kernels, has_ext

    return {
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": None if status is None else bool(status),
        "packages": versions,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "threads": thread_settings(),
        "extension": {"built": has_ext(), "cuda_kernels": has_cuda_kernels(), "build": build_info()},
        "time_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def write_metadata(run_dir: str | os.PathLike[str], params: Mapping[str, Any], **extra: Any) -> Path:
    """Writes ``metadata.json`` (parameters + environment + extra fields) into ``run_dir``."""
    return write_json(Path(run_dir) / "metadata.json", {"parameters": dict(params), **extra, **environment()})


def machine_summary(device: str = "cpu") -> str:
    """One line for plot footers: the CPU (or GPU) and threads, and the commit."""
    import torch

    commit = (_git("rev-parse", "--short", "HEAD") or "no git") + (
        "+dirty" if _git("status", "--porcelain", "--untracked-files=no") else ""
    )
    if str(device).startswith("cuda") and torch.cuda.is_available():
        where = f"GPU {torch.cuda.get_device_name()}"
    else:
        where = f"{cpu_model()}, {torch.get_num_threads()} threads"
    return f"{where} | commit {commit} | torch {torch.__version__}"
