"""Figures of the rasterizer: depth and alpha of rendered views, forward FPS, time per stage
(notebook 03)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from gsworkbench.core.figures import STAGE_NAMES
from gsworkbench.core.provenance import cpu_model


def _count(n: float) -> str:
    n = int(n)
    return f"{n // 1_000_000}M" if n >= 1_000_000 and n % 1_000_000 == 0 else (
        f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n))  # fmt: skip


def spread_views(num_views: int, n_show: int = 3) -> list[int]:
    """``n_show`` view indices spread evenly over an orbit of ``num_views`` (views that differ)."""
    n_show = min(n_show, num_views)
    return sorted({int(i) for i in np.linspace(0, num_views, n_show, endpoint=False)})


def depth_alpha(depth: Any, alpha: Any, views: list[int], num_views: int, min_alpha: float = 0.05) -> Any:
    """Expected depth (top, with a colorbar in scene units) and alpha (bottom) of some views.

    Background convention, the same in both rows: where alpha < ``min_alpha`` nothing is drawn, shown
    black (depth there is undefined; alpha there is ~0, black in the grey scale).
    """
    import matplotlib.pyplot as plt

    d = depth[views].clone()
    a = alpha[views, ..., 0]
    d[a < min_alpha] = float("nan")
    finite = d[~d.isnan()]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.numel() else (0.0, 1.0)
    cmap = plt.get_cmap("viridis").with_extremes(bad="black")
    fig, axes = plt.subplots(2, len(views), figsize=(3.3 * len(views) + 1, 6.2), squeeze=False, layout="constrained")
    for j, v in enumerate(views):
        azimuth = 360 * v / num_views
        im_d = axes[0, j].imshow(d[j].numpy(), cmap=cmap, vmin=lo, vmax=hi)
        axes[0, j].set_title(f"view {v} (azimuth {azimuth:.0f}°): depth", fontsize=9)
        im_a = axes[1, j].imshow(a[j].numpy(), cmap="gray", vmin=0, vmax=1)
        axes[1, j].set_title(f"view {v}: alpha", fontsize=9)
        for ax in axes[:, j]:
            ax.set_xticks([])
            ax.set_yticks([])
    fig.colorbar(im_d, ax=axes[0, :], label="expected depth (scene units)")
    fig.colorbar(im_a, ax=axes[1, :], label="alpha")
    fig.suptitle(f"black: alpha < {min_alpha} (background)", fontsize=9)
    return fig


def fps_plot(bench: pd.DataFrame) -> Any:
    """Forward FPS against Gaussian count (per resolution) and against resolution (per count).

    Ticks sit at the measured values with plain labels; a series of one point is a marker only; error
    bars are the IQR over the timing rounds.
    """
    import matplotlib.pyplot as plt

    fwd = bench[(bench.stage == "forward")].dropna(subset=["median_s"])
    fig, axes = plt.subplots(1, 2, figsize=(12, 4), layout="constrained")
    for ax, (series, x, xlabel) in zip(
        axes, ((["backend", "width"], "num", "Gaussians"), (["backend", "num"], "width", "image size (pixels, square)"))
    ):
        for (b, k), g in fwd.groupby(series):
            g = g.sort_values(x)
            label = f"{b}, {k}²" if series[1] == "width" else f"{b}, N={_count(k)}"
            yerr = (g.fps * g.iqr_s / g.median_s).fillna(0) if "iqr_s" in g else None  # IQR of the rounds
            ax.errorbar(g[x], g.fps, yerr=yerr, fmt="o-" if len(g) > 1 else "o", capsize=2, label=label)
        values = sorted(fwd[x].unique())
        ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel="frames per second (forward)")
        ax.set_xticks(values, [_count(v) if x == "num" else f"{int(v)}²" for v in values])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes[0].set_title("FPS against Gaussian count")
    axes[1].set_title("FPS against resolution")
    return fig


def stage_breakdown(bench: pd.DataFrame, backends: list[str], sh_degree: int) -> Any:
    """Median time per stage: horizontal grouped bars on a log scale (small stages stay visible), one
    group per configuration, labelled on one line ("N=2k, 128×128") so that labels never overlap; one
    panel per backend, stacked on a shared time axis, each as tall as its number of configurations."""
    import matplotlib.pyplot as plt
    import torch
    from matplotlib.ticker import NullFormatter

    order = [s for s in STAGE_NAMES if s in set(bench.stage)]
    tables = {}
    for b in backends:
        sub = bench[(bench.backend == b) & bench.stage.isin(order)].dropna(subset=["median_s"])
        if sub.empty:
            continue
        configs = [f"N={_count(n)}, {int(w)}×{int(h)}" for n, w, h in zip(sub.num, sub.width, sub.height)]
        table = sub.assign(config=configs).pivot_table(index="config", columns="stage", values="median_s", sort=False)
        tables[b] = (table * 1e3)[[s for s in order if s in table]].rename(columns=STAGE_NAMES)
    if not tables:
        raise ValueError(f"no stage timings of {', '.join(backends)} in the table")
    rows = [len(t) for t in tables.values()]
    bar_in = 0.1 if len(order) > 3 else 0.16  # inches per bar
    heights = [0.6 + r * (len(order) * bar_in + 0.15) for r in rows]
    fig, axes = plt.subplots(len(tables), 1, figsize=(9, sum(heights) + 0.8), sharex=True, squeeze=False,
                             height_ratios=heights, layout="constrained")  # fmt: skip
    for k, (ax, (b, table)) in enumerate(zip(axes[:, 0], tables.items())):
        table.plot.barh(ax=ax, logx=True, width=0.8, legend=False)
        ax.invert_yaxis()  # the first configuration on top; in each group the bars in the legend's order
        ax.set(ylabel="", title=f"{b}: time per stage, SH degree {sh_degree}")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.grid(axis="x", alpha=0.3, which="both")
        if k == 0:
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes[-1, 0].set_xlabel("ms per call (median, log scale)")
    fig.supylabel("Gaussians N, image size (pixels)", fontsize=10)
    fig.suptitle(f"{cpu_model()}, {torch.get_num_threads()} threads", fontsize=9)
    return fig
