"""Roofline columns of a benchmark table and the roofline plot (the headline table is
:mod:`gsworkbench.studies.roofline_table`).

A case whose setup reports its work (``flops_per_call``, ``bytes_per_call``: the counts beside each
kernel, e.g. :func:`gsworkbench.field.ops.field_work`, :func:`gsworkbench.splat.ops.render_stage_work`,
:func:`gsworkbench.transforms.ops.transform_bytes`, :func:`gsworkbench.train.adam.adam_step_bytes`) gets,
from its median time, :func:`add_roofline_columns`:

- ``gflops``: achieved GFLOP/s; ``gbs``: achieved GB/s (1e9 bytes);
- ``intensity``: flop/byte of the count;
- ``pct_of_peak``: achieved over the roof at that intensity, min(peak_gflops, intensity x bandwidth_gbs),
  in %; for a count of bytes alone (no flops: transforms, Adam, the integer stages) the share of the
  bandwidth ceiling. NaN without ceilings (a run with ``GSW_CEILINGS=0``, or no extension).

The ceilings are the run's (:mod:`gsworkbench.bench.ceilings`), measured once per run at its thread count.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from gsworkbench.bench.ceilings import MachineCeilings
from gsworkbench.core.figures import add_footer

WORK_COLUMNS = ("flops_per_call", "bytes_per_call")
ROOFLINE_COLUMNS = ("gflops", "gbs", "intensity", "pct_of_peak")


def add_roofline_columns(df: pd.DataFrame, ceilings: MachineCeilings | None) -> pd.DataFrame:
    """``df`` with :data:`ROOFLINE_COLUMNS` added from its ``median_s`` and work columns (see the module
    docstring); unchanged when it has no work columns or no timings."""
    if "median_s" not in df or not any(c in df for c in WORK_COLUMNS):
        return df
    df = df.copy()
    seconds = pd.to_numeric(df["median_s"], errors="coerce").astype(float)
    flops = pd.to_numeric(df.get("flops_per_call", np.nan), errors="coerce")
    nbytes = pd.to_numeric(df.get("bytes_per_call", np.nan), errors="coerce")
    flops = pd.Series(flops, index=df.index, dtype=float)
    nbytes = pd.Series(nbytes, index=df.index, dtype=float)
    df["gflops"] = flops / seconds / 1e9
    df["gbs"] = nbytes / seconds / 1e9
    df["intensity"] = flops / nbytes
    if ceilings is None:
        df["pct_of_peak"] = np.nan
        return df
    roof = np.minimum(ceilings.peak_gflops, df["intensity"] * ceilings.bandwidth_gbs)
    pct = 100 * df["gflops"] / roof
    bytes_only = flops.isna() & nbytes.notna()
    df["pct_of_peak"] = pct.where(~bytes_only, 100 * df["gbs"] / ceilings.bandwidth_gbs)
    return df


def plot_roofline(
    table: pd.DataFrame, ceilings: MachineCeilings, label: str = "case", footer: str | None = None
) -> Any:
    """The roofline: achieved GFLOP/s (log y) against arithmetic intensity (flop/byte, log x), one
    labelled point per row of ``table`` that has both (its ``label`` column names it), under the two
    ceilings (the bandwidth slope and the flat FMA peak, meeting at the ridge)."""
    import matplotlib.pyplot as plt

    pts = table.dropna(subset=["intensity", "gflops"])
    pts = pts[(pts["intensity"] > 0) & (pts["gflops"] > 0)]
    lo = min([ceilings.ridge_intensity / 100, *pts["intensity"]]) / 2
    hi = max([ceilings.ridge_intensity * 10, *pts["intensity"]]) * 2
    x = np.geomspace(lo, hi, 200)
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    ax.plot(x, np.minimum(ceilings.peak_gflops, x * ceilings.bandwidth_gbs), color="0.2", lw=2,
            label=f"roof: {ceilings.bandwidth_gbs:.3g} GB/s triad, {ceilings.peak_gflops:.4g} GFLOP/s FMA "
                  f"({ceilings.simd}, {ceilings.threads} threads)")  # fmt: skip
    ridge = ceilings.ridge_intensity
    ax.axvline(ridge, color="0.6", ls=":", lw=1, label=f"ridge: {ridge:.3g} flop/B")
    colors = plt.get_cmap("tab10")
    for k, (_, row) in enumerate(pts.iterrows()):
        pct = row.get("pct_of_peak", np.nan)
        name = f"{row[label]}" + ("" if pd.isna(pct) else f" ({pct:.3g}% of roof)")
        ax.scatter(row["intensity"], row["gflops"], color=colors(k % 10), s=40, zorder=3, label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (flop/byte)")
    ax.set_ylabel("achieved (GFLOP/s)")
    ax.set_title("roofline of the measured kernels")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    if footer:
        add_footer(fig, text=footer)
    return fig
