"""A clock that only the code under test moves, for tests of timing statistics that must not depend on
how busy the machine is (CI and users share their cores with other work)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from torch.utils._python_dispatch import TorchDispatchMode


class FakeClock:
    """Seconds as a number that :meth:`work` advances; pass it as ``clock=`` to the bench runner.

    Each call of ``work(seconds)`` takes ``seconds`` times a fixed-seed lognormal factor of spread
    ``jitter`` (0.02: 2%), so samples have a realistic, reproducible spread and nothing else can
    stretch them."""

    def __init__(self, seed: int = 0, jitter: float = 0.02) -> None:
        self.now = 0.0
        self.rng = np.random.default_rng(seed)
        self.jitter = jitter

    def __call__(self) -> float:
        return self.now

    def work(self, seconds: float) -> None:
        self.now += seconds * float(self.rng.lognormal(0.0, self.jitter))

    def case(self, seconds: float) -> Callable[[], Callable[[], None]]:
        """A bench case's setup whose call takes ``seconds`` on this clock."""
        return lambda: (lambda: self.work(seconds))


class OpClock(TorchDispatchMode):
    """A clock that ticks once per torch op dispatched while it is entered (``with clock:``), forward
    and backward, the extension's ops included: "seconds" that measure the work the code under test
    hands to torch, the same on a busy machine as on a quiet one.

    Stage coverage on this clock (the share of the ops that ran inside a named stage) checks the
    structure a wall-time coverage stands for, that the stages hold the work, without its noise."""

    def __init__(self) -> None:
        super().__init__()
        self.ops = 0

    def __call__(self) -> float:
        return float(self.ops)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        self.ops += 1
        return func(*args, **(kwargs or {}))
