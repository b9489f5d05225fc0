"""The notebooks' figures, built here where tests reach them; every saved figure gets a footer.

:func:`add_footer` is the one place that writes the machine (CPU model and threads, or the GPU) and the
commit under a figure; :func:`gsworkbench.results.save_figure` calls it. Axes carry names with units,
images carry colorbars, legends sit outside the data.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

FOOTER_LABEL = "gsworkbench-footer"
# Display names of the rasterizer's stages and of a training step's (gsworkbench.train.timers.STAGES).
STAGE_NAMES = {"prepare": "prepare (view, target, activations)", "project": "projection",
               "sh": "SH to colour", "isect": "tile intersection", "rasterize": "rasterize (forward)",
               "loss": "loss (L1 + SSIM)", "backward": "backward", "optimizer": "Adam step",
               "densify": "densification"}  # fmt: skip


def stage_colors(stages: list[str], other: str | None = "other") -> dict[str, Any]:
    """A distinct, non-grey colour per stage (tab20's dark shades first, then its light ones); the
    ``other`` stage (time no stage covers) is grey."""
    import matplotlib.pyplot as plt

    tab20 = plt.get_cmap("tab20").colors
    order = [i for i in [*range(0, 20, 2), *range(1, 20, 2)] if i not in (14, 15)]  # 14, 15: greys
    palette = [tab20[i] for i in order]
    out = {s: palette[k % len(palette)] for k, s in enumerate(s for s in stages if s != other)}
    if other is not None:
        out[other] = (0.7, 0.7, 0.7)
    return out


def add_footer(fig: Any, device: str = "cpu", text: str | None = None) -> None:
    """Writes the machine and commit (:func:`gsworkbench.results.machine_summary`, or ``text``) under
    ``fig``; once."""
    from gsworkbench.results import machine_summary

    if any(t.get_label() == FOOTER_LABEL for t in fig.texts):
        return
    text = machine_summary(device) if text is None else text
    fig.text(0.0, -0.01, text, fontsize=7, color="0.35", ha="left", va="top", label=FOOTER_LABEL)


def _count(n: float) -> str:
    n = int(n)
    return f"{n // 1_000_000}M" if n >= 1_000_000 and n % 1_000_000 == 0 else (
        f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n))  # fmt: skip


# ---- notebook 01: the field ------------------------------------------------------------------------


def field_slices(target: Any, model: Any, res: int = 96) -> Any:
    """Target, fit and their difference (target - fit) on the three axis-aligned slices through 0.

    Rows: target, fit (shared colour scale), error (symmetric diverging scale); one colorbar per row.
    """
    import matplotlib.pyplot as plt

    from gsworkbench.field.targets import slice_grid

    fig, axes = plt.subplots(3, 3, figsize=(10.5, 10), layout="constrained")
    axes_names = "xyz"
    refs = [slice_grid(target, axis=a, res=res) for a in (2, 1, 0)]
    fits = [slice_grid(model, axis=a, res=res) for a in (2, 1, 0)]
    vmax = max(float(r.max()) for r in refs)
    emax = max(float((r - f).abs().max()) for r, f in zip(refs, fits)) or 1.0
    for col, axis in enumerate((2, 1, 0)):
        h, v = [axes_names[i] for i in range(3) if i != axis]
        for row, (name, img, kw) in enumerate(
            (("target", refs[col], {"vmin": 0, "vmax": vmax, "cmap": "viridis"}),
             ("fit", fits[col], {"vmin": 0, "vmax": vmax, "cmap": "viridis"}),
             ("target − fit", refs[col] - fits[col], {"vmin": -emax, "vmax": emax, "cmap": "RdBu_r"}))  # fmt: skip
        ):
            ax = axes[row, col]
            im = ax.imshow(img.numpy(), origin="lower", extent=(-1, 1, -1, 1), **kw)
            ax.set(title=f"{name}, slice {axes_names[axis]} = 0", xlabel=h, ylabel=v)
            ax.set(xticks=[-1, 0, 1], yticks=[-1, 0, 1])
            if col == 2:
                fig.colorbar(im, ax=axes[row, :], shrink=0.9, label="density" if row < 2 else "error (density)")
    return fig


# ---- notebook 03: rendering ------------------------------------------------------------------------


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

    from gsworkbench.results import cpu_model

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


# ---- notebook 05: transforms -----------------------------------------------------------------------


def throughput(table: pd.DataFrame) -> Any:
    """Effective GB/s of each backend against N, into preallocated output buffers, beside the
    bandwidth of a parallel copy of the same bytes; SH degree 0 and 3."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12.5, 4.2), sharey=True, layout="constrained")
    for ax, degree in zip(axes, (0, 3)):
        part = table[(table.sh_degree == degree) & (table.out.astype(bool)) & table.median_s.notna()]
        copy = part[part.backend == "copy"].sort_values("n")
        for backend, grp in part[part.backend != "copy"].groupby("backend"):
            grp = grp.sort_values("n")
            yerr = grp.gb_per_s * grp.iqr_pct.fillna(0) / 100
            ax.errorbar(grp.n, grp.gb_per_s, yerr=yerr, marker="o", label=backend)
        ax.plot(copy.n, copy.gb_per_s, "k--", label="parallel copy\n(same bytes)")
        threads = int(part.threads.iloc[0]) if len(part) else 0
        ax.set(xscale="log", yscale="log", xlabel="N splats", title=f"SH degree {degree}, {threads} threads")
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("effective GB/s (bytes read + written / time)")
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle("transform into preallocated output buffers (out=): no allocation in the timed call", fontsize=10)
    return fig
