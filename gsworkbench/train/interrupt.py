"""Ctrl-C during training: finish the step, keep what was done, say where it is.

:func:`deferred_interrupt` turns the first SIGINT (Ctrl-C in a terminal, "interrupt kernel" in
Jupyter) into a flag that the training loop reads between steps, so the parameters, Adam's moments and
the history always describe the same completed step when they are saved. A second SIGINT raises
``KeyboardInterrupt`` at once, as usual. Outside the main thread (where Python delivers signals) it
changes nothing: a ``KeyboardInterrupt`` then arrives wherever the code is, and is handled the same
way after the fact.

:class:`TrainingInterrupted` is the ``KeyboardInterrupt`` that :func:`gsworkbench.train.train` raises
once it has saved the partial run; its message names the files and how to resume.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path


class TrainingInterrupted(KeyboardInterrupt):
    """A training run stopped by Ctrl-C after ``step`` steps; ``files`` were saved in ``run_dir``."""

    def __init__(self, message: str, step: int, run_dir: Path | None, files: dict[str, Path]) -> None:
        super().__init__(message)
        self.step = step
        self.run_dir = run_dir
        self.files = files

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "training interrupted"


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[Callable[[], bool]]:
    """While active, yields ``interrupted()``: True once a SIGINT arrived. The first SIGINT only sets
    that flag; a second raises KeyboardInterrupt. The previous handler is restored on exit."""
    hits = [0]
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return

    def handler(signum: int, frame: object) -> None:
        hits[0] += 1
        if hits[0] > 1:
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield lambda: hits[0] > 0
    finally:
        signal.signal(signal.SIGINT, previous)
