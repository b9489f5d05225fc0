"""Figures of the splat transforms' throughput (notebook 05)."""

from __future__ import annotations

from typing import Any

import pandas as pd


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
