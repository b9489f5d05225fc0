"""Time to a held-out PSNR: train until the test views reach a target, counting training time only.

:class:`ConvergeRun` steps a :class:`gsworkbench.train.Trainer` in slices of ``eval_every`` steps; after
each slice it renders the held-out views at full resolution (over the config's evaluation background,
as :meth:`Trainer.evaluate` does) and takes their mean PSNR. The run ends at the first evaluation at or
above ``target_db``, or when ``max_steps`` steps or ``max_seconds`` of training have been spent.
Only the training steps are on the clock (``time.perf_counter`` around each slice of steps): the
evaluations, the trainer's construction and the initial splats are not. So ``seconds_to_target`` is
the training time up to the end of the first slice whose evaluation reached the target, and
``steps_to_target`` that slice's last step count (both resolved to ``eval_every`` steps).

Each call does one slice and returns True when the run is over, the protocol of a self-measuring
benchmark case (:attr:`gsworkbench.bench.registry.Case.measured`), so that runs to compare can be
interleaved slice by slice; :meth:`ConvergeRun.run` goes to the end in one call.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from gsworkbench.memory import retained_freed_memory


class ConvergeRun:
    """Trains ``trainer`` until its held-out PSNR reaches ``target_db`` (dB), or ``max_steps`` steps or
    ``max_seconds`` seconds of training; evaluates every ``eval_every`` steps. ``log``: called with a
    line after each evaluation (None: quiet). ``clock``: seconds (tests pass a fake one)."""

    def __init__(
        self,
        trainer: Any,
        target_db: float,
        *,
        eval_every: int,
        max_steps: int,
        max_seconds: float = math.inf,
        log: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if len(trainer.scene.test_ids) == 0:
            raise ValueError(f"scene {trainer.scene.name!r} has no held-out views to measure PSNR on")
        for name, value in (("eval_every", eval_every), ("max_steps", max_steps)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if not max_seconds > 0:
            raise ValueError(f"max_seconds must be > 0, got {max_seconds!r}")
        from gsworkbench.train.background import over_background

        self.trainer = trainer
        self.target_db = float(target_db)
        self.eval_every, self.max_steps, self.max_seconds = eval_every, max_steps, float(max_seconds)
        self.log = log
        self.clock = clock
        self.test_ids = [int(v) for v in trainer.scene.test_ids.tolist()]
        self.refs = {v: over_background(trainer.scene, v, trainer.eval_bg) for v in self.test_ids}
        self.train_seconds = 0.0
        self.curve: list[tuple[int, float, float]] = []  # (steps, training seconds, test PSNR dB) per evaluation
        self.reached: tuple[int, float] | None = None  # (steps, seconds) of the first evaluation at the target
        self.done = False

    def test_psnr(self) -> float:
        """The mean PSNR (dB) of the held-out views, rendered at full resolution."""
        from gsworkbench.train.losses import psnr

        t = self.trainer
        with torch.no_grad():
            values = [psnr(t.render([v], background=t.eval_bg)[0][0].clamp(0, 1), self.refs[v]) for v in self.test_ids]
        return float(sum(values) / len(values))

    def __call__(self) -> bool:
        """One slice: ``eval_every`` training steps (fewer at the step cap), then an evaluation. Returns
        True when the run is over (target reached, or a cap hit)."""
        if self.done:
            return True
        t = self.trainer
        n = min(self.eval_every, self.max_steps - t.step_index)
        t0 = self.clock()
        with retained_freed_memory():  # the malloc policy of Trainer.run
            for _ in range(n):
                t.step()
        self.train_seconds += self.clock() - t0
        value = self.test_psnr()
        self.curve.append((t.step_index, self.train_seconds, value))
        if value >= self.target_db and self.reached is None:
            self.reached = (t.step_index, self.train_seconds)
        self.done = self.reached is not None or t.step_index >= self.max_steps or self.train_seconds >= self.max_seconds
        if self.log is not None:
            self.log(f"step {t.step_index}: {self.train_seconds:.1f} s of training, test {value:.2f} dB")
        return self.done

    def run(self) -> dict[str, Any]:
        """Slices until the run is over; returns :meth:`extras`."""
        while not self():
            pass
        return self.extras()

    def extras(self) -> dict[str, Any]:
        """The result columns: ``reached``, ``steps_to_target`` and ``seconds_to_target`` (NaN when the
        target was not reached), ``final_test_psnr_db`` (the last evaluation) and ``best_test_psnr_db``,
        ``steps`` and ``train_seconds`` run, ``ms_per_step`` (their mean), the median step time per
        resolution factor (``ms_step_f<k>``), ``gaussians`` at the end, and ``curve`` (JSON list of
        [steps, training seconds, test PSNR dB] per evaluation)."""
        t = self.trainer
        rows = t.rows
        steps = t.step_index
        out: dict[str, Any] = {
            "reached": self.reached is not None,
            "steps_to_target": self.reached[0] if self.reached else math.nan,
            "seconds_to_target": self.reached[1] if self.reached else math.nan,
            "final_test_psnr_db": self.curve[-1][2] if self.curve else math.nan,
            "best_test_psnr_db": max((c[2] for c in self.curve), default=math.nan),
            "steps": steps,
            "train_seconds": self.train_seconds,
            "ms_per_step": self.train_seconds / steps * 1e3 if steps else math.nan,
        }
        factors = [int(r.get("resolution_factor", 1)) for r in rows]
        for f in sorted(set(factors)):
            out[f"ms_step_f{f}"] = statistics.median(r["t_step"] for r, k in zip(rows, factors) if k == f) * 1e3
        out["gaussians"] = len(t.model)
        out["curve"] = json.dumps([[s, round(sec, 3), round(db, 3)] for s, sec, db in self.curve])
        return out


def stderr_log(prefix: str) -> Callable[[str], None]:
    """A ``log`` for :class:`ConvergeRun` that prints ``prefix: line`` to stderr."""

    def log(line: str) -> None:
        print(f"{prefix}: {line}", file=sys.stderr, flush=True)

    return log
