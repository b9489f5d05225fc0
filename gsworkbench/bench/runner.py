"""Times benchmark cases with ``torch.utils.benchmark``: warm-up, then median, IQR and count."""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterable
from typing import Any

import pandas as pd
import torch
from torch.utils import benchmark

from gsworkbench.bench.registry import Case, get_suite


def default_threads() -> int:
    """``$GSW_BENCH_THREADS``, else every core torch sees."""
    return int(os.environ.get("GSW_BENCH_THREADS", torch.get_num_threads()))


def time_callable(fn: Any, *, threads: int, min_run_time: float = 0.5, warmup: int = 2) -> dict[str, float]:
    """Median, IQR (seconds) and number of measurements of ``fn()``."""
    for _ in range(warmup):
        fn()
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=threads)
    m = timer.blocked_autorange(min_run_time=min_run_time)
    return {
        "median_s": m.median,
        "iqr_s": m.iqr,
        "runs": len(m.times),
        "calls_per_run": m.number_per_run,
    }


def run_cases(
    cases: Iterable[Case], *, threads: int | None = None, min_run_time: float = 0.5, progress: bool = True
) -> pd.DataFrame:
    """Runs each case; returns one row per case (its params, timings, threads, skip reason)."""
    threads = threads or default_threads()
    prev = torch.get_num_threads()
    torch.set_num_threads(threads)
    rows = []
    try:
        cases = list(cases)
        for i, case in enumerate(cases):
            row: dict[str, Any] = {"case": case.name, **case.params, "threads": threads}
            if case.skip:
                row.update(skipped=case.skip)
            else:
                fn = case.setup()
                row.update(time_callable(fn, threads=threads, min_run_time=min_run_time))
                del fn
                gc.collect()
            if progress:
                t = row.get("median_s")
                shown = f"{t * 1e3:10.3f} ms" if t is not None else f"skipped: {row.get('skipped')}"
                print(f"[{i + 1}/{len(cases)}] {case.name:<60} {shown}", file=sys.stderr, flush=True)
            rows.append(row)
    finally:
        torch.set_num_threads(prev)
    return pd.DataFrame(rows)


def run_suite(
    name: str, *, quick: bool = False, threads: int | None = None, min_run_time: float = 0.5, progress: bool = True
) -> pd.DataFrame:
    """Runs suite ``name`` and returns its summarised table."""
    suite = get_suite(name)
    df = run_cases(suite.cases(quick), threads=threads, min_run_time=min_run_time, progress=progress)
    return suite.summarize(df)
