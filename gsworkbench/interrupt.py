"""Ctrl-C that finishes what it interrupts: :func:`deferred_interrupt`.

The first SIGINT (Ctrl-C in a terminal, "interrupt kernel" in Jupyter) only sets a flag, which the
interrupted work reads at a safe point (a training loop between steps, a notebook runner between
cells), and calls ``on_first`` (e.g. to pass the interrupt on to a kernel). A second SIGINT raises
``KeyboardInterrupt`` at once, as usual. Outside the main thread, where Python delivers no signals, it
changes nothing.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def deferred_interrupt(on_first: Callable[[], object] | None = None) -> Iterator[Callable[[], bool]]:
    """While active, yields ``interrupted()``: True once a SIGINT arrived. The previous handler is
    restored on exit."""
    hits = [0]
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return

    def handler(signum: int, frame: object) -> None:
        hits[0] += 1
        if hits[0] > 1:
            raise KeyboardInterrupt
        if on_first is not None:
            on_first()

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield lambda: hits[0] > 0
    finally:
        signal.signal(signal.SIGINT, previous)
