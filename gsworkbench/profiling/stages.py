"""Stage breakdown: run a workload several times, time each stage, tabulate and plot.

Each run's wall time is split into its named stages (seconds from
:class:`gsworkbench.train.timers.StageTimer`, which also opens the ``stage:<name>``
``torch.profiler`` ranges) and ``other``, the wall time no stage covers. ``coverage`` (sum of the named
stages over the wall time) says how much of the run the stages explain.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import torch

from gsworkbench.core.figures import add_footer, stage_colors
from gsworkbench.profiling.workloads import Clock, RunFn
from gsworkbench.train.timers import StageTimer

OTHER = "other"
TOTAL = "total (wall)"


def _sync(device: str) -> None:
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def timed_run(run: RunFn, device: str = "cpu", clock: Clock = time.perf_counter) -> tuple[float, dict[str, float]]:
    """One run: its wall seconds and seconds per stage (``other`` included), all read on ``clock``
    (tests pass a fake one)."""
    timer = StageTimer(device, ranges=True, clock=clock)
    _sync(device)
    t0 = clock()
    extra = run(timer.stage, clock)
    _sync(device)
    wall = clock() - t0
    times = timer.reset()
    for k, v in (extra or {}).items():
        times[k] = times.get(k, 0.0) + float(v)
    times[OTHER] = wall - sum(times.values())
    return wall, times


def time_repeats(run: RunFn, repeats: int, device: str = "cpu", clock: Clock = time.perf_counter) -> pd.DataFrame:
    """``repeats`` runs -> long table: repeat, stage, seconds (one row per stage, ``other`` and the total),
    on ``clock`` (see :func:`timed_run`)."""
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an int >= 1, got {repeats!r}")
    rows = []
    for r in range(repeats):
        wall, times = timed_run(run, device, clock)
        rows += [{"repeat": r, "stage": s, "seconds": v} for s, v in times.items()]
        rows.append({"repeat": r, "stage": TOTAL, "seconds": wall})
    return pd.DataFrame(rows)


def stage_order(stages: Sequence[str], present: Sequence[str]) -> list[str]:
    """The declared stages that occur, then any others in order of appearance, then other and total."""
    named = [s for s in stages if s in present and s not in (OTHER, TOTAL)] + [
        s for s in present if s not in stages and s not in (OTHER, TOTAL)
    ]
    return [*dict.fromkeys(named), OTHER, TOTAL]


def stage_table(repeats: pd.DataFrame, stages: Sequence[str] = ()) -> pd.DataFrame:
    """Per stage: median, min and max seconds over the repeats and the share of the median wall time.

    ``repeats``: :func:`time_repeats`'s table. The named stages' medians plus ``other`` need not add up
    to the wall median exactly (medians of different runs); ``coverage`` rows are per run.
    """
    g = repeats.groupby("stage", sort=False)["seconds"]
    med, lo, hi = g.median(), g.min(), g.max()
    order = stage_order(stages, list(med.index))
    wall = float(med[TOTAL])
    return pd.DataFrame(
        {
            "stage": order,
            "median_s": [float(med[s]) for s in order],
            "min_s": [float(lo[s]) for s in order],
            "max_s": [float(hi[s]) for s in order],
            "share": [float(med[s]) / wall if wall > 0 else float("nan") for s in order],
        }
    )


def coverage(repeats: pd.DataFrame) -> pd.Series:
    """Per repeat: the named stages' seconds over the wall seconds (1.0 = the stages explain the run)."""
    wide = repeats.pivot_table(index="repeat", columns="stage", values="seconds", aggfunc="sum")
    named = [c for c in wide.columns if c not in (OTHER, TOTAL)]
    return wide[named].sum(axis=1) / wide[TOTAL]


def add_profiler_ranges(table: pd.DataFrame, ops: pd.DataFrame | None) -> pd.DataFrame:
    """Adds ``profiler_s``: each stage's ``stage:<name>`` range total from the torch.profiler run (one
    run, with the profiler's overhead), beside the timers' medians."""
    out = table.copy()
    if ops is None or not len(ops):
        out["profiler_s"] = float("nan")
        return out
    col = "device_total_s" if "device_total_s" in ops and ops["device_total_s"].sum() > 0 else "cpu_total_s"
    ranges = ops[ops["name"].str.startswith("stage:")].groupby("name")[col].sum()
    out["profiler_s"] = [float(ranges.get(f"stage:{s}", float("nan"))) for s in out["stage"]]
    return out


def plot_stages(tables: Mapping[str, pd.DataFrame], title: str = "time per run", footer_text: str | None = None) -> Any:
    """Stacked horizontal bars: one per profile (label -> :func:`stage_table`), median seconds per stage,
    ``other`` in grey, the wall median written beside each bar; the legend sits outside the axes."""
    import matplotlib.pyplot as plt

    labels = list(tables)
    stages: list[str] = []
    for t in tables.values():
        stages += [s for s in t["stage"] if s not in (OTHER, TOTAL) and s not in stages]
    stages.append(OTHER)
    colors = stage_colors(stages, OTHER)
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.7 * len(labels)))
    for y, label in enumerate(labels):
        t = tables[label].set_index("stage")["median_s"]
        left = 0.0
        for s in stages:
            v = max(float(t.get(s, 0.0)), 0.0)
            ax.barh(y, v, left=left, color=colors[s], label=s)
            left += v
        ax.text(left, y, f"  {float(t[TOTAL]):.3g} s", va="center", fontsize=8)
    ax.invert_yaxis()  # the first profile on top
    ax.set_xlim(0, 1.15 * max(float(t.set_index("stage").loc[TOTAL, "median_s"]) for t in tables.values()))
    handles, names = ax.get_legend_handles_labels()
    uniq = dict(zip(names, handles))
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlabel("median time per run (s)")
    ax.set_title(title, fontsize=10)
    ax.legend(uniq.values(), uniq.keys(), loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    add_footer(fig, text=footer_text)
    return fig
