"""Exhaustive against retrieval matching in :func:`gsworkbench.sfm.reconstruct`, on the ``reconstruct``
suite's photo sets: pairs matched, seconds of matching and in all, photos registered and the pose
errors against the truth.

Each case's photos are written once; then the two matchers reconstruct them in turn (exhaustive,
retrieval, exhaustive, retrieval, ...: ``rounds`` of each), so that a change in the machine's load
falls on both. The pair counts and pose errors do not depend on the load; the seconds do, so each
row of the summary holds the median over the rounds and the smallest and largest value.

The tables in docs/tables/ are written by
``python -m gsworkbench.studies.matcher_compare docs/tables/reconstruct_matchers.csv`` (the summary;
every run beside it as ``reconstruct_matchers_runs.csv``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from gsworkbench.core.provenance import cpu_model, short_commit
from gsworkbench.studies.suites.reconstruct import accuracy_row, capture_truth, splat_truth

CASES = (("splats", 256, 192, 12), ("capture", 256, 192, 48), ("splats", 1280, 800, 25), ("splats", 1280, 800, 50),
         ("splats", 1280, 800, 100))  # fmt: skip
MATCHERS = ("exhaustive", "retrieval")
SUMMED = ("pairs_matched", "registered", "rotation_median_deg", "rotation_max_deg", "centre_median_pct",
          "centre_max_pct", "s_matching", "s_total")  # fmt: skip


def compare_case(photos: str, width: int, height: int, n: int, rounds: int, work: Path) -> list[dict[str, Any]]:
    """``rounds`` reconstructions of one photo set by each matcher, alternating; one row per run."""
    import json

    from gsworkbench.sfm import reconstruct

    if photos == "capture":
        folder, truth, focal = capture_truth(width, height, n - 8, 8)
    else:
        folder, truth, focal = splat_truth(n, width, height, work / "photos")
    rows = []
    for r in range(rounds):
        for matcher in MATCHERS:
            out = work / f"scene-{matcher}"
            shutil.rmtree(out, ignore_errors=True)
            load = os.getloadavg()[0]
            reconstruct(folder, out, progress=False, log=None, matcher=matcher)
            row = accuracy_row(out, truth, focal)
            notes = json.loads((out / "reconstruct.json").read_text())["notes"]
            rows.append({
                "case": f"{photos}/{width}x{height}/{n}", "matcher": matcher, "round": r + 1,
                "pairs_matched": notes["pairs_matched"], "vocab_words": notes.get("vocab_tree", {}).get("words"),
                **row, "s_total": round(sum(v for k, v in row.items() if k.startswith("s_")), 2),
                "load_avg_1min": round(load, 2),
            })  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
    return rows


def summary(runs: pd.DataFrame) -> pd.DataFrame:
    """Per case and matcher: the median of each measure over the rounds, and for the seconds the
    smallest and largest value."""
    out = []
    for (case, matcher), g in runs.groupby(["case", "matcher"], sort=False):
        row: dict[str, Any] = {"case": case, "matcher": matcher, "rounds": len(g)}
        for col in SUMMED:
            row[col] = round(float(g[col].median()), 4)
            if col.startswith("s_"):
                row[f"{col}_min"], row[f"{col}_max"] = float(g[col].min()), float(g[col].max())
        out.append(row)
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], prog="python -m gsworkbench.studies.matcher_compare"
    )
    p.add_argument("csv", nargs="?", help="write the summary here (CSV), and every run beside it (_runs.csv)")
    p.add_argument("--rounds", type=int, default=3, help="reconstructions per matcher and case (default 3)")
    p.add_argument("--cases", default=None, help="only the cases whose name contains this (e.g. 1280x800)")
    args = p.parse_args(argv)
    commit = short_commit()  # the code measured: the package is imported from this checkout now
    rows: list[dict[str, Any]] = []
    for photos, w, h, n in CASES:
        if args.cases and args.cases not in f"{photos}/{w}x{h}/{n}":
            continue
        work = Path(tempfile.mkdtemp(prefix="gsw-matchers-"))
        try:
            rows += compare_case(photos, w, h, n, args.rounds, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    runs = pd.DataFrame(rows)
    table = summary(runs)
    for df in (runs, table):
        df["commit"], df["cpu"], df["threads"] = commit, cpu_model(), os.cpu_count()
    if args.csv:
        table.to_csv(args.csv, index=False)
        runs.to_csv(Path(args.csv).with_name(Path(args.csv).stem + "_runs.csv"), index=False)
    print(table.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
