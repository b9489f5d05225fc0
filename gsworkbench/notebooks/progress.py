"""Progress of a headless notebook run: which cell runs, for how long, and the total time.

A papermill engine (``engine_name="gsworkbench"``) that reports each cell's start and end to a
:class:`CellProgress`. On a terminal one status line is redrawn every second, so a long cell does not
look frozen; otherwise (a log, CI) one line is printed as each cell starts and ends.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, TextIO

from jupyter_client.manager import AsyncKernelManager
from nbclient.exceptions import CellExecutionError
from papermill.engines import NBClientEngine, papermill_engines

ENGINE_NAME = "gsworkbench"


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m // 60:d}:{m % 60:02d}:{s:02d}" if m >= 60 else f"{m:d}:{s:02d}"


def first_line(source: str, width: int = 60) -> str:
    """The first non-blank, non-comment line of a cell, cut to ``width`` characters."""
    lines = [ln.strip() for ln in source.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    line = lines[0] if lines else (source.strip().splitlines() or [""])[0]
    return line if len(line) <= width else line[: width - 3] + "..."


class CellProgress:
    """Prints ``[cell 5/14, 0:42 in cell, 1:10 total] tgt = field.make_target(...)`` while cells run.

    Cells are numbered as in the source notebook (markdown included; papermill's injected parameters
    cell is not counted), like the failure report of :class:`~gsworkbench.notebooks.NotebookFailed`.
    """

    def __init__(self, stream: TextIO | None = None, live: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.started = time.monotonic()
        self.cell_started = self.started
        self.label = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _line(self) -> str:
        now = time.monotonic()
        return f"[{self.label}, {_clock(now - self.cell_started)} in cell, {_clock(now - self.started)} total]"

    def cell_start(self, label: str, source: str) -> None:
        """A cell starts: ``label`` names it (``cell 5/14``), ``source`` is its code."""
        with self._lock:
            self.cell_started = time.monotonic()
            self.label = label
            self.text = first_line(source)
            if not self.live:
                print(f"{self._line()} {self.text}", file=self.stream, flush=True)
        if self.live and self._thread is None:
            self._thread = threading.Thread(target=self._redraw, daemon=True)
            self._thread.start()

    def cell_end(self, failed: str | None = None) -> None:
        """A cell ended; ``failed`` names what stopped it (an exception name), None when it finished."""
        if not self.live:
            with self._lock:
                took = time.monotonic() - self.cell_started
                if failed is not None:
                    print(f"  {self.label} stopped by {failed} after {_clock(took)}", file=self.stream, flush=True)
                elif took >= 1.0:
                    print(f"  {self.label} done in {_clock(took)}", file=self.stream, flush=True)

    def _redraw(self) -> None:
        while not self._stop.wait(0.5):
            with self._lock:
                self.stream.write(f"\r\x1b[K{self._line()} {self.text}")
                self.stream.flush()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self.stream.write(f"\r\x1b[Kdone in {_clock(time.monotonic() - self.started)}\n")
            self.stream.flush()


class LocalKernelManager(AsyncKernelManager):
    """A kernel manager that talks to its (local) kernel over Unix sockets in a private temporary
    folder rather than TCP: nothing listens on the network, and ipykernel does not warn that the
    kernel "is running over TCP without encryption" on every run. Live managers are listed in
    :attr:`live`, so that Ctrl-C can be passed on to their kernels (:func:`interrupt_kernels`)."""

    live: weakref.WeakSet[LocalKernelManager] = weakref.WeakSet()

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        LocalKernelManager.live.add(self)
        self.interrupted = False  # set by interrupt_kernels
        folder = tempfile.mkdtemp(prefix="gsw-kernel-")
        weakref.finalize(self, shutil.rmtree, folder, True)  # removed with the manager, or at exit
        self.transport = "ipc"
        self.ip = os.path.join(folder, "ipc")

    async def _async_interrupt_kernel(self) -> None:
        # jupyter_client sends SIGINT before every shutdown request. After a Ctrl-C that this process
        # already passed on (the cell has stopped), a second SIGINT can reach the kernel while it is
        # still finishing that execution, and ipykernel then logs "KeyboardInterrupt caught in kernel"
        # under the one-line message. Such a kernel gets the shutdown request without it (and SIGTERM,
        # then SIGKILL, if it does not stop).
        if self.shutting_down and self.interrupted:
            return
        await super()._async_interrupt_kernel()


def interrupt_kernels() -> int:
    """Sends SIGINT to the kernels of every live :class:`LocalKernelManager` (they run in sessions of
    their own, so a terminal's Ctrl-C does not reach them); returns how many were signalled. Safe in a
    signal handler: no kernel message, no event loop."""
    sent = 0
    for km in list(LocalKernelManager.live):
        prov = getattr(km, "provisioner", None)
        pgid, pid = getattr(prov, "pgid", None), getattr(prov, "pid", None)
        try:
            if pgid:
                os.killpg(pgid, signal.SIGINT)
            elif pid:
                os.kill(pid, signal.SIGINT)
            else:
                continue
            km.interrupted = True
            sent += 1
        except (ProcessLookupError, PermissionError):
            pass
    return sent


def _stop_before_cells(nb_man: Any, stop: Callable[[], bool] | None) -> None:
    """Makes each cell ask ``stop()`` before it starts; True ends the run as an interrupted cell would."""
    if stop is None:
        return
    start = nb_man.cell_start

    def cell_start(cell: Any, cell_index: int | None = None, **kw: Any) -> Any:
        if stop():
            raise CellExecutionError("", "KeyboardInterrupt", "interrupted before this cell")
        return start(cell, cell_index, **kw)

    nb_man.cell_start = cell_start


class ProgressEngine(NBClientEngine):
    """papermill's nbclient engine, reporting cell starts and ends to ``progress`` (a CellProgress),
    with its kernels on :class:`LocalKernelManager`. ``stop`` (a callable) is asked before each cell:
    True ends the run there, as if that cell had been interrupted."""

    @classmethod
    def execute_managed_notebook(cls, nb_man: Any, kernel_name: str, **kwargs: Any) -> Any:
        kwargs.setdefault("kernel_manager_class", LocalKernelManager)
        progress: CellProgress | None = kwargs.pop("progress", None)
        stop: Callable[[], bool] | None = kwargs.pop("stop", None)
        if progress is None:
            _stop_before_cells(nb_man, stop)
            return super().execute_managed_notebook(nb_man, kernel_name, **kwargs)
        start, complete, exception = nb_man.cell_start, nb_man.cell_complete, nb_man.cell_exception
        failed: list[str] = []
        started: set[int | None] = set()  # cells whose start was reported (not those stopped before it)
        tags = [c.get("metadata", {}).get("tags", []) for c in nb_man.nb.cells]
        injected = next((i for i, t in enumerate(tags) if "injected-parameters" in t), None)
        total = len(tags) - (injected is not None)

        def source_label(index: int) -> str:
            if index == injected:
                return "injected parameters"
            return f"cell {index + 1 - (injected is not None and index > injected)}/{total}"

        def cell_start(cell: Any, cell_index: int | None = None, **kw: Any) -> Any:
            if cell.cell_type == "code":
                started.add(cell_index)
                progress.cell_start(source_label(cell_index or 0), cell.source)
            return start(cell, cell_index, **kw)

        def cell_exception(cell: Any, cell_index: int | None = None, **kw: Any) -> Any:
            failed.append(getattr(kw.get("exception"), "ename", None) or "an error")
            return exception(cell, cell_index, **kw)

        def cell_complete(cell: Any, cell_index: int | None = None, **kw: Any) -> Any:
            why = failed.pop() if failed else None
            if cell.cell_type == "code" and cell_index in started:
                progress.cell_end(why)
            return complete(cell, cell_index, **kw)

        nb_man.cell_start, nb_man.cell_complete, nb_man.cell_exception = cell_start, cell_complete, cell_exception
        _stop_before_cells(nb_man, stop)
        try:
            return super().execute_managed_notebook(nb_man, kernel_name, **kwargs)
        finally:
            progress.close()


papermill_engines.register(ENGINE_NAME, ProgressEngine)
