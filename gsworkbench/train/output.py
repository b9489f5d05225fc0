"""What a training run leaves in its results folder."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

from gsworkbench.core.atomic import atomic_write_bytes, write_json, write_table
from gsworkbench.io.ply import write_ply
from gsworkbench.train.background import over_background


def _png(path: Path, image: np.ndarray) -> Path:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG")
    return atomic_write_bytes(path, buf.getvalue())


def comparison_image(truth: np.ndarray, render: np.ndarray) -> np.ndarray:
    """Ground truth | render | |error| x 4, side by side (uint8 [H, 3W, 3])."""
    err = np.clip(np.abs(truth.astype(np.int32) - render.astype(np.int32)) * 4, 0, 255).astype(np.uint8)
    return np.concatenate([truth, render, err], axis=1)


def run_record(trainer: Any, config: Any) -> dict[str, Any]:
    """What metrics.json says besides the metrics: the scene's fingerprint (which data the PSNR is of),
    the init rule used and the config."""
    return {"scene": trainer.scene_fingerprint, "init": trainer.init_info, "config": config.to_dict()}


def save_run(result: Any, trainer: Any, run_dir: Path) -> dict[str, Path]:
    """Writes history.csv, evaluation.csv, test_<view>.png (over the evaluation background), splats.ply,
    checkpoint.pt and metrics.json (with :func:`run_record`)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    files = {
        "history": write_table(run_dir / "history.csv", result.history),
        "evaluation": write_table(run_dir / "evaluation.csv", result.evaluation),
        "ply": write_ply(run_dir / "splats.ply", result.splats),
        "checkpoint": trainer.save_checkpoint(run_dir / "checkpoint.pt"),
        "metrics": write_json(run_dir / "metrics.json", {**result.metrics, **run_record(trainer, result.config)}),
    }
    for v, img in result.renders.items():
        truth = (over_background(trainer.scene, v, trainer.eval_bg).cpu().numpy() * 255 + 0.5).astype(np.uint8)
        files[f"test_{v}"] = _png(run_dir / f"test_{v:03d}.png", comparison_image(truth, img))
    return files


def save_partial(trainer: Any, run_dir: Path, checkpoint: bool = True) -> dict[str, Path]:
    """What an interrupted or diverged run keeps: ``history.csv``, and with ``checkpoint`` (the
    parameters describe a completed step) ``checkpoint.pt`` and ``splats.ply``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    files = {"history": write_table(run_dir / "history.csv", trainer.history)}
    if checkpoint:
        files["checkpoint"] = trainer.save_checkpoint(run_dir / "checkpoint.pt")
        files["ply"] = write_ply(run_dir / "splats.ply", trainer.splats())
    return files
