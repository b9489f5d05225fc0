"""Per-stage wall-clock timers for training steps (and ``torch.profiler`` ranges for profiles)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

import torch

# The stages of one training step, in order: "prepare" picks the view, composites its target over the
# background, sets the learning rates and activates the parameters (exp scales, sigmoid opacities);
# the forward stages are timed inside ``rasterize`` ("project" includes its input checks).
STAGES = ("prepare", "project", "sh", "isect", "rasterize", "loss", "backward", "optimizer", "densify")


class StageTimer:
    """Accumulates seconds per stage name; ``stage(name)`` is the context manager to time one.

    ``sync``: wait for the device before reading the clock (CUDA), so each stage's time is its own.
    ``ranges``: also open a ``torch.profiler.record_function`` range per stage, for profiles.
    ``clock``: seconds (tests pass a fake one, so that no assertion depends on how busy the machine is).
    """

    def __init__(
        self, device: torch.device | str = "cpu", ranges: bool = False, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self.sync = torch.device(device).type == "cuda"
        self.ranges = ranges
        self.clock = clock
        self.times: dict[str, float] = {}

    def reset(self) -> dict[str, float]:
        """Returns the times so far and starts again."""
        out, self.times = self.times, {}
        return out

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        if self.sync:
            torch.cuda.synchronize()
        # the clock starts before the profiler range opens and stops after it closes, so the ranges' own
        # cost is counted in their stage, not left between the stages as unexplained time
        t0 = self.clock()
        try:
            with torch.profiler.record_function(f"stage:{name}") if self.ranges else contextlib.nullcontext():
                yield
                if self.sync:
                    torch.cuda.synchronize()
        finally:
            self.times[name] = self.times.get(name, 0.0) + self.clock() - t0
