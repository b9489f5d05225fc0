"""The results store: one folder per benchmark run, with its table and metadata."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd

from gsworkbench.results import new_run_dir, write_metadata, write_table


def save_run(
    suite: str, table: pd.DataFrame, params: dict[str, Any], root: str | os.PathLike[str] | None = None
) -> Path:
    """Writes ``results/<run-id>/<suite>.csv`` and ``metadata.json``; returns the run folder."""
    run_dir = new_run_dir(f"bench-{suite}", root)
    write_metadata(run_dir, params, suite=suite)
    write_table(run_dir / f"{suite}.csv", table)
    return run_dir


def load_run(run_dir: str | os.PathLike[str]) -> dict[str, pd.DataFrame]:
    """Reads every CSV table of a run folder, by file stem."""
    return {p.stem: pd.read_csv(p) for p in sorted(Path(run_dir).glob("*.csv"))}
