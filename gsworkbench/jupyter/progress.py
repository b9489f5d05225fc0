"""Progress of a headless notebook run: which cell runs, for how long, and the total time.

A papermill engine (``engine_name="gsworkbench"``) that reports each cell's start and end to a
:class:`CellProgress`. On a terminal one status line is redrawn every second, so a long cell does not
look frozen; otherwise (a log, CI) one line is printed as each cell starts and ends.

Its kernels run with ``GSW_HEADLESS=1`` (:data:`gsworkbench.jupyter.display.HEADLESS_ENV`): no frontend
shows their widgets, so the notebooks create none. And its client (:class:`WatchedClient`) does not wait
forever for a finished cell's reply. nbclient waits for a cell's ``execute_reply`` on the shell channel
with no time limit, and with ipywidgets in play that reply sometimes sits unread in the socket although
the kernel has finished the cell and gone idle (nbclient issue #312): pyzmq watches the socket
edge-triggered and missed its arrival. While a cell runs, the client has pyzmq look at its sockets every
second; once the kernel has said it is idle after the cell, it waits :attr:`WatchedClient.reply_grace`
seconds for the reply, then reads one waiting in the socket, and otherwise says so in one line and goes
on with the outcome the cell's outputs show.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from queue import Empty
from typing import Any, TextIO

import zmq
from jupyter_client.manager import AsyncKernelManager
from nbclient.exceptions import CellExecutionError, DeadKernelError
from nbclient.util import ensure_async, run_sync
from papermill.clientwrap import PapermillNotebookClient
from papermill.engines import NBClientEngine, papermill_engines
from papermill.log import logger as papermill_logger
from papermill.utils import merge_kwargs, remove_args

from gsworkbench.jupyter.display import HEADLESS_ENV

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
    cell is not counted), like the failure report of :class:`~gsworkbench.jupyter.NotebookFailed`.
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

    async def _async_pre_start_kernel(self, **kw: Any) -> Any:
        # no frontend shows this kernel's widgets: the notebooks see it (display.headless) and make none
        kw["env"] = {**kw.get("env", os.environ), HEADLESS_ENV: "1"}
        return await super()._async_pre_start_kernel(**kw)

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


class WatchedClient(PapermillNotebookClient):
    """papermill's notebook client with a watchdog for a lost ``execute_reply`` (see the module
    docstring). ``on_lost_reply(cell_index)`` is called once per such cell, before the run goes on."""

    reply_grace = 5.0  # seconds after the kernel went idle; its reply is sent before it says so
    kick_every = 1.0  # seconds between looks at the sockets while a cell runs (see _kick)

    def __init__(self, nb_man: Any, on_lost_reply: Callable[[int], None] | None = None, **kw: Any) -> None:
        super().__init__(nb_man, **kw)
        self.on_lost_reply = on_lost_reply
        self.current_cell: int | None = None  # the index of the cell last sent to the kernel
        self.kernel_exit: int | None = None  # a dead kernel's exit status (negative: killed by that signal)

    async def async_execute_cell(self, cell: Any, cell_index: int, *args: Any, **kwargs: Any) -> Any:
        self.current_cell = cell_index
        return await super().async_execute_cell(cell, cell_index, *args, **kwargs)

    execute_cell = run_sync(async_execute_cell)  # nbclient binds its own at class creation

    async def _async_check_alive(self) -> None:
        # nbclient's own also logs "Kernel died while waiting for execute reply" above the runner's line
        assert self.kc is not None
        if not await ensure_async(self.kc.is_alive()):
            provisioner = getattr(self.km, "provisioner", None)
            if provisioner is not None:
                self.kernel_exit = await provisioner.poll()
            raise DeadKernelError("Kernel died")

    async def _async_poll_for_reply(
        self, msg_id: str, cell: Any, timeout: int | None, task_poll_output_msg: Any, task_poll_kernel_alive: Any
    ) -> dict[str, Any]:
        reply = asyncio.ensure_future(
            super()._async_poll_for_reply(msg_id, cell, timeout, task_poll_output_msg, task_poll_kernel_alive)
        )
        kick = asyncio.ensure_future(self._kick())
        try:
            # the output task ends when the kernel says it is idle after this cell
            await asyncio.wait({reply, task_poll_output_msg}, return_when=asyncio.FIRST_COMPLETED)
            if not reply.done():
                await asyncio.wait({reply}, timeout=self.reply_grace)
            if reply.done():
                return reply.result()
        finally:
            kick.cancel()
            if not reply.done():
                reply.cancel()
        task_poll_kernel_alive.cancel()
        late = await self._waiting_reply(msg_id)
        if late is not None:
            return late
        index = next((i for i, c in enumerate(self.nb.cells) if c is cell), -1)  # equal cells may repeat
        if self.on_lost_reply is not None:
            self.on_lost_reply(index)
        return _reply_from_outputs(msg_id, cell)

    async def _kick(self) -> None:
        """Every :attr:`kick_every` seconds, has pyzmq look at the shell and IOPub sockets again. It
        watches their file descriptors edge-triggered, and a message that arrives while it is busy can
        sit unread, with no further edge to wake the client: the lost reply of the module docstring.
        Reading the sockets' EVENTS schedules the handling of what is pending."""
        assert self.kc is not None
        while True:
            await asyncio.sleep(self.kick_every)
            for channel in (self.kc.shell_channel, self.kc.iopub_channel):
                socket = getattr(channel, "socket", None)
                if socket is not None and not socket.closed:
                    socket.get(zmq.EVENTS)

    async def _waiting_reply(self, msg_id: str) -> dict[str, Any] | None:
        """The reply to ``msg_id`` if it sits in the shell socket unread (it arrived without waking the
        client), read without waiting; None when it is not there."""
        assert self.kc is not None
        while True:
            try:
                msg = await ensure_async(self.kc.shell_channel.get_msg(timeout=0))
            except Empty:
                return None
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg


class KernelDied(Exception):
    """The kernel died (OOM killer, kill -9, a crash) while running ``label`` (``cell 8/15``);
    ``exit_status`` is its exit status, negative when a signal killed it, None when unknown."""

    def __init__(self, label: str, exit_status: int | None) -> None:
        super().__init__(f"the kernel died in {label}")
        self.label, self.exit_status = label, exit_status


def _reply_from_outputs(msg_id: str, cell: Any) -> dict[str, Any]:
    """The ``execute_reply`` a finished cell would have had: an error when its outputs hold one."""
    errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    content: dict[str, Any] = {"status": "ok"}
    if errors:
        err = errors[-1]
        content = {"status": "error", "ename": err.get("ename", ""), "evalue": err.get("evalue", ""),
                   "traceback": list(err.get("traceback", []))}  # fmt: skip
    return {"msg_type": "execute_reply", "parent_header": {"msg_id": msg_id}, "metadata": {}, "content": content}


def _lost_reply_reporter(nb: Any, stream: TextIO) -> Callable[[int], None]:
    """Prints one line for a cell whose reply never came (numbered as :class:`CellProgress` does)."""
    labels = _cell_labels(nb)

    def report(index: int) -> None:
        label = labels(index) if index >= 0 else "a cell"
        clear = "\r\x1b[K" if stream.isatty() else ""  # over a live status line
        print(f"{clear}gsworkbench: {label} finished (the kernel went idle) but its reply never came; going on with "
              f"its outputs", file=stream, flush=True)  # fmt: skip

    return report


def _cell_labels(nb: Any) -> Callable[[int], str]:
    """``index`` -> ``cell 5/14``: cells numbered as in the source notebook (papermill's injected
    parameters cell not counted)."""
    tags = [c.get("metadata", {}).get("tags", []) for c in nb.cells]
    injected = next((i for i, t in enumerate(tags) if "injected-parameters" in t), None)
    total = len(tags) - (injected is not None)

    def label(index: int) -> str:
        if index == injected:
            return "injected parameters"
        return f"cell {index + 1 - (injected is not None and index > injected)}/{total}"

    return label


class ProgressEngine(NBClientEngine):
    """papermill's nbclient engine, reporting cell starts and ends to ``progress`` (a CellProgress),
    with its kernels on :class:`LocalKernelManager` and its client a :class:`WatchedClient`. ``stop`` (a
    callable) is asked before each cell: True ends the run there, as if that cell had been interrupted.
    ``reply_grace`` (seconds) sets the client's :attr:`WatchedClient.reply_grace`."""

    @classmethod
    def execute_managed_notebook(cls, nb_man: Any, kernel_name: str, **kwargs: Any) -> Any:
        kwargs.setdefault("kernel_manager_class", LocalKernelManager)
        progress: CellProgress | None = kwargs.pop("progress", None)
        stop: Callable[[], bool] | None = kwargs.pop("stop", None)
        if progress is None:
            _stop_before_cells(nb_man, stop)
            return cls._execute(nb_man, kernel_name, sys.stderr, **kwargs)
        start, complete, exception = nb_man.cell_start, nb_man.cell_complete, nb_man.cell_exception
        failed: list[str] = []
        started: set[int | None] = set()  # cells whose start was reported (not those stopped before it)
        source_label = _cell_labels(nb_man.nb)

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
            if isinstance(sys.exc_info()[1], DeadKernelError):  # papermill completes the cell in a finally
                why = "the kernel's death"
            if cell.cell_type == "code" and cell_index in started:
                progress.cell_end(why)
            return complete(cell, cell_index, **kw)

        nb_man.cell_start, nb_man.cell_complete, nb_man.cell_exception = cell_start, cell_complete, cell_exception
        _stop_before_cells(nb_man, stop)
        try:
            return cls._execute(nb_man, kernel_name, progress.stream, **kwargs)
        finally:
            progress.close()

    @classmethod
    def _execute(
        cls,
        nb_man: Any,
        kernel_name: str,
        stream: TextIO,
        log_output: bool = False,
        stdout_file: Any = None,
        stderr_file: Any = None,
        start_timeout: int = 60,
        execution_timeout: int | None = None,
        reply_grace: float | None = None,
        **kwargs: Any,
    ) -> Any:
        """What papermill's NBClientEngine does, with a :class:`WatchedClient`."""
        kwargs = remove_args(["input_path"], **kwargs)
        safe = remove_args(["timeout", "startup_timeout"], **kwargs)
        final = merge_kwargs(
            safe,
            timeout=execution_timeout if execution_timeout else kwargs.get("timeout"),
            startup_timeout=start_timeout,
            kernel_name=kernel_name,
            log=papermill_logger,
            log_output=log_output,
            stdout_file=stdout_file,
            stderr_file=stderr_file,
        )
        client = WatchedClient(nb_man, on_lost_reply=_lost_reply_reporter(nb_man.nb, stream), **final)
        if reply_grace is not None:
            client.reply_grace = reply_grace
        try:
            return client.execute()
        except DeadKernelError:
            index = client.current_cell
            raise KernelDied(_cell_labels(nb_man.nb)(index) if index is not None else "a cell",
                             client.kernel_exit) from None  # fmt: skip


papermill_engines.register(ENGINE_NAME, ProgressEngine)
