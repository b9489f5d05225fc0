"""Ctrl-C and SIGTERM that finish what they interrupt: :func:`deferred_interrupt`.

The first SIGINT (Ctrl-C in a terminal, "interrupt kernel" in Jupyter) or SIGTERM (what ``timeout``,
``docker stop``, Slurm and Kubernetes send) only sets a flag, which the interrupted work reads at a safe
point (a training loop between steps, a notebook runner between cells), and calls ``on_first`` (e.g. to
pass the interrupt on to a kernel). A second one raises ``KeyboardInterrupt`` at once. Which signal came
first is :attr:`Interrupted.signum`, so that a command can exit with the conventional ``128 + signal``
(130 for SIGINT, 143 for SIGTERM). Outside the main thread, where Python delivers no signals, it changes
nothing.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)


def signal_name(signum: int) -> str:
    """``SIGTERM`` for 15, and so on."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class Interrupted:
    """``interrupted()`` is True once a signal arrived; ``signum`` is the first one (None before)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.hits = 0

    def __call__(self) -> bool:
        return self.hits > 0


@contextlib.contextmanager
def deferred_interrupt(
    on_first: Callable[[], object] | None = None, signals: tuple[int, ...] = SIGNALS
) -> Iterator[Interrupted]:
    """While active, yields an :class:`Interrupted`: true once one of ``signals`` arrived. The previous
    Python handlers are restored on exit; one installed outside Python (glog's stack-dumping handler,
    which pycolmap brings in) cannot be, and the signal's default action takes its place."""
    state = Interrupted()
    if threading.current_thread() is not threading.main_thread():
        yield state
        return

    def handler(signum: int, frame: object) -> None:
        state.hits += 1
        if state.hits > 1:
            raise KeyboardInterrupt
        state.signum = signum
        if on_first is not None:
            on_first()

    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield state
    finally:
        for s, h in previous.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)
