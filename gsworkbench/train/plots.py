"""Figures of a training run (notebook 02): dataset views, training curves, test views, stage times."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from gsworkbench.core.figures import STAGE_NAMES, stage_colors
from gsworkbench.train.timers import STAGES


def dataset_views(scene: Any, count: int = 6) -> Any:
    """A row of training views, each titled with its index."""
    import matplotlib.pyplot as plt

    ids = scene.train_ids[:count].tolist()
    fig, axes = plt.subplots(1, len(ids), figsize=(2.2 * len(ids), 2.4), squeeze=False)
    for ax, v in zip(axes[0], ids):
        ax.imshow(scene.images[v].cpu().numpy().clip(0, 1))
        ax.set_title(f"train view {v}", fontsize=9)
        ax.axis("off")
    fig.suptitle(f"scene '{scene.name}': {len(scene.train_ids)} train / {len(scene.test_ids)} test views, "
                 f"{scene.width}x{scene.height} px", fontsize=10)  # fmt: skip
    return fig


def training_curves(history: pd.DataFrame) -> Any:
    """Loss, PSNR (train view of each step, and test views where evaluated) and Gaussian count per step."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
    smooth = max(1, len(history) // 50)
    axes[0].plot(history["step"], history["loss"], lw=0.6, alpha=0.4, label="per step")
    axes[0].plot(history["step"], history["loss"].rolling(smooth, min_periods=1).mean(), lw=1.5,
                 label=f"mean of {smooth}")  # fmt: skip
    axes[0].set(xlabel="step", ylabel="loss (0.8 L1 + 0.2 (1 - SSIM))", yscale="log", title="loss")
    axes[1].plot(history["step"], history["psnr_db"].rolling(smooth, min_periods=1).mean(), label="train view")
    if "test_psnr_db" in history:
        t = history.dropna(subset=["test_psnr_db"])
        axes[1].plot(t["step"], t["test_psnr_db"], "o-", label="test views")
    axes[1].set(xlabel="step", ylabel="PSNR (dB)", title="PSNR")
    axes[2].plot(history["step"], history["num_gaussians"])
    axes[2].set(xlabel="step", ylabel="Gaussians", title="Gaussian count")
    for ax in axes[:2]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def test_views(scene: Any, renders: dict[int, np.ndarray], evaluation: pd.DataFrame, count: int = 3) -> Any:
    """Ground truth, render and absolute error (with a colorbar) for up to ``count`` test views."""
    import matplotlib.pyplot as plt

    views = list(renders)[:count]
    fig, axes = plt.subplots(len(views), 3, figsize=(9.5, 3.0 * len(views)), squeeze=False)
    scores = evaluation.set_index("view")
    for row, v in zip(axes, views):
        truth = scene.images[v].cpu().numpy().clip(0, 1)
        render = renders[v].astype(np.float32) / 255
        err = np.abs(truth - render).mean(-1)
        row[0].imshow(truth)
        row[0].set_title(f"view {v}: ground truth", fontsize=9)
        row[1].imshow(render)
        row[1].set_title(f"render: {scores.loc[v, 'psnr_db']:.2f} dB, SSIM {scores.loc[v, 'ssim']:.3f}", fontsize=9)
        im = row[2].imshow(err, cmap="magma", vmin=0, vmax=max(float(err.max()), 1e-3))
        row[2].set_title("|error| (mean over RGB)", fontsize=9)
        fig.colorbar(im, ax=row[2], fraction=0.046, pad=0.04, label="absolute error (0-1 scale)")
        for ax in row:
            ax.axis("off")
    fig.tight_layout()
    return fig


def stage_table(history: pd.DataFrame, skip: int = 5) -> pd.DataFrame:
    """Median milliseconds per stage over the steps after the first ``skip`` (warm-up), with its share."""
    h = history.iloc[skip:] if len(history) > skip else history
    ms = {s: float(h[f"t_{s}"].median() * 1e3) for s in STAGES}
    step = float(h["t_step"].median() * 1e3)
    rows = [
        {"stage": STAGE_NAMES[s], "median_ms": v, "share": v / step if step else float("nan")} for s, v in ms.items()
    ]
    rows.append({"stage": "other (bookkeeping)", "median_ms": step - sum(ms.values()),
                 "share": (step - sum(ms.values())) / step if step else float("nan")})  # fmt: skip
    rows.append({"stage": "whole step", "median_ms": step, "share": 1.0})
    return pd.DataFrame(rows)


def stage_bars(tables: dict[str, pd.DataFrame], title: str) -> Any:
    """Stacked horizontal bars of median ms per stage, one bar per run (e.g. per backend), the whole
    step's milliseconds written beside each bar; :func:`stage_table` gives the numbers of small stages."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, max(2.8, 0.9 + 0.7 * len(tables))))
    names = list(tables)
    stages = [s for s in tables[names[0]]["stage"] if s != "whole step"]
    colors = stage_colors(stages, other="other (bookkeeping)")
    for y, name in enumerate(names):
        t = tables[name].set_index("stage")
        left = 0.0
        for s in stages:
            v = max(float(t.loc[s, "median_ms"]), 0.0)
            ax.barh(y, v, left=left, color=colors[s], label=s if y == 0 else None)
            left += v
        ax.text(left, y, f"  {float(t.loc['whole step', 'median_ms']):.2f} ms/step", va="center", fontsize=8)
    ax.set_yticks(range(len(names)), names)
    ax.set_xlim(0, 1.2 * max(float(t.set_index("stage").loc["whole step", "median_ms"]) for t in tables.values()))
    ax.set_xlabel("median time per training step (ms)")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    return fig
