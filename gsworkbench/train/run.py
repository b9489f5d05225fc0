"""A whole training run: :func:`train` trains, evaluates and writes its results folder, and keeps
what it did when it is interrupted (Ctrl-C, SIGTERM) or diverges."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gsworkbench.core.atomic import remove_stale_temps
from gsworkbench.core.interrupt import deferred_interrupt, signal_name
from gsworkbench.core.runs import new_run_dir
from gsworkbench.core.splats import SplatSet
from gsworkbench.train.config import TrainConfig
from gsworkbench.train.divergence import TrainingDiverged
from gsworkbench.train.evaluate import LPIPS_NOTE
from gsworkbench.train.interrupt import TrainingInterrupted
from gsworkbench.train.output import save_partial, save_run
from gsworkbench.train.trainer import Trainer


@dataclass
class TrainResult:
    """A finished run: the splats, the per-step history, the per-view evaluation and its means."""

    splats: SplatSet
    history: pd.DataFrame
    evaluation: pd.DataFrame
    renders: dict[int, np.ndarray]
    metrics: dict[str, Any]
    config: TrainConfig
    seconds: float
    files: dict[str, Path] = field(default_factory=dict)


def train(
    scene: Any,
    config: TrainConfig | None = None,
    *,
    splats: SplatSet | None = None,
    resume: str | os.PathLike[str] | None = None,
    results_dir: str | os.PathLike[str] | None = None,
    resume_other_data: bool = False,
    resume_hint: str | None = None,
    watch: Callable[[Trainer], object] | None = None,
    watch_every: int = 100,
) -> TrainResult:
    """Trains on ``scene`` and evaluates on its test views.

    With ``results_dir``, writes there: ``history.csv``, ``evaluation.csv``, ``test_<view>.png`` (ground
    truth | render | error), ``splats.ply`` (Inria layout) and ``checkpoint.pt`` (also every
    ``checkpoint_every`` steps or ``checkpoint_minutes`` during the run). ``resume``: a checkpoint file,
    or a results folder holding one; the run goes on from there. A checkpoint trained on other data (its
    scene fingerprint differs from ``scene``'s) is refused with a ValueError, unless
    ``resume_other_data``.

    Ctrl-C (SIGINT) or SIGTERM ends the run after the current step: the history, a checkpoint and the
    splats so far are saved (in ``results_dir``, or a new ``results/<run-id>/``) and
    :class:`TrainingInterrupted` (a KeyboardInterrupt, with the signal as ``signum``) says where and how
    to resume: ``resume_hint`` (``{run_dir}`` stands for the folder) words the how, e.g. for a notebook
    whose ``resume`` parameter does it; by default it names ``train(..., resume=...)``. A diverging run
    raises :class:`TrainingDiverged` naming the step and the likely cause, with its history saved the
    same way.

    ``watch(trainer)`` is called every ``watch_every`` steps, between steps (e.g. a live viewer's
    update); its time counts as the run's.
    """
    cfg = config if config is not None else TrainConfig()
    t0 = time.perf_counter()
    run_dir = Path(results_dir) if results_dir is not None else None
    if run_dir is not None:
        run_dir.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(run_dir / "checkpoint.pt")
    if resume is not None:
        resume = checkpoint_file(resume)
        remove_stale_temps(resume)
        overrides = {"iterations": cfg.iterations} if config else {}
        trainer = Trainer.from_checkpoint(resume, scene, other_data=resume_other_data, **overrides)
    else:
        trainer = Trainer(scene, cfg, splats)
    if watch is not None and (isinstance(watch_every, bool) or not isinstance(watch_every, int) or watch_every < 1):
        raise ValueError(f"watch_every must be a positive int, got {watch_every!r}")
    with deferred_interrupt() as interrupted:

        def stop() -> bool:  # asked after every step: the watcher rides on it
            if watch is not None and trainer.step_index and trainer.step_index % watch_every == 0:
                watch(trainer)
            return interrupted()

        try:
            trainer.run(checkpoint=None if run_dir is None else run_dir / "checkpoint.pt", stop=stop)
        except TrainingDiverged as err:
            raise _diverged(err, trainer, run_dir) from None
        except KeyboardInterrupt:  # a second Ctrl-C mid-step: the parameters may be half-updated
            raise _interrupted(trainer, run_dir, False, interrupted.signum, resume_hint) from None
        if interrupted():
            raise _interrupted(trainer, run_dir, True, interrupted.signum, resume_hint) from None
    seconds = time.perf_counter() - t0
    evaluation, renders = trainer.evaluate()
    hist = trainer.history
    metrics = {
        "psnr_db": float(evaluation["psnr_db"].mean()) if len(evaluation) else float("nan"),
        "ssim": float(evaluation["ssim"].mean()) if len(evaluation) else float("nan"),
        "psnr_cc_db": float(evaluation["psnr_cc_db"].mean()) if len(evaluation) else float("nan"),
        "psnr_background_db": float(evaluation["psnr_background_db"].mean()) if len(evaluation) else float("nan"),
        "ssim_background": float(evaluation["ssim_background"].mean()) if len(evaluation) else float("nan"),
        "lpips": LPIPS_NOTE,
        "num_gaussians": len(trainer.model),
        "iterations": trainer.step_index,
        "train_seconds": seconds,
        "median_step_ms": float(hist["t_step"].median() * 1e3) if len(hist) else float("nan"),
        "init_rule": str(trainer.init_info.get("rule")),
        "scene_sha256": trainer.scene_fingerprint["sha256"][:16],  # metrics.json has the whole fingerprint
    }
    if trainer.poses is not None:  # how far the training views' poses moved
        metrics.update(trainer.poses.summary(trainer.scene.train_ids))
    result = TrainResult(trainer.splats(), hist, evaluation, renders, metrics, trainer.cfg, seconds)
    if run_dir is not None:
        result.files = save_run(result, trainer, run_dir)
    return result


def checkpoint_file(path: str | os.PathLike[str]) -> Path:
    """``path`` itself, or ``path/checkpoint.pt`` when ``path`` is a results folder."""
    path = Path(path)
    return path / "checkpoint.pt" if path.is_dir() else path


def _interrupted(
    trainer: Trainer, run_dir: Path | None, consistent: bool, signum: int | None, hint: str | None = None
) -> TrainingInterrupted:
    """Saves what an interrupted run did and returns the exception that says where it is (and, for a
    signal other than SIGINT, which one stopped it)."""
    with deferred_interrupt():  # one more Ctrl-C while saving does not lose the files
        run_dir = run_dir if run_dir is not None else new_run_dir("train")
        files = save_partial(trainer, run_dir, checkpoint=consistent)
    step, end = trainer.step_index, trainer.cfg.iterations
    kept = ", ".join(p.name for p in files.values())
    if "checkpoint" in files:
        how = f"resume with train(scene, config, resume='{run_dir}', results_dir='{run_dir}')"
        if hint is not None:
            how = hint.format(run_dir=run_dir)
    else:
        how = "interrupted mid-step, so no checkpoint was written"
    signum = signal.SIGINT if signum is None else signum
    by = "" if signum == signal.SIGINT else f" by {signal_name(signum)}"
    msg = f"training interrupted{by} after step {step} of {end}: kept {kept} in {run_dir}; {how}"
    return TrainingInterrupted(msg, step, run_dir, files, signum)


def _diverged(err: TrainingDiverged, trainer: Trainer, run_dir: Path | None) -> TrainingDiverged:
    """Saves the history of a diverged run (not its blown-up parameters) and says where it is."""
    run_dir = run_dir if run_dir is not None else new_run_dir("train")
    out = TrainingDiverged(f"{err} (history so far: {run_dir / 'history.csv'})", err.step, err.what)
    out.files = save_partial(trainer, run_dir, checkpoint=False)
    return out
