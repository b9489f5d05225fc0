"""Sampling this process with py-spy (``--native``: C/C++ frames beside the Python ones).

py-spy attaches to the running interpreter by pid, so any workload, callables included, is sampled
in place. It records once, in speedscope format (per thread, in time order, for interactive viewing);
the folded stacks (what ``py-spy record --format raw`` writes: ``frame;frame;... count``) and the SVG
flamegraph are derived from that one recording (:func:`speedscope_to_folded`,
:mod:`gsworkbench.profiling.flamegraph`), so all three show the same samples.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gsworkbench.core.project import PACKAGE_CHECKOUT

_THIS_FILE = "gsworkbench/profiling/pyspy.py"


class PySpyUnavailable(RuntimeError):
    """py-spy is not installed or cannot attach (no ptrace permission); the message says which."""


def find_pyspy() -> str | None:
    """The py-spy executable: beside this interpreter (a venv), else on PATH."""
    local = Path(sys.executable).with_name("py-spy")
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    return shutil.which("py-spy")


def _allow_tracing_by_children() -> None:
    """Under Yama ptrace_scope 1 a process may only be traced by its ancestors: let any process of
    ours trace it (PR_SET_PTRACER, PR_SET_PTRACER_ANY). No effect elsewhere."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(0x59616D61, ctypes.c_ulong(-1), 0, 0, 0)


@contextlib.contextmanager
def pyspy_recording(
    out: str | os.PathLike[str], rate: int = 100, native: bool = True, attach_timeout_s: float = 20.0
) -> Iterator[None]:
    """Samples this process with py-spy while the block runs and writes a speedscope JSON to ``out``.

    Raises :class:`PySpyUnavailable` (before the block runs) when py-spy is missing or cannot attach,
    and after it when py-spy wrote nothing.
    """
    if isinstance(rate, bool) or not isinstance(rate, int) or rate < 1:
        raise ValueError(f"the sampling rate must be an int >= 1 (samples per second), got {rate!r}")
    exe = find_pyspy()
    if exe is None:
        raise PySpyUnavailable("py-spy is not installed (pip install py-spy); no flamegraph")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    cmd = [exe, "record", "--pid", str(os.getpid()), "--format", "speedscope", "-o", str(tmp), "--rate", str(rate)]
    if native:
        cmd.append("--native")
    _allow_tracing_by_children()
    # py-spy's messages go to a file, polled here: a reader thread would itself be sampled
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)

        def said() -> str:
            log.seek(0)
            return " | ".join(x.strip() for x in log.read().splitlines() if x.strip()) or "no output"

        deadline = time.monotonic() + attach_timeout_s
        while "Sampling process" not in said() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if proc.poll() is not None or "Sampling process" not in said():
            proc.kill()
            proc.wait()
            raise PySpyUnavailable(f"py-spy could not attach to this process (needs ptrace permission): {said()}")
        try:
            yield
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if not tmp.exists():
            raise PySpyUnavailable(f"py-spy wrote no profile: {said()}")
    os.replace(tmp, out)


def short_file(path: str) -> str:
    """A frame's file as py-spy shortens it: the part after site-packages, the repository-relative path,
    or the base name (libraries); ``<frozen ...>`` as it is."""
    if not path or path.startswith("<"):
        return path or "?"
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1]
    if "/csrc/" in path:  # the extension's C++ sources, wherever it was built
        return "csrc/" + path.rsplit("/csrc/", 1)[1]
    with contextlib.suppress(ValueError):
        return str(Path(path).relative_to(PACKAGE_CHECKOUT))
    return os.path.basename(path)


def frame_label(frame: dict[str, Any]) -> str:
    """``name (file:line)`` as py-spy's raw format writes it; native frames without a line: ``name (lib)``;
    an unresolved address (which differs between processes) becomes ``[unknown]``."""
    name, file, line = frame.get("name", "?"), short_file(frame.get("file") or ""), frame.get("line")
    if re.fullmatch(r"0x[0-9a-fA-F]+", name or ""):
        name = "[unknown]"
    return f"{name} ({file}:{line})" if line else f"{name} ({file})"


_THREAD_NAME = re.compile(r'^Thread (?P<tid>\d+)(?: "(?P<name>.*)")?')


def profile_thread(profile_name: str) -> tuple[int | None, str]:
    """(native thread id, thread name) of a speedscope profile that py-spy named ``Thread 123 "name"``;
    (None, the whole name) for a name of any other form."""
    m = _THREAD_NAME.match(profile_name or "")
    if m is None:
        return None, profile_name or "?"
    return int(m["tid"]), m["name"] or m["tid"]


def _profile_counts(doc: dict[str, Any], prof: dict[str, Any], rate: int | None) -> Counter[str]:
    frames = [frame_label(f) for f in doc["shared"]["frames"]]
    own = {i for i, f in enumerate(doc["shared"]["frames"]) if str(f.get("file", "")).endswith(_THIS_FILE)}
    counts: Counter[str] = Counter()
    weights = prof.get("weights") or [None] * len(prof["samples"])
    for stack, w in zip(prof["samples"], weights):
        if not stack or any(i in own for i in stack):
            continue
        n = max(1, round(w * rate)) if (rate and w) else 1
        counts[";".join(frames[i].replace(";", ":") for i in stack)] += n
    return counts


def speedscope_to_folded(doc: dict[str, Any], rate: int | None = None, thread: int | None = None) -> Counter[str]:
    """Folded stacks (root first, ``;``-joined frame labels) -> sample counts, over every thread, or
    over the thread whose native id is ``thread`` only (py-spy names each thread's profile
    ``Thread <native id> "<name>"``).

    py-spy's speedscope weights are seconds per sample; with ``rate`` they convert to counts (one
    sample = 1 / rate s), otherwise each listed sample counts once. Samples of this module (the
    recording starting or stopping) are left out.
    """
    counts: Counter[str] = Counter()
    for prof in doc["profiles"]:
        if thread is None or profile_thread(prof.get("name", ""))[0] == thread:
            counts.update(_profile_counts(doc, prof, rate))
    return counts


def thread_samples(doc: dict[str, Any], rate: int | None = None) -> list[tuple[int | None, str, int]]:
    """(native thread id, thread name, samples) per thread of a py-spy speedscope recording, most first."""
    rows = []
    for prof in doc["profiles"]:
        tid, name = profile_thread(prof.get("name", ""))
        rows.append((tid, name, sum(_profile_counts(doc, prof, rate).values())))
    return sorted(rows, key=lambda row: -row[2])


def one_thread_folded(doc: dict[str, Any], thread: int, rate: int | None = None) -> tuple[Counter[str], dict[str, int]]:
    """The folded stacks of the thread ``thread`` (a native id, ``threading.get_native_id()``) and what
    was left out: ``"name (id)"`` -> samples of every other thread that has any. In a Jupyter kernel the
    other threads are the kernel's own (IOPub, heartbeat, control), idle but sampled in their waits;
    kept, they would crowd the workload into a corner of the flamegraph. When no profile is named
    after ``thread`` (a py-spy that names threads otherwise), every thread is kept and nothing left out."""
    rows = thread_samples(doc, rate)
    if not any(tid == thread for tid, _name, _n in rows):
        return speedscope_to_folded(doc, rate), {}
    left_out = {f"{name} ({tid})": n for tid, name, n in rows if tid != thread and n}
    return speedscope_to_folded(doc, rate, thread=thread), left_out


def left_out_note(kept: int, left_out: dict[str, int], width: int = 4) -> str:
    """One line saying which threads' samples a flamegraph leaves out (empty when none)."""
    dropped = sum(left_out.values())
    if not dropped:
        return ""
    names = ", ".join(list(left_out)[:width]) + (f" and {len(left_out) - width} more" if len(left_out) > width else "")
    share = 100 * dropped / max(1, dropped + kept)
    return f"left out: {dropped} samples ({share:.0f}%) of {len(left_out)} other thread(s): {names}"
