"""The results store: one folder per benchmark run, with its table and metadata.

A run's table has one row per case; ``samples_s`` holds every round's seconds per call (a JSON list in
the CSV). Runs written before raw samples were kept have no such column: :func:`load_bench_run` reads
them all the same, and :mod:`gsworkbench.bench.compare` marks their cases "no samples".
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from gsworkbench.bench.ceilings import MachineCeilings, ceilings_metadata
from gsworkbench.bench.runner import default_threads
from gsworkbench.core.atomic import write_table
from gsworkbench.core.project import results_root
from gsworkbench.core.runs import new_run_dir, write_metadata

SAMPLES = "samples_s"


def run_threads(table: pd.DataFrame, params: dict[str, Any]) -> int:
    """The thread count of a run: its table's ``threads`` column, else ``params["threads"]``, else the
    runner's default."""
    if "threads" in table:
        found = pd.to_numeric(table["threads"], errors="coerce").dropna()
        if len(found):
            return int(found.iloc[0])
    if params.get("threads"):
        return int(params["threads"])
    return default_threads()


def save_run(
    suite: str, table: pd.DataFrame, params: dict[str, Any], root: str | os.PathLike[str] | None = None
) -> Path:
    """Writes ``results/<run-id>/<suite>.csv`` and ``metadata.json`` (with the machine's ``ceilings`` at
    the run's thread count, :func:`gsworkbench.bench.ceilings.ceilings_metadata`: the ones the run's
    roofline columns used, measured once per process); returns the run folder."""
    ceilings = ceilings_metadata(run_threads(table, params))
    run_dir = new_run_dir(f"bench-{suite}", root)
    write_metadata(run_dir, params, suite=suite, ceilings=ceilings)
    write_table(run_dir / f"{suite}.csv", table)
    return run_dir


def load_run(run_dir: str | os.PathLike[str]) -> dict[str, pd.DataFrame]:
    """Reads every CSV table of a run folder, by file stem."""
    return {p.stem: pd.read_csv(p) for p in sorted(Path(run_dir).glob("*.csv"))}


def parse_samples(value: Any) -> list[float] | None:
    """A ``samples_s`` cell (a list, its JSON text, or empty/NaN) as a list of seconds, or None."""
    if isinstance(value, (list, tuple)):
        return [float(v) for v in value] or None
    if value is None or (isinstance(value, float) and math.isnan(value)) or value == "":
        return None
    parsed = json.loads(str(value))
    return [float(v) for v in parsed] or None


@dataclass
class BenchRun:
    """One stored benchmark run: its folder, suite, ``metadata.json`` and table (samples parsed).

    ``has_samples`` is False for runs written before raw samples were kept.
    """

    path: Path
    suite: str
    metadata: dict[str, Any]
    table: pd.DataFrame

    @property
    def has_samples(self) -> bool:
        return SAMPLES in self.table and self.table[SAMPLES].notna().any()

    @property
    def ceilings(self) -> MachineCeilings | None:
        """The machine's ceilings recorded with the run; None for runs without them."""
        return MachineCeilings.from_dict(self.metadata.get("ceilings") or {})

    @property
    def commit(self) -> str:
        return str(self.metadata.get("git_commit") or "unknown")

    @property
    def time_utc(self) -> str:
        return str(self.metadata.get("time_utc") or "")


def load_bench_run(run_dir: str | os.PathLike[str]) -> BenchRun:
    """Reads a benchmark run folder written by :func:`save_run`; ValueError when it is not one."""
    path = Path(run_dir)
    meta_path = path / "metadata.json"
    if not meta_path.is_file():
        raise ValueError(f"{path} is not a benchmark run: no metadata.json")
    metadata = json.loads(meta_path.read_text())
    suite = metadata.get("suite")
    if not suite or not (path / f"{suite}.csv").is_file():
        raise ValueError(f"{path} is not a benchmark run: no suite name or no <suite>.csv")
    table = pd.read_csv(path / f"{suite}.csv")
    if SAMPLES in table:
        table[SAMPLES] = [parse_samples(v) for v in table[SAMPLES]]
    return BenchRun(path, suite, metadata, table)


def find_bench_runs(suite: str, root: str | os.PathLike[str] | None = None) -> list[BenchRun]:
    """Every readable run of ``suite`` under ``root`` (default ``results/``), oldest first."""
    base = Path(root) if root is not None else results_root()
    runs = []
    for meta in base.glob("*/metadata.json"):
        try:
            run = load_bench_run(meta.parent)
        except (ValueError, json.JSONDecodeError, pd.errors.ParserError):
            continue
        if run.suite == suite:
            runs.append(run)
    return sorted(runs, key=lambda r: (r.time_utc, (r.path / "metadata.json").stat().st_mtime_ns, r.path.name))
