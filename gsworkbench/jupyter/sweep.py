"""Parameter sweeps as tasks on Dask distributed: notebook runs (papermill) or any callable.

``run_sweep(task, {"a": [1, 2], "b": ["x", "y"]}, out_dir)`` runs ``task(params, run_dir)`` for every
point of the grid as a Dask task, on a ``LocalCluster`` (default) or the cluster at ``scheduler``.
Each run has its own folder ``out_dir/runs/<key>/`` (key: the parameters, readable) and ends by
writing ``status.json`` there atomically: ``ok`` with the tables it wrote, or ``error`` with the
error. A task that raises takes nothing else down; a worker that dies is recorded the same way.

Re-running the same sweep into the same ``out_dir`` skips every run whose status is ``ok`` and reruns
the rest. Each completed run's CSV tables are gathered into one DataFrame with the parameters as
columns (plus ``table``, the CSV's name, and ``status``/``error``); ``out_dir/sweep.csv`` is written
atomically with that table and the error rows, beside ``metadata.json``.

Threads: each worker runs one task at a time (``threads_per_worker=1``) and every run gets
``run_threads`` threads (OMP_NUM_THREADS, GSW_BENCH_THREADS, torch), by default the machine's cores
divided by the workers, so the runs never oversubscribe it. Benchmark sweeps on one machine should
keep the default of one worker: concurrent runs would time each other.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from gsworkbench.core.atomic import write_json, write_table
from gsworkbench.core.runs import write_metadata

STATUS = "status.json"
Task = Callable[[dict[str, Any], Path], Any]


def parameter_grid(axes: Mapping[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination of the axes' values, the first axis varying slowest."""
    for name, values in axes.items():
        if not isinstance(values, list) or not values:
            raise ValueError(f"sweep parameter {name!r} needs a non-empty list of values, got {values!r}")
    return [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]


def run_key(params: Mapping[str, Any]) -> str:
    """A folder name for one run: its parameters, readable, plus a short hash that keeps it unique."""
    text = json.dumps(params, sort_keys=True, default=str)
    readable = re.sub(r"[^A-Za-z0-9._=-]+", "_", "_".join(f"{k}={v}" for k, v in params.items()))[:80]
    return f"{readable}-{hashlib.sha1(text.encode()).hexdigest()[:8]}"


def read_status(run_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((run_dir / STATUS).read_text())
    except (OSError, json.JSONDecodeError):
        return None


def execute_run(task: Task, params: dict[str, Any], run_dir: str, threads: int) -> dict[str, Any]:
    """Runs one task in a Dask worker with ``threads`` threads; never raises: returns (and writes) its status.

    A task may return a DataFrame or a dict of them (written as CSVs into its folder) or write CSVs itself.
    """
    path = Path(run_dir)
    path.mkdir(parents=True, exist_ok=True)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "GSW_BENCH_THREADS"):
        os.environ[var] = str(threads)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import torch

        torch.set_num_threads(threads)
        out = task(dict(params), path)
        tables = {"result": out} if isinstance(out, pd.DataFrame) else dict(out or {})
        for name, df in tables.items():
            write_table(path / f"{name}.csv", df)
        status = {"status": "ok", "params": params, "tables": sorted(p.name for p in path.glob("*.csv"))}
    except Exception as err:  # recorded, never propagated: one failing run must not stop the sweep
        lines = [ln for ln in str(err).splitlines() if ln.strip()]
        status = {"status": "error", "params": params, "error": f"{type(err).__name__}: {' | '.join(lines[-3:])}"}
    write_json(path / STATUS, status)
    return status


def notebook_task(notebook: str | os.PathLike[str]) -> Task:
    """A task that runs ``notebook`` (papermill, checked parameters) with its tables into the run folder."""
    from functools import partial

    return partial(_run_notebook, str(Path(notebook).resolve()))


def _run_notebook(notebook: str, params: dict[str, Any], run_dir: Path) -> None:
    # a task imports what it runs in its worker, after execute_run set the run's thread count
    from gsworkbench.jupyter.runner import run_notebook

    run_notebook(notebook, params, run_dir)


def suite_task(suite: str, quick: bool = False, min_run_time: float = 0.2, **fixed: Any) -> Task:
    """A task that times the cases of benchmark ``suite`` whose params match the run's parameters and
    ``fixed`` (e.g. ``suite_task("field", mode="forward")`` swept over N and backend); returns the
    suite's summarised table. ValueError (recorded as the run's error) when no case matches."""
    from functools import partial

    return partial(_run_suite_cases, suite, quick, min_run_time, fixed)


def _run_suite_cases(
    suite: str, quick: bool, min_run_time: float, fixed: dict[str, Any], params: dict[str, Any], run_dir: Path
) -> pd.DataFrame:
    # in the worker, after execute_run set the run's thread count (torch reads it once, when it loads)
    import gsworkbench.studies.suites  # noqa: F401  (registers the built-in suites)
    from gsworkbench.bench import get_suite, run_cases

    want = {**fixed, **params}
    s = get_suite(suite)
    cases = [c for c in s.cases(quick) if all(c.params.get(k, v) == v for k, v in want.items())]
    cases = [c for c in cases if any(k in c.params for k in want)]
    if not cases:
        raise ValueError(f"no case of suite {suite!r} has {want}")
    threads = int(os.environ.get("GSW_BENCH_THREADS", "1"))
    return s.summarize(run_cases(cases, threads=threads, min_run_time=min_run_time, progress=False))


@dataclass
class SweepResult:
    """``table``: the gathered rows of the completed runs; ``errors``: one row per failed run;
    ``ran``: the run keys executed by this call (the others were complete already)."""

    table: pd.DataFrame
    errors: pd.DataFrame
    ran: list[str]
    path: Path


def gather(out_dir: Path, grid: list[dict[str, Any]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The completed runs' tables (parameters as columns) and the failed runs' errors."""
    frames, errors = [], []
    for params in grid:
        key = run_key(params)
        status = read_status(out_dir / "runs" / key) or {"status": "error", "error": "no status: not run"}
        if status["status"] != "ok":
            errors.append({**params, "run": key, "status": "error", "error": status.get("error", "")})
            continue
        for name in status.get("tables", []):
            df = pd.read_csv(out_dir / "runs" / key / name)
            cols = {"run": key, "table": Path(name).stem, **params}
            df = df.drop(columns=[c for c in cols if c in df]).assign(**{k: [v] * len(df) for k, v in cols.items()})
            frames.append(df[[*cols, *[c for c in df if c not in cols]]])
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["run", "table", *grid[0]])
    return table.assign(status="ok"), pd.DataFrame(errors, columns=[*grid[0], "run", "status", "error"])


def run_sweep(
    task: Task,
    axes: Mapping[str, list[Any]],
    out_dir: str | os.PathLike[str],
    *,
    scheduler: str | None = None,
    workers: int = 1,
    run_threads: int | None = None,
    progress: bool = True,
) -> SweepResult:
    """Runs the grid of ``axes`` on Dask (LocalCluster with ``workers`` single-threaded workers, or the
    cluster at ``scheduler``), skipping runs already complete in ``out_dir``; see the module docs."""
    from distributed import Client, LocalCluster, as_completed

    grid = parameter_grid(dict(axes))
    out = Path(out_dir)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    threads = run_threads or max(1, (os.cpu_count() or 1) // workers)
    todo = [p for p in grid if (read_status(out / "runs" / run_key(p)) or {}).get("status") != "ok"]
    write_metadata(out, {"axes": dict(axes), "workers": workers, "run_threads": threads, "scheduler": scheduler})
    ran = [run_key(p) for p in todo]
    if todo:
        cluster = None
        if scheduler is None:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(scheduler or cluster)
        try:
            futures = {client.submit(execute_run, task, p, str(out / "runs" / run_key(p)), threads, pure=False): p
                       for p in todo}  # fmt: skip
            for done, fut in enumerate(as_completed(futures), 1):
                params = futures[fut]
                try:
                    status = fut.result()
                except Exception as err:  # the worker died (KilledWorker, ...): record it like a failure
                    status = {"status": "error", "params": params, "error": f"{type(err).__name__}: {err}"}
                    write_json(out / "runs" / run_key(params) / STATUS, status)
                if progress:
                    print(f"[{done}/{len(todo)}] {run_key(params)}: {status['status']} {status.get('error', '')}")
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
    table, errors = gather(out, grid)
    write_table(out / "sweep.csv", pd.concat([table, errors], ignore_index=True))
    return SweepResult(table, errors, ran, out)
