"""``gsworkbench compare``, ``history`` and ``sweep``: argument parsing and printing only."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

# Imports inside the commands, as in gsworkbench.cli.main: a command loads what it runs when it runs.


def compare_command(args: argparse.Namespace) -> int:
    """Two run folders, or two git revisions timed interleaved; prints and writes the table; exit 1 on
    any significant slow-down beyond the threshold."""
    from gsworkbench.bench.compare import compare_runs
    from gsworkbench.core.runs import new_run_dir, write_metadata

    base, cand = Path(args.baseline), Path(args.candidate)
    if base.is_dir() and cand.is_dir():
        base_dir, cand_dir = base, cand
    elif base.is_dir() or cand.is_dir():
        raise ValueError("give two run folders or two git revisions, not one of each")
    else:
        from gsworkbench.bench.revisions import compare_revisions

        if not args.suite:
            raise ValueError("comparing git revisions needs --suite NAME")
        base_dir, cand_dir = compare_revisions(
            args.baseline, args.candidate, args.suite, suites_module="gsworkbench.studies.suites", quick=args.quick,
            threads=args.threads or 1, min_run_time=args.min_run_time, build=not args.no_build, cases=args.cases,
        )  # fmt: skip
    backends = None
    if args.backends:
        backends = tuple(args.backends.split(","))
        if len(backends) != 2:
            raise ValueError(f"--backends takes two names, BASELINE,CANDIDATE (e.g. torch,ext), got {args.backends!r}")
    comparison = compare_runs(base_dir, cand_dir, backends, alpha=args.alpha, threshold=args.threshold)
    out = Path(args.out) if args.out else new_run_dir("compare")
    write_metadata(out, {"baseline": str(base_dir), "candidate": str(cand_dir), "alpha": args.alpha,
                         "threshold": args.threshold})  # fmt: skip
    files = comparison.write(out)
    print(comparison.to_text())
    print(f"\nwritten: {files['csv']}, {files['md']}")
    if comparison.exit_code:
        print(f"significantly slower (> {100 * args.threshold:g}%): {len(comparison.slower)} case(s)", file=sys.stderr)
    return comparison.exit_code


def history_command(args: argparse.Namespace) -> int:
    from gsworkbench.bench.history import plot_history, suite_history
    from gsworkbench.core.atomic import write_table
    from gsworkbench.core.figures import save_figure
    from gsworkbench.core.provenance import machine_summary
    from gsworkbench.core.runs import new_run_dir, write_metadata

    history = suite_history(args.suite, args.root, args.cases)
    out = new_run_dir(f"history-{args.suite}")
    write_metadata(out, {"suite": args.suite, "cases": args.cases, "root": args.root})
    write_table(out / "history.csv", history)
    fig = plot_history(history, max_cases=args.max_cases, footer=f"plotted on {machine_summary()}")
    save_figure(out / "history.png", fig)
    runs = history.drop_duplicates("run")[["run", "commit", "time_utc", "has_samples"]]
    print(runs.to_string(index=False))
    if "pct_of_peak" in history and history.pct_of_peak.notna().any():
        latest = history.drop_duplicates("case", keep="last")
        shown = latest.assign(median_ms=latest.median_s * 1e3)[["case", "commit", "median_ms", "pct_of_peak"]]
        print("\nlatest run of each case, with its share of the machine's roof (%):")
        print(shown.dropna(subset=["pct_of_peak"]).to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    changes = history[history.change.isin(["slower", "faster"])][["run", "commit", "case", "change"]]
    print(f"\nsignificant changes against the previous run: {len(changes)}")
    if len(changes):
        print(changes.to_string(index=False))
    print(f"\nwritten: {out / 'history.csv'}, {out / 'history.png'}")
    return 0


def parse_sweep_values(text: str) -> list[Any]:
    """``"1,2"`` -> [1, 2]; ``"a,b"`` -> ["a", "b"]; ``"[64,128],[256]"`` -> [[64, 128], [256]] (YAML)."""
    import yaml

    values = yaml.safe_load(f"[{text}]")
    if not isinstance(values, list) or not values:
        raise ValueError(f"cannot read sweep values {text!r}: give a comma-separated list")
    return values


def sweep_command(args: argparse.Namespace) -> int:
    from gsworkbench.core.runs import new_run_dir
    from gsworkbench.jupyter import notebook_defaults
    from gsworkbench.jupyter.sweep import notebook_task, run_sweep

    notebook = Path(args.notebook)
    if not notebook.is_file():
        raise ValueError(f"no notebook {notebook}")
    axes = {name: parse_sweep_values(values) for name, values in (args.p or [])}
    if not axes:
        raise ValueError("a sweep needs at least one -p NAME V1,V2")
    unknown = sorted(set(axes) - set(notebook_defaults(notebook)))
    if unknown:
        raise ValueError(f"unknown notebook parameter(s) {unknown} for {notebook.name}")
    out = Path(args.out) if args.out else new_run_dir(f"sweep-{notebook.stem}")
    result = run_sweep(notebook_task(notebook), axes, out, scheduler=args.scheduler, workers=args.workers,
                       run_threads=args.threads)  # fmt: skip
    print(f"\n{len(result.table)} rows from {len(result.table.run.unique())} runs; {len(result.errors)} failed; "
          f"ran {len(result.ran)} of {len(result.table.run.unique()) + len(result.errors)} this time")  # fmt: skip
    if len(result.errors):
        print(result.errors.to_string(index=False))
    print(f"written: {out / 'sweep.csv'}")
    return 1 if len(result.errors) else 0


def add_compare_parsers(sub: Any) -> None:
    """Adds the ``compare``, ``history`` and ``sweep`` subcommands to the CLI's subparsers."""
    from gsworkbench.bench.significance import ALPHA, THRESHOLD

    p = sub.add_parser("compare", help="baseline against candidate (run folders or git revisions), with significance")
    p.add_argument("baseline", help="a results/<run-id>/ folder, or a git revision")
    p.add_argument("candidate", help="a results/<run-id>/ folder, or a git revision")
    p.add_argument("--backends", help="B,C: backend B of the baseline against backend C of the candidate "
                   "(the same run folder twice compares two backends timed in the same rounds)")
    p.add_argument("--suite", help="the suite to run at both revisions (revisions only)")
    p.add_argument("--quick", action="store_true", help="the suite's small cases (revisions only)")
    p.add_argument("--cases", default=None, metavar="REGEX",
                   help="only the matching cases (revisions only; e.g. 'ext/n10000/800x800')")  # fmt: skip
    p.add_argument("--threads", type=int, default=None, help="threads per revision worker (default 1)")
    p.add_argument("--min-run-time", type=float, default=0.5, help="seconds of timing per case and revision")
    p.add_argument("--no-build", action="store_true", help="do not build the revisions' extensions")
    p.add_argument("--alpha", type=float, default=ALPHA,
                   help=f"significance level ({ALPHA:g}; Mann-Whitney U, or Wilcoxon signed-rank for two revisions)")
    p.add_argument("--threshold", type=float, default=THRESHOLD,
                   help=f"smallest slow-down that fails ({THRESHOLD:g} = {100 * THRESHOLD:g}%%)")
    p.add_argument("--out", type=Path, default=None, help="folder for compare.csv/.md (default results/<run-id>/)")
    p.set_defaults(func=compare_command)

    p = sub.add_parser("history", help="every run of a suite under results/ over commits, as a table and plot")
    p.add_argument("suite")
    p.add_argument("--cases", default=None, help="regular expression on case names")
    p.add_argument("--root", default=None, help="results folder to search (default results/)")
    p.add_argument("--max-cases", type=int, default=12, help="cases to plot")
    p.set_defaults(func=history_command)

    p = sub.add_parser("sweep", help="a grid of notebook runs on Dask (LocalCluster or --scheduler)")
    p.add_argument("notebook", type=Path)
    p.add_argument("-p", nargs=2, action="append", metavar=("NAME", "V1,V2"), help="a parameter and its values")
    p.add_argument("--scheduler", default=None, help="address of an existing Dask scheduler")
    p.add_argument("--workers", type=int, default=1, help="LocalCluster workers (default 1: benchmark-safe)")
    p.add_argument("--threads", type=int, default=None, help="threads per run (default: cores / workers)")
    p.add_argument("--out", type=Path, default=None, help="sweep folder; re-use one to resume")
    p.set_defaults(func=sweep_command)
