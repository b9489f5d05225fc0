"""Every run of a suite under ``results/``, case by case over commits and dates.

:func:`history_table` gives one row per (run, case): the run's time and commit, the case's median and
quartiles (from the raw samples where present, else median +- IQR/2), its share of the machine's roof
(``pct_of_peak``, :mod:`gsworkbench.bench.roofline`; NaN for runs without it), and the verdict of
:func:`~gsworkbench.bench.compare.compare_samples` against the case's previous run, so significant
changes (by the same rule as ``gsworkbench compare``) can be marked. :func:`plot_history` draws it.
"""

from __future__ import annotations

import os
import re
from typing import Any

import numpy as np
import pandas as pd

from gsworkbench.bench.compare import ALPHA, THRESHOLD, compare_samples
from gsworkbench.bench.store import SAMPLES, BenchRun, find_bench_runs
from gsworkbench.core.figures import add_footer


def _quartiles(row: pd.Series) -> tuple[float, float, float]:
    samples = row.get(SAMPLES)
    if isinstance(samples, list) and samples:
        q = np.quantile(samples, [0.25, 0.5, 0.75])
        return float(q[0]), float(q[1]), float(q[2])
    med, iqr = float(row["median_s"]), float(row.get("iqr_s", 0.0) or 0.0)
    return med - iqr / 2, med, med + iqr / 2


def history_table(
    runs: list[BenchRun], cases: str | None = None, alpha: float = ALPHA, threshold: float = THRESHOLD
) -> pd.DataFrame:
    """One row per timed (run, case), oldest run first; ``cases`` a regular expression on case names."""
    pattern = re.compile(cases) if cases else None
    rows: list[dict[str, Any]] = []
    previous: dict[str, pd.Series] = {}
    for index, run in enumerate(runs):
        for _, row in run.table.iterrows():
            name = row["case"]
            if (pattern and not pattern.search(name)) or pd.isna(row.get("median_s")):
                continue
            q1, med, q3 = _quartiles(row)
            change = "first run"
            if name in previous:
                prev = previous[name]
                change = compare_samples(
                    prev.get(SAMPLES) if isinstance(prev.get(SAMPLES), list) else None,
                    row.get(SAMPLES) if isinstance(row.get(SAMPLES), list) else None,
                    base_median=float(prev["median_s"]),
                    cand_median=med,
                    alpha=alpha,
                    threshold=threshold,
                )["verdict"]
            previous[name] = row
            rows.append(
                {
                    "run_index": index,
                    "run": run.path.name,
                    "time_utc": run.time_utc,
                    "commit": run.commit[:10],
                    "case": name,
                    "median_s": med,
                    "q1_s": q1,
                    "q3_s": q3,
                    "has_samples": isinstance(row.get(SAMPLES), list),
                    "pct_of_peak": float(row.get("pct_of_peak", np.nan)),
                    "change": change,
                }
            )
    return pd.DataFrame(rows)


def suite_history(
    suite: str, root: str | os.PathLike[str] | None = None, cases: str | None = None, **kw: Any
) -> pd.DataFrame:
    """:func:`history_table` of every run of ``suite`` under ``root`` (default ``results/``)."""
    runs = find_bench_runs(suite, root)
    if not runs:
        raise ValueError(f"no runs of suite {suite!r} under {root or 'results/'}")
    return history_table(runs, cases, **kw)


def plot_history(history: pd.DataFrame, max_cases: int = 12, footer: str | None = None) -> Any:
    """Median per call (ms, log scale) with its quartiles per case over the runs; significant changes
    against the previous run marked (red up-triangle: slower, green down-triangle: faster)."""
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(history["case"]))[:max_cases]
    cols = min(3, max(1, len(names)))
    rows = max(1, -(-len(names) // cols))
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.2 * rows), squeeze=False)
    runs = history.drop_duplicates("run_index").set_index("run_index")
    labels = {i: f"{r.commit[:7]}\n{str(r.time_utc)[:10]}" for i, r in runs.iterrows()}
    for ax, name in zip(axes.flat, names):
        h = history[history.case == name]
        ms = 1e3
        ax.errorbar(h.run_index, h.median_s * ms, yerr=[(h.median_s - h.q1_s) * ms, (h.q3_s - h.median_s) * ms],
                    fmt="o-", color="tab:blue", capsize=3, label="median, quartiles")  # fmt: skip
        for verdict, marker, color in (("slower", "^", "tab:red"), ("faster", "v", "tab:green")):
            hit = h[h.change == verdict]
            if len(hit):
                ax.scatter(hit.run_index, hit.median_s * ms, marker=marker, s=90, color=color, zorder=3,
                           label=f"significantly {verdict}")  # fmt: skip
        ax.set_yscale("log")
        ax.set_title(name, fontsize=8)
        ax.set_ylabel("time per call (ms)")
        ax.set_xticks(list(h.run_index), [labels[i] for i in h.run_index], fontsize=7)
        ax.set_xlabel("run (commit, date)")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    for ax in list(axes.flat)[len(names) :]:
        ax.set_visible(False)
    fig.tight_layout()
    if footer:
        add_footer(fig, text=footer)  # the one footer (save_figure does not add a second)
    return fig
