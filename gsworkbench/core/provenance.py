"""Provenance: where a result came from (git commit and dirty flag of the package's checkout, package
versions, CPU model, thread settings, how the extension was built) and the one-line machine summary
that figure footers carry.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
from importlib import metadata as _md
from pathlib import Path
from typing import Any

from gsworkbench.core.project import PACKAGE_CHECKOUT

PACKAGES = ("torch", "numpy", "numba", "pandas", "matplotlib", "papermill", "plyfile", "gsworkbench")


def git_output(*args: str) -> str | None:
    """The stripped output of ``git ARGS`` in the package's checkout (its commit is the code that made a
    result, whichever project folder the result went to); None when git fails or is missing."""
    try:
        cmd = ["git", *args]
        out = subprocess.run(cmd, cwd=PACKAGE_CHECKOUT, capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def short_commit() -> str:
    """The package checkout's short commit hash, with ``-dirty`` when tracked files differ from it, or
    ``unknown`` without git: the code that a table's rows were measured on."""
    commit = git_output("rev-parse", "--short", "HEAD")
    if not commit:
        return "unknown"
    return commit + ("-dirty" if git_output("status", "--porcelain", "--untracked-files=no") else "")


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
        return json.loads((Path(__file__).resolve().parents[1] / "_build_info.json").read_text())
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
    status = git_output("status", "--porcelain", "--untracked-files=no")
    # here, not at the top: _ext loads torch, which the light importers of this module do without
    from gsworkbench._ext import has_cuda_kernels, has_ext

    return {
        "git_commit": git_output("rev-parse", "HEAD"),
        "git_dirty": None if status is None else bool(status),
        "packages": versions,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "threads": thread_settings(),
        "extension": {"built": has_ext(), "cuda_kernels": has_cuda_kernels(), "build": build_info()},
        "time_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def machine_summary(device: str = "cpu") -> str:
    """One line for plot footers: the CPU (or GPU) and threads, and the commit."""
    import torch

    commit = (git_output("rev-parse", "--short", "HEAD") or "no git") + (
        "+dirty" if git_output("status", "--porcelain", "--untracked-files=no") else ""
    )
    if str(device).startswith("cuda") and torch.cuda.is_available():
        where = f"GPU {torch.cuda.get_device_name()}"
    else:
        where = f"{cpu_model()}, {torch.get_num_threads()} threads"
    return f"{where} | commit {commit} | torch {torch.__version__}"
