"""Op table and chrome trace: one run of a workload under ``torch.profiler``.

The table is ``key_averages()`` (grouped by input shape with ``record_shapes``): per op (and per
``stage:<name>`` range) its calls, self and total CPU seconds, and on CUDA the device seconds.
"""

from __future__ import annotations

import os
import time

import pandas as pd
import torch
from torch.profiler import ProfilerActivity

from gsworkbench.core.atomic import atomic_path
from gsworkbench.profiling.workloads import RunFn
from gsworkbench.train.timers import StageTimer


def _sort_column(table: pd.DataFrame) -> str:
    return "self_device_s" if "self_device_s" in table and table["self_device_s"].sum() > 0 else "self_cpu_s"


def op_table(prof: torch.profiler.profile, record_shapes: bool = False) -> pd.DataFrame:
    """``prof.key_averages()`` as a DataFrame sorted by self time (device time where there is any)."""
    rows = []
    for e in prof.key_averages(group_by_input_shape=record_shapes):
        row = {
            "name": e.key,
            "calls": int(e.count),
            "self_cpu_s": e.self_cpu_time_total / 1e6,
            "cpu_total_s": e.cpu_time_total / 1e6,
        }
        dev_self = getattr(e, "self_device_time_total", 0.0)
        dev_total = getattr(e, "device_time_total", 0.0)
        if dev_self or dev_total:
            row["self_device_s"] = dev_self / 1e6
            row["device_total_s"] = dev_total / 1e6
        if record_shapes:
            row["input_shapes"] = str(e.input_shapes)
        rows.append(row)
    table = pd.DataFrame(rows, columns=["name", "calls", "self_cpu_s", "cpu_total_s"] if not rows else None)
    for col in ("self_device_s", "device_total_s"):
        if col in table:
            table[col] = table[col].fillna(0.0)
    if not len(table):
        return table
    return table.sort_values(_sort_column(table), ascending=False, ignore_index=True)


def top_ops(table: pd.DataFrame, n: int = 15) -> pd.DataFrame:
    """The ``n`` ops with the most self time, the ``stage:`` ranges left out."""
    ops = table[~table["name"].str.startswith("stage:")]
    return ops.head(n).reset_index(drop=True)


def profile_ops(
    run: RunFn, device: str = "cpu", record_shapes: bool = False, trace_path: str | os.PathLike[str] | None = None
) -> tuple[pd.DataFrame, float]:
    """One run under ``torch.profiler``: (op table, the run's wall seconds under the profiler).

    ``trace_path``: where to write the chrome trace (JSON for Perfetto / chrome://tracing; gzipped when
    the name ends in ``.gz``), atomically.
    """
    activities = [ProfilerActivity.CPU]
    if str(device).startswith("cuda"):
        activities.append(ProfilerActivity.CUDA)
    timer = StageTimer(device, ranges=True)
    with torch.profiler.profile(activities=activities, record_shapes=record_shapes) as prof:
        t0 = time.perf_counter()
        run(timer.stage, time.perf_counter)
        if str(device).startswith("cuda"):
            torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    if trace_path is not None:
        with atomic_path(trace_path) as tmp:
            prof.export_chrome_trace(str(tmp))
    return op_table(prof, record_shapes), wall
