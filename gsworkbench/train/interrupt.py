"""Ctrl-C or SIGTERM during training: finish the step, keep what was done, say where it is.

:func:`gsworkbench.train.train` runs its loop under :func:`gsworkbench.core.interrupt.deferred_interrupt`:
the first SIGINT or SIGTERM ends the run after the current step, so the parameters, Adam's moments and the history
describe the same completed step when they are saved. :class:`TrainingInterrupted` is the
``KeyboardInterrupt`` it raises once it has saved the partial run; its message names the files and how
to resume.
"""

from __future__ import annotations

import signal
from pathlib import Path


class TrainingInterrupted(KeyboardInterrupt):
    """A training run stopped by Ctrl-C (or the signal ``signum``) after ``step`` steps; ``files`` were
    saved in ``run_dir``."""

    def __init__(
        self, message: str, step: int, run_dir: Path | None, files: dict[str, Path], signum: int = signal.SIGINT
    ) -> None:
        super().__init__(message)
        self.step = step
        self.run_dir = run_dir
        self.files = files
        self.signum = signum

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "training interrupted"
