"""The ``gsworkbench`` command line.

gsworkbench run NOTEBOOK [-p NAME VALUE]...     one notebook, checked parameters
gsworkbench run-all [--smoke]                   the notebook suite into results/<run-id>/
gsworkbench prepare-smoke DIR                   notebooks with smoke parameters, for nbval
gsworkbench bench SUITE|all [--quick] [--threads N]
gsworkbench compare BASELINE CANDIDATE [--suite S]  two runs or two git revisions, with significance
gsworkbench history SUITE                       every run of a suite over commits, as a plot
gsworkbench sweep NOTEBOOK -p NAME V1,V2 ...     a parameter grid of notebook runs on Dask
gsworkbench env                                 the environment metadata every run records
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def _params(pairs: list[list[str]] | None) -> dict[str, object]:
    from gsworkbench.notebooks import parse_cli_value

    return {name: parse_cli_value(value) for name, value in (pairs or [])}


def _cmd_run(args: argparse.Namespace) -> int:
    from gsworkbench.notebooks import run_notebook

    out = run_notebook(args.notebook, _params(args.p), args.out, progress=True)
    print(f"executed notebook: {out}\nresults in: {out.parent}")
    return 0


def _cmd_run_all(args: argparse.Namespace) -> int:
    from gsworkbench.notebooks import run_all

    run_dir, statuses = run_all(smoke=args.smoke)
    print(f"\nnotebook suite results: {run_dir}")
    for nb, status in statuses:
        files = sorted(p.name for p in (run_dir / nb.stem).glob("*") if p.is_file())
        print(
            f"  {nb.name:<32} {status}   ({len(files)} files: {', '.join(files[:6])}{' ...' if len(files) > 6 else ''})"
        )
    return 0 if all(s == "ok" for _, s in statuses) else 1


def _cmd_prepare_smoke(args: argparse.Namespace) -> int:
    from gsworkbench.notebooks import prepare_smoke

    for p in prepare_smoke(args.dir):
        print(p)
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    import pandas as pd

    from gsworkbench.bench import list_suites, run_suite, save_run

    names = list(list_suites()) if args.suite == "all" else [args.suite]
    for name in names:
        table = run_suite(name, quick=args.quick, threads=args.threads, min_run_time=args.min_run_time)
        params = {"suite": name, "quick": args.quick, "threads": args.threads, "min_run_time": args.min_run_time}
        run_dir = save_run(name, table, params)
        with pd.option_context("display.max_rows", 500, "display.max_columns", 50, "display.width", 250):
            print(table.drop(columns=[c for c in ("case", "samples_s") if c in table]).to_string(index=False))
        print(f"\nwritten: {run_dir}")
    return 0


def _cmd_env(args: argparse.Namespace) -> int:
    from gsworkbench.results import environment

    print(json.dumps(environment(), indent=2, default=str))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gsworkbench", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="run one notebook headless with checked parameters")
    p.add_argument("notebook", type=Path)
    p.add_argument("-p", nargs=2, action="append", metavar=("NAME", "VALUE"), help="a parameter (YAML value)")
    p.add_argument("--out", type=Path, default=None, help="run folder (default: results/<run-id>/)")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("run-all", help="run every notebook in notebooks/ into results/<run-id>/")
    p.add_argument("--smoke", action="store_true", help="use each notebook's small smoke parameters")
    p.set_defaults(func=_cmd_run_all)

    p = sub.add_parser("prepare-smoke", help="inject smoke parameters into copies of the notebooks")
    p.add_argument("dir", type=Path)
    p.set_defaults(func=_cmd_prepare_smoke)

    p = sub.add_parser("bench", help="run a benchmark suite (or 'all') and store its table")
    p.add_argument("suite")
    p.add_argument("--quick", action="store_true", help="small sizes only")
    p.add_argument("--threads", type=int, default=None, help="torch/OpenMP threads (default: all)")
    p.add_argument("--min-run-time", type=float, default=0.5, help="seconds of timing per case")
    p.set_defaults(func=_cmd_bench)

    from gsworkbench.bench.cli_commands import add_compare_parsers

    add_compare_parsers(sub)  # compare, history, sweep

    p = sub.add_parser("env", help="print the environment metadata recorded with every run")
    p.set_defaults(func=_cmd_env)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ValueError as err:  # bad parameters, unknown suites: a message, not a traceback
        print(f"gsworkbench: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
