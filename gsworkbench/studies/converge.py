"""Time to held-out PSNRs: train until the test views reach each of a few targets, counting training time only.

:class:`ConvergeRun` steps a :class:`gsworkbench.train.Trainer` in slices of ``eval_every`` steps and
evaluates after each slice: it renders held-out views at full resolution (over the config's evaluation
background, as :meth:`Trainer.evaluate` does) and takes their mean PSNR. The run goes on past the first
target until every target (``targets_db``) is reached, or ``max_steps`` steps or ``max_seconds`` of
training have been spent. Only the training steps are on the clock (``time.perf_counter`` around each
slice of steps): the evaluations, the trainer's construction and the initial splats are not. So the
time to a target is the training time up to the end of the first slice whose evaluation reached it,
and its steps that slice's last step count (both resolved to ``eval_every`` steps).

Evaluating every test view after every slice would cost a share of the run that grows with the view
count and image size (at 800 px each view is a full-size render), so between full evaluations only a
fixed *probe* of ``probe_views`` test views, spread evenly over the test set, is rendered. A full
evaluation (every test view) is made:

- at the first evaluation, which sets the offset below;
- when the probe, corrected by the offset between the full set and the probe at the last full
  evaluation, comes within ``margin_db`` of the lowest target not yet reached;
- every ``full_every`` slices otherwise, which keeps that offset current;
- after the last slice.

A target counts as reached only on a full evaluation, so every PSNR reported at a target, and the
final one, is the whole test set's; the curve says how many views each point averaged. The share of
the wall time the evaluations took is measured (``eval_seconds``, ``eval_share``).

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
from collections.abc import Callable, Sequence
from typing import Any

import torch

from gsworkbench.core.figures import add_footer
from gsworkbench.core.limits import retained_freed_memory
from gsworkbench.train.background import over_background
from gsworkbench.train.losses import psnr


def target_label(target_db: float) -> str:
    """The column suffix of a target: ``30db`` for 30.0 dB, ``32.5db`` for 32.5."""
    return f"{target_db:g}db"


def spread_views(views: Sequence[int], count: int) -> list[int]:
    """``count`` of ``views`` spread evenly over the list (all of them when ``count`` >= their number)."""
    if count >= len(views):
        return list(views)
    return [views[int((k + 0.5) * len(views) / count)] for k in range(count)]


class ConvergeRun:
    """Trains ``trainer`` until its held-out PSNR reaches every one of ``targets_db`` (dB; one number or
    several), or ``max_steps`` steps or ``max_seconds`` seconds of training; evaluates every
    ``eval_every`` steps, on ``probe_views`` test views between full evaluations (module doc).
    ``log``: called with a line after each evaluation (None: quiet). ``clock``: seconds (tests pass a
    fake one)."""

    def __init__(
        self,
        trainer: Any,
        targets_db: float | Sequence[float],
        *,
        eval_every: int,
        max_steps: int,
        max_seconds: float = math.inf,
        probe_views: int = 3,
        full_every: int = 10,
        margin_db: float = 0.5,
        log: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if len(trainer.scene.test_ids) == 0:
            raise ValueError(f"scene {trainer.scene.name!r} has no held-out views to measure PSNR on")
        for name, value in (("eval_every", eval_every), ("max_steps", max_steps), ("probe_views", probe_views),
                            ("full_every", full_every)):  # fmt: skip
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if not max_seconds > 0:
            raise ValueError(f"max_seconds must be > 0, got {max_seconds!r}")
        if not margin_db >= 0:
            raise ValueError(f"margin_db must be >= 0, got {margin_db!r}")
        targets = [float(targets_db)] if isinstance(targets_db, (int, float)) else [float(t) for t in targets_db]
        if not targets or not all(math.isfinite(t) for t in targets):
            raise ValueError(f"targets_db must be one or more finite numbers (dB), got {targets_db!r}")
        self.trainer = trainer
        self.targets = sorted(set(targets))
        self.eval_every, self.max_steps, self.max_seconds = eval_every, max_steps, float(max_seconds)
        self.full_every, self.margin_db = full_every, float(margin_db)
        self.log = log
        self.clock = clock
        self.test_ids = [int(v) for v in trainer.scene.test_ids.tolist()]
        self.probe = spread_views(self.test_ids, probe_views)
        self.refs = {v: over_background(trainer.scene, v, trainer.eval_bg) for v in self.test_ids}
        self.train_seconds = 0.0
        self.eval_seconds = 0.0
        # (steps, training seconds, PSNR dB, views averaged) per evaluation
        self.curve: list[tuple[int, float, float, int]] = []
        self.reached: dict[float, tuple[int, float]] = {}  # target -> (steps, seconds) of the first full eval at it
        self.offset_db = 0.0  # full set minus probe, at the last full evaluation
        self.slices_since_full = 0
        self.full_evals = 0
        self.done = False

    @property
    def target_db(self) -> float:
        """The lowest target (the one of ``seconds_to_target``)."""
        return self.targets[0]

    def view_psnrs(self, views: Sequence[int]) -> list[float]:
        """The PSNR (dB) of each of ``views`` (scene indices), rendered at full resolution."""
        t = self.trainer
        with torch.no_grad():
            return [psnr(t.render([v], background=t.eval_bg)[0][0].clamp(0, 1), self.refs[v]) for v in views]

    def test_psnr(self) -> float:
        """The mean PSNR (dB) of all the held-out views, rendered at full resolution."""
        values = self.view_psnrs(self.test_ids)
        return float(sum(values) / len(values))

    def _evaluate(self, last: bool) -> tuple[float, int]:
        """The slice's evaluation: the probe, and the whole test set when due (module doc). Returns the
        mean PSNR (dB) and the number of views it averages."""
        probe = dict(zip(self.probe, self.view_psnrs(self.probe)))
        probe_mean = sum(probe.values()) / len(probe)
        pending = [t for t in self.targets if t not in self.reached]
        near = bool(pending) and probe_mean + self.offset_db >= pending[0] - self.margin_db
        due = self.full_evals == 0 or self.slices_since_full + 1 >= self.full_every
        full = len(self.probe) == len(self.test_ids) or last or near or due
        if not full:
            self.slices_since_full += 1
            return probe_mean, len(probe)
        rest = [v for v in self.test_ids if v not in probe]
        values = [*probe.values(), *self.view_psnrs(rest)]
        mean = sum(values) / len(values)
        self.offset_db = mean - probe_mean
        self.slices_since_full = 0
        self.full_evals += 1
        return mean, len(values)

    def __call__(self) -> bool:
        """One slice: ``eval_every`` training steps (fewer at the step cap), then an evaluation. Returns
        True when the run is over (every target reached, or a cap hit)."""
        if self.done:
            return True
        t = self.trainer
        n = min(self.eval_every, self.max_steps - t.step_index)
        t0 = self.clock()
        with retained_freed_memory():  # the malloc policy of Trainer.run
            for _ in range(n):
                t.step()
        t1 = self.clock()
        self.train_seconds += t1 - t0
        capped = t.step_index >= self.max_steps or self.train_seconds >= self.max_seconds
        value, views = self._evaluate(last=capped)
        if views == len(self.test_ids):
            for target in self.targets:
                if value >= target and target not in self.reached:
                    self.reached[target] = (t.step_index, self.train_seconds)
        all_reached = len(self.reached) == len(self.targets)
        self.eval_seconds += self.clock() - t1
        self.curve.append((t.step_index, self.train_seconds, value, views))
        self.done = all_reached or capped
        if self.log is not None:
            self.log(f"step {t.step_index}: {self.train_seconds:.1f} s of training, test {value:.2f} dB "
                     f"({views} of {len(self.test_ids)} views)")  # fmt: skip
        return self.done

    def run(self) -> dict[str, Any]:
        """Slices until the run is over; returns :meth:`extras`."""
        while not self():
            pass
        return self.extras()

    def extras(self) -> dict[str, Any]:
        """The result columns: ``reached``, ``steps_to_target`` and ``seconds_to_target`` of the lowest
        target (NaN when not reached); for every target, ``steps_to_<t>db`` and ``minutes_to_<t>db`` (NaN
        when not reached within the caps); ``final_test_psnr_db`` (the last, full evaluation) and
        ``best_test_psnr_db`` (of the full evaluations), ``steps`` and ``train_seconds`` run,
        ``ms_per_step`` (their mean), the median step time per resolution factor (``ms_step_f<k>``),
        ``gaussians`` at the end; ``eval_seconds`` (all evaluations), ``eval_share`` (their share of
        training plus evaluation time), ``probe_views`` and ``full_evals`` (how many evaluations used
        every test view); and ``curve`` (JSON list of [steps, training seconds, test PSNR dB, views
        averaged] per evaluation)."""
        t = self.trainer
        rows = t.rows
        steps = t.step_index
        first = self.reached.get(self.target_db)
        full = [c[2] for c in self.curve if c[3] == len(self.test_ids)]
        out: dict[str, Any] = {
            "reached": first is not None,
            "steps_to_target": first[0] if first else math.nan,
            "seconds_to_target": first[1] if first else math.nan,
        }
        for target in self.targets:
            hit = self.reached.get(target)
            out[f"steps_to_{target_label(target)}"] = hit[0] if hit else math.nan
            out[f"minutes_to_{target_label(target)}"] = hit[1] / 60 if hit else math.nan
        total = self.train_seconds + self.eval_seconds
        out.update({
            "final_test_psnr_db": full[-1] if full else math.nan,
            "best_test_psnr_db": max(full, default=math.nan),
            "steps": steps,
            "train_seconds": self.train_seconds,
            "ms_per_step": self.train_seconds / steps * 1e3 if steps else math.nan,
            "eval_seconds": self.eval_seconds,
            "eval_share": self.eval_seconds / total if total > 0 else math.nan,
            "probe_views": len(self.probe),
            "full_evals": len(full),
        })  # fmt: skip
        factors = [int(r.get("resolution_factor", 1)) for r in rows]
        for f in sorted(set(factors)):
            out[f"ms_step_f{f}"] = statistics.median(r["t_step"] for r, k in zip(rows, factors) if k == f) * 1e3
        out["gaussians"] = len(t.model)
        out["curve"] = json.dumps([[s, round(sec, 3), round(db, 3), v] for s, sec, db, v in self.curve])
        return out


def curve_points(curve: str | Sequence[Sequence[float]]) -> list[tuple[int, float, float, int | None]]:
    """The evaluations of a ``curve`` column (JSON text or its list): (steps, training seconds, dB, views
    averaged or None for curves written before the probe)."""
    points = json.loads(curve) if isinstance(curve, str) else curve
    return [(int(p[0]), float(p[1]), float(p[2]), int(p[3]) if len(p) > 3 else None) for p in points]


def plot_converge_curves(table: Any, footer: str | None = None) -> Any:
    """Test PSNR (dB) against minutes of training, one line per case of a ``converge`` results table
    (its ``curve`` column; cases named by size, preset, schedule and init scale). Full-set evaluations
    are the line's markers; probe evaluations (a subset of the test views) lie on the line between
    them. The targets are dotted horizontal lines; the legend sits right of the axes."""
    import matplotlib.pyplot as plt

    if "curve" not in table or not len(table):
        raise ValueError("the table has no converge curves (a 'curve' column with rows)")
    fig, ax = plt.subplots(figsize=(8.0, 4.5))
    targets: set[float] = set()
    for row in table.to_dict("records"):
        if not isinstance(row.get("curve"), str):
            continue
        points = curve_points(row["curve"])
        if not points:
            continue
        label = _case_label(row)
        minutes = [p[1] / 60 for p in points]
        (line,) = ax.plot(minutes, [p[2] for p in points], "-", lw=1.4, label=label)
        most = max((p[3] or 0) for p in points)
        full = [(m, p[2]) for m, p in zip(minutes, points) if p[3] is None or p[3] == most]
        ax.plot([m for m, _ in full], [d for _, d in full], "o", ms=3.5, color=line.get_color())
        for key in row:
            if key.startswith("minutes_to_") and key.endswith("db"):
                targets.add(float(key.removeprefix("minutes_to_").removesuffix("db")))
    for t in sorted(targets):
        ax.axhline(t, color="0.6", lw=0.8, ls=":", zorder=0)
    ax.set_xlabel("training time (wall-clock minutes, evaluations excluded)")
    ax.set_ylabel("held-out PSNR (dB)")
    ax.set_title("time to a held-out PSNR (markers: every test view; line between: the probe views)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    if footer:
        add_footer(fig, text=footer)
    return fig


def _case_label(row: dict[str, Any]) -> str:
    parts = [f"{row['width']}x{row['height']}" if "width" in row else "", str(row.get("preset") or "")]
    schedule = row.get("schedule")
    parts.append(f"schedule {schedule}" if isinstance(schedule, str) and schedule != "off" else "full size")
    scale = row.get("init_scale")
    if isinstance(scale, (int, float)) and not math.isnan(scale):
        parts.append(f"init scale {scale:g}")
    return ", ".join(p for p in parts if p)


def stderr_log(prefix: str) -> Callable[[str], None]:
    """A ``log`` for :class:`ConvergeRun` that prints ``prefix: line`` to stderr."""

    def log(line: str) -> None:
        print(f"{prefix}: {line}", file=sys.stderr, flush=True)

    return log
