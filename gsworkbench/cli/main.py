"""The ``gsworkbench`` command line.

gsworkbench run NOTEBOOK [-p NAME VALUE]...      one notebook, checked parameters
gsworkbench params NOTEBOOK                      its parameters: types, defaults, allowed values
gsworkbench run-all [--smoke]                    the notebook suite into results/<run-id>/
gsworkbench prepare-smoke DIR                    notebooks with smoke parameters, for nbval
gsworkbench sync-notebooks [--check]             notebooks/NN_*.ipynb from their .py sources
gsworkbench bench SUITE|all [--quick] [--threads N]
gsworkbench compare BASELINE CANDIDATE [--suite S]  two runs or two git revisions, with significance
gsworkbench history SUITE                        every run of a suite over commits, as a plot
gsworkbench sweep NOTEBOOK -p NAME V1,V2 ...      a parameter grid of notebook runs on Dask
gsworkbench reconstruct PHOTOS [--out DIR]      photos or a video to a posed scene (pycolmap, CPU)
gsworkbench capture PHOTOS [--out DIR]          photos or a video to trained splats, a viewer page, a summary
gsworkbench env                                  the environment metadata every run records
gsworkbench profile WORKLOAD [-p NAME VALUE]...  stages, op table, flamegraph, overheads
gsworkbench profile diff BEFORE AFTER            what changed between two profiles
gsworkbench export SPLATS --to .spz|.splat|.html [-o OUT]  web formats and a standalone viewer page
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import signal
import sys
from pathlib import Path

# Each command imports what it runs inside its function, so a command loads only its own machinery (the
# notebook runner, the benchmark suites, pycolmap, the viewer), not every other command's.

DESCRIPTION = "gsworkbench: run the workbench's notebooks and benchmarks from the command line."
EPILOG = """\
examples (times on a 2-core laptop-class CPU):
  gsworkbench run notebooks/01_gaussian_field.ipynb -p iterations 200       about 1 minute
  gsworkbench params notebooks/03_rendering.ipynb                           every parameter, its allowed values
  gsworkbench run-all --smoke                                               every notebook, small sizes: 2-3 minutes
  gsworkbench bench field --quick                                           under a minute
  gsworkbench bench --help                                                  the benchmark suites

Notebooks and results are the project folder's: the nearest folder above the working folder with the
project's pyproject.toml and notebooks/ (or --project DIR, or GSW_PROJECT_DIR). Results go to its
results/<run-id>/ (set GSW_RESULTS_DIR to change it).
"""
PROJECT_HELP = "the project folder (default: the nearest above the working folder; or GSW_PROJECT_DIR)"


# ---- argument types: every number range-checked ---------------------------------------------------


def _number(kind: type, text: str, lo: float, hi: float | None, what: str) -> int | float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if not (value >= lo and (hi is None or value <= hi)):  # also rejects nan
        raise argparse.ArgumentTypeError(f"expected {what}, got {text}")
    return value


def thread_count(text: str) -> int:
    """1 .. the number of cores."""
    cores = os.cpu_count() or 1
    return int(_number(int, text, 1, cores, f"a thread count from 1 to {cores} (the cores here)"))


def run_time(text: str) -> float:
    """Seconds of timing per case: above 0, at most an hour."""
    value = _number(float, text, 0.0, 3600.0, "seconds in (0, 3600]")
    if value == 0:
        raise argparse.ArgumentTypeError("expected seconds in (0, 3600], got 0")
    return float(value)


# ---- suites, listed without importing them (help stays fast) ---------------------------------------


def suite_summaries() -> dict[str, str]:
    """Benchmark suite name -> the first line of its module docstring (one module per suite)."""
    folder = Path(__file__).resolve().parent.parent / "studies" / "suites"
    out = {}
    for path in sorted(folder.glob("[a-z]*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        first = doc.split("\n\n")[0].replace("\n", " ").replace("``", "")
        out[path.stem] = first.split(": ", 1)[1] if ": " in first else first
    return out


# ---- commands -----------------------------------------------------------------------------------


def _params(notebook: Path, pairs: list[list[str]] | None) -> dict[str, object]:
    from gsworkbench.jupyter import notebook_defaults, parse_cli_value

    defaults = notebook_defaults(notebook)
    return {name: parse_cli_value(value, defaults.get(name)) for name, value in (pairs or [])}


def _cmd_run(args: argparse.Namespace) -> int:
    from gsworkbench.jupyter import run_notebook

    out = run_notebook(args.notebook, _params(args.notebook, args.p), args.out, progress=True)
    print(f"executed notebook: {out}\nresults in: {out.parent}")
    return 0


def _cmd_params(args: argparse.Namespace) -> int:
    from gsworkbench.jupyter import describe_rule, notebook_defaults, notebook_rules, smoke_parameters, type_label

    defaults, rules = notebook_defaults(args.notebook), notebook_rules(args.notebook)
    rows = [("name", "type", "default", "allowed", "")]
    for name, default in defaults.items():
        rule = rules.get(name, {})
        rows.append((name, type_label(default), repr(default), describe_rule(default, rule), rule.get("help", "")))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    print(f"{args.notebook}: parameters (set with -p NAME VALUE)")
    for r in rows:
        print(("  " + "  ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4]).rstrip())
    smoke = " ".join(f"-p {k} {json.dumps(v).replace(' ', '')}" for k, v in smoke_parameters(args.notebook).items())
    print(f"\nsmall, quick parameters (used by the tests): {smoke}")
    return 0


def _project_folders(args: argparse.Namespace) -> str:
    """``--project DIR`` (for this process and the kernels it starts), then one line naming the
    notebooks folder and how it was chosen (a ValueError for a DIR that is not a project folder)."""
    from gsworkbench.core.project import PROJECT_ENV, find_project, is_project_dir

    if getattr(args, "project", None) is not None:
        if not is_project_dir(args.project):
            raise ValueError(f"--project {args.project}: not a gsworkbench project folder "
                             "(no pyproject.toml naming gsworkbench beside a notebooks/ folder)")  # fmt: skip
        os.environ[PROJECT_ENV] = str(args.project.resolve())
    project = find_project()
    return f"notebooks: {project.path / 'notebooks'} ({project.source})"


def _cmd_run_all(args: argparse.Namespace) -> int:
    from gsworkbench.core.project import results_source
    from gsworkbench.jupyter import run_all

    print(_project_folders(args))
    print(f"results: {results_source()}")
    run_dir, statuses = run_all(smoke=args.smoke)
    print(f"\nnotebook suite results: {run_dir}")
    for nb, status in statuses:
        files = sorted(p.name for p in (run_dir / nb.stem).glob("*") if p.is_file())
        more = " ..." if len(files) > 6 else ""
        print(f"  {nb.name:<32} {status}   ({len(files)} files: {', '.join(files[:6])}{more})")
    return 0 if all(s == "ok" for _, s in statuses) else 1


def _cmd_prepare_smoke(args: argparse.Namespace) -> int:
    from gsworkbench.jupyter import prepare_smoke

    print(_project_folders(args), file=sys.stderr)  # stdout lists the prepared notebooks alone
    for p in prepare_smoke(args.dir):
        print(p)
    return 0


def _cmd_sync_notebooks(args: argparse.Namespace) -> int:
    from gsworkbench.jupyter import sync_notebooks

    print(_project_folders(args))
    report = sync_notebooks(check=args.check)
    for line in report:
        print(("stale: " if args.check else "written: ") + line)
    if args.check and report:
        print("run `gsworkbench sync-notebooks` to regenerate the .ipynb from the .py sources", file=sys.stderr)
        return 1
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    import pandas as pd

    import gsworkbench.studies.suites  # noqa: F401  (registers the built-in suites)
    from gsworkbench.bench import list_suites, run_suite, save_run

    names = list(list_suites()) if args.suite == "all" else [args.suite]
    for name in names:
        table = run_suite(
            name, quick=args.quick, threads=args.threads, min_run_time=args.min_run_time, cases=args.cases
        )
        params = {"suite": name, "quick": args.quick, "threads": args.threads, "min_run_time": args.min_run_time}
        if args.cases:
            params["cases"] = args.cases
        run_dir = save_run(name, table, params)
        with pd.option_context("display.max_rows", 500, "display.max_columns", 50, "display.width", 250):
            shown = table.drop(columns=[c for c in ("case", "samples_s", "curve") if c in table])  # long: CSV only
            print(shown.to_string(index=False))
        print(f"\nwritten: {run_dir}")
    return 0


def _cmd_quality(args: argparse.Namespace) -> int:
    from gsworkbench.studies.quality import quality_table

    seeds = [int(x) for x in args.seeds.split(",")] if args.seeds else None
    table, folder = quality_table(args.runs, args.out, seeds)
    print(table.to_string(index=False))
    print(f"table: {folder / 'quality.csv'}")
    return 0


def _cmd_reconstruct(args: argparse.Namespace) -> int:
    from gsworkbench.core.figures import save_figure
    from gsworkbench.core.runs import new_run_dir, write_metadata
    from gsworkbench.sfm import reconstruct
    from gsworkbench.sfm.sfm_report import plot_cameras

    out = args.out if args.out is not None else new_run_dir("reconstruct") / "scene"
    options = dict(camera=args.camera, camera_model=args.camera_model, max_size=args.max_size,
                   matcher=args.matcher, video_frames=args.video_frames)  # fmt: skip
    try:
        folder = reconstruct(args.photos, out, overwrite=args.overwrite, **options)
    except FileNotFoundError as err:
        raise ValueError(str(err)) from None
    write_metadata(folder, {"photos": str(args.photos), **options})
    import pycolmap

    fig = plot_cameras(pycolmap.Reconstruction(str(folder / "sparse" / "0")), f"{args.photos.name}: cameras and points")
    save_figure(folder / "cameras.png", fig)
    print(f"scene: {folder}  (train it: load_scene('{folder}'), or notebook 07 with -p photos {args.photos})")
    return 0


def _cmd_capture(args: argparse.Namespace) -> int:
    from gsworkbench.capture import capture
    from gsworkbench.core.runs import new_run_dir

    out = args.out if args.out is not None else new_run_dir("capture")
    options = dict(camera=args.camera, camera_model=args.camera_model, max_size=args.max_size,
                   matcher=args.matcher, video_frames=args.video_frames)  # fmt: skip
    try:
        result = capture(args.photos, out, preset=args.preset, iterations=args.iterations or None, seed=args.seed,
                         overwrite=args.overwrite, **options)  # fmt: skip
    except FileNotFoundError as err:
        raise ValueError(str(err)) from None
    print(f"splats: {result.splats}\nviewer: {result.viewer or '(not written: the browser bundle is not built)'}\n"
          f"summary: {result.summary}")  # fmt: skip
    return 0


def _cmd_env(args: argparse.Namespace) -> int:
    from gsworkbench.core.provenance import environment

    print(json.dumps(environment(), indent=2, default=str))
    return 0


EXPORT_FORMATS = (".spz", ".splat", ".html")


def _cmd_export(args: argparse.Namespace) -> int:
    from gsworkbench.io.read import splat_file
    from gsworkbench.viewer.data import as_splats

    source = splat_file(args.splats)  # a run folder: its splats.ply
    splats = as_splats(source)
    out = args.out if args.out is not None else source.with_suffix(args.to)
    if out.resolve() == source.resolve():
        raise ValueError(f"{out}: the output would overwrite the input")
    if args.to == ".spz":
        from gsworkbench.io.spz import write_spz

        write_spz(out, splats)
    elif args.to == ".splat":
        from gsworkbench.io.dotsplat import write_splat

        write_splat(out, splats)
    else:
        from gsworkbench.viewer.page import save_viewer_html

        try:
            save_viewer_html(out, splats, width=args.width, height=args.height)
        except RuntimeError as err:  # the browser bundle was not built
            print(f"gsworkbench: error: {err}", file=sys.stderr)
            return 1
    print(f"written: {out} ({len(splats)} splats, {out.stat().st_size:,} bytes; "
          f"the input {source.name}: {source.stat().st_size:,} bytes)")  # fmt: skip
    return 0


def _version() -> str:
    from gsworkbench import __version__
    from gsworkbench.core.provenance import git_output

    commit = git_output("rev-parse", "--short", "HEAD")
    return f"gsworkbench {__version__}" + (f" (commit {commit})" if commit else "")


def profile_params(pairs: list[list[str]] | None) -> dict[str, object]:
    """``profile``'s ``-p NAME VALUE`` pairs: numbers, else YAML (``1000:4`` stays text, which
    TrainConfig parses as a resolution schedule)."""
    from gsworkbench.jupyter import parse_cli_value

    return {name: parse_cli_value(value) for name, value in pairs or []}


def _cmd_profile(args: argparse.Namespace) -> int:
    from gsworkbench.cli.profile_command import profile_command

    return profile_command(args.target, profile_params(args.p), vars(args))


def _add_profile_parser(sub: argparse._SubParsersAction) -> None:
    from gsworkbench.bench.significance import ALPHA, THRESHOLD

    p = sub.add_parser(
        "profile",
        help="profile a workload (train:<preset>, render, field), or 'diff BEFORE AFTER' two profile runs",
        description="gsworkbench profile WORKLOAD [-p NAME VALUE]...  |  gsworkbench profile diff BEFORE AFTER",
    )
    p.add_argument("target", nargs="+", metavar="WORKLOAD | diff BEFORE AFTER")
    p.add_argument("-p", nargs=2, action="append", metavar=("NAME", "VALUE"), help="a workload parameter")
    p.add_argument("--repeats", type=int, default=7,
                   help="timed runs for the stage breakdown (default 7, the fewest the diff's test can judge)")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs first (default 1)")
    p.add_argument("--rate", type=int, default=100, help="py-spy samples per second (default 100)")
    p.add_argument("--sample-s", dest="sample_s", type=float, default=3.0, help="seconds of py-spy sampling")
    p.add_argument("--no-pyspy", dest="pyspy_enabled", action="store_false", help="skip the py-spy flamegraph")
    p.add_argument("--no-native", dest="native", action="store_false", help="py-spy without --native")
    p.add_argument("--record-shapes", action="store_true", help="op table per input shape")
    p.add_argument("--top", type=int, default=15, help="rows of the printed op tables (default 15)")
    p.add_argument("--alpha", type=float, default=ALPHA,
                   help=f"diff: Mann-Whitney U p-value threshold (default {ALPHA:g})")
    p.add_argument("--min-change", type=float, default=THRESHOLD,
                   help=f"diff: smallest relative change (default {THRESHOLD:g})")
    p.add_argument("--out", type=Path, default=None, help="run folder (default: results/<run-id>/)")
    p.set_defaults(func=_cmd_profile)


def _add_reconstruct_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reconstruct", help="photos (a folder or a video) to a posed scene, with pycolmap on the CPU",
                       description="Photos to a posed scene folder (images/, sparse/0/, report.json) that "
                                   "load_scene reads. Ctrl-C keeps the work; the same command goes on "
                                   "from there.")  # fmt: skip
    p.add_argument("--out", type=Path, default=None, help="scene folder (default: results/<run-id>/scene)")
    _add_photo_options(p)
    p.set_defaults(func=_cmd_reconstruct)
    p = sub.add_parser("capture", help="photos (a folder or a video) to trained splats you can orbit",
                       description="Photos to poses, splats trained with the capture preset, held-out photos "
                                   "scored, and OUT/splats.ply, OUT/viewer.html and OUT/summary.html written. "
                                   "Ctrl-C keeps what each stage finished; the same command goes on.")  # fmt: skip
    p.add_argument("--out", type=Path, default=None, help="capture folder (default: results/<run-id>/)")
    p.add_argument("--preset", choices=("capture", "short", "smoke"), default="capture",
                   help="training schedule (default capture)")  # fmt: skip
    p.add_argument("--iterations", type=int, default=0, help="training steps (default: the preset's)")
    p.add_argument("--seed", type=int, default=0, help="the mapper's and the training's seed")
    _add_photo_options(p)
    p.set_defaults(func=_cmd_capture)


def _add_photo_options(p: argparse.ArgumentParser) -> None:
    """The photos argument and the reconstruction options that ``reconstruct`` and ``capture`` share."""
    from gsworkbench.sfm.pipeline import CAMERA_MODELS, CAMERA_MODES, MATCHERS, ReconstructOptions

    d = ReconstructOptions()
    p.add_argument("photos", type=Path, help="a folder of JPEG/PNG photos, or a video file")
    p.add_argument("--camera", choices=CAMERA_MODES, default=d.camera,
                   help=f"cameras shared per lens (sizes a few px apart cropped to one), per image size, by all, "
                        f"or one per image (default {d.camera})")  # fmt: skip
    p.add_argument("--camera-model", choices=CAMERA_MODELS, default=d.camera_model,
                   help="COLMAP's lens model; auto: OPENCV for a camera of 10+ photos, else SIMPLE_RADIAL")  # fmt: skip
    p.add_argument("--max-size", type=int, default=d.max_size,
                   help=f"long side of the working images (default {d.max_size})")  # fmt: skip
    p.add_argument("--matcher", choices=MATCHERS, default=d.matcher,
                   help=f"auto: exhaustive up to {d.exhaustive_max} images, else retrieval (a vocabulary "
                        "tree of the photos' own features) and name-order neighbours; videos: sequential "
                        "and retrieval")  # fmt: skip
    p.add_argument("--video-frames", type=int, default=d.video_frames, help="frames kept of a video at most")
    p.add_argument("--overwrite", action="store_true", help="start again in an --out that holds another run's work")


def build_parser() -> argparse.ArgumentParser:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(prog="gsworkbench", description=DESCRIPTION, epilog=EPILOG, formatter_class=raw)
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("run", help="run one notebook headless with checked parameters")
    p.add_argument("notebook", type=Path, help="a notebooks/NN_*.ipynb file (or its .py source)")
    p.add_argument("-p", nargs=2, action="append", metavar=("NAME", "VALUE"),
                   help="set a parameter (repeatable); see `gsworkbench params NOTEBOOK`")  # fmt: skip
    p.add_argument("--out", type=Path, default=None, help="run folder (default: results/<run-id>/)")
    p.add_argument("--verbose", action="store_true", help="on failure, show the cell's full traceback")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("params", help="list a notebook's parameters: types, defaults, allowed values")
    p.add_argument("notebook", type=Path)
    p.set_defaults(func=_cmd_params)

    p = sub.add_parser("run-all", help="run every notebook in notebooks/ into results/<run-id>/")
    p.add_argument("--smoke", action="store_true", help="use each notebook's small smoke parameters")
    p.add_argument("--project", type=Path, default=None, help=PROJECT_HELP)
    p.set_defaults(func=_cmd_run_all)

    p = sub.add_parser("prepare-smoke", help="inject smoke parameters into copies of the notebooks (for nbval)")
    p.add_argument("dir", type=Path)
    p.add_argument("--project", type=Path, default=None, help=PROJECT_HELP)
    p.set_defaults(func=_cmd_prepare_smoke)

    p = sub.add_parser("sync-notebooks", help="write every notebooks/NN_*.ipynb from its .py source")
    p.add_argument("--check", action="store_true", help="only compare; exit 1 when any .ipynb is stale")
    p.add_argument("--project", type=Path, default=None, help=PROJECT_HELP)
    p.set_defaults(func=_cmd_sync_notebooks)

    suites = suite_summaries()
    listing = "\n".join(f"  {name:<12} {text}" for name, text in {**suites, "all": "every suite above"}.items())
    p = sub.add_parser("bench", help="run a benchmark suite (or all) and store its table",
                       description=f"Run a benchmark suite and store its table.\n\nsuites:\n{listing}",
                       formatter_class=raw)  # fmt: skip
    p.add_argument("suite", choices=[*suites, "all"], metavar="SUITE", help="one of: " + ", ".join([*suites, "all"]))
    p.add_argument("--quick", action="store_true", help="small sizes only")
    p.add_argument("--threads", type=thread_count, default=None, help="torch/OpenMP threads (default: all cores)")
    p.add_argument("--min-run-time", type=run_time, default=0.5, help="seconds of timing per case (default 0.5)")
    p.add_argument("--cases", default=None, metavar="REGEX",
                   help="only the cases whose name matches (e.g. 'n2000/'): the table's case column")  # fmt: skip
    p.set_defaults(func=_cmd_bench)

    from gsworkbench.cli.bench_commands import add_compare_parsers

    add_compare_parsers(sub)  # compare, history, sweep

    from gsworkbench.studies.quality import RUNS

    p = sub.add_parser("quality", help="train named runs on the built-in scenes; a table of test PSNR/SSIM")
    p.add_argument("runs", nargs="+", choices=list(RUNS), metavar="RUN", help="one or more of: " + ", ".join(RUNS))
    p.add_argument("--out", type=Path, default=None, help="folder for the table and runs (default: results/<run-id>/)")
    p.add_argument("--seeds", default="", help="comma-separated training seeds: each run once per seed (e.g. 0,1,2)")
    p.set_defaults(func=_cmd_quality)

    _add_reconstruct_parser(sub)

    p = sub.add_parser("env", help="print the environment metadata recorded with every run")
    p.set_defaults(func=_cmd_env)

    _add_profile_parser(sub)

    p = sub.add_parser("export", help="write splats as .spz, .splat, or a standalone viewer page (.html)")
    p.add_argument("splats", type=Path,
                   help="a splat file (.ply Inria 3DGS, .spz, .splat), or a run folder holding splats.ply")  # fmt: skip
    p.add_argument("--to", required=True, choices=EXPORT_FORMATS, help="the output format")
    p.add_argument("-o", "--out", type=Path, default=None,
                   help="output file (default: the input's name with the new suffix)")  # fmt: skip
    p.add_argument("--width", type=int, default=None, help=".html: page width in pixels (default 960)")
    p.add_argument("--height", type=int, default=None, help=".html: page height in pixels (default 540)")
    p.set_defaults(func=_cmd_export)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    args = build_parser().parse_args(argv)
    from gsworkbench.jupyter import NotebookFailed, NotebookKernelDied

    try:
        return args.func(args)
    except NotebookFailed as err:  # one short block; the full traceback on request
        if getattr(args, "verbose", False):
            from papermill.exceptions import strip_color

            print(strip_color("\n".join(err.traceback)), file=sys.stderr)
        print(f"gsworkbench: {err}", file=sys.stderr)
        if not getattr(args, "verbose", False):
            print("  (--verbose shows the full traceback)", file=sys.stderr)
        return 1
    except NotebookKernelDied as err:  # one line: the cell, the signal, what was kept, how to go on
        print(f"gsworkbench: {err}", file=sys.stderr)
        return 1
    except (ValueError, OSError) as err:  # bad parameters, missing files, an unusable --out: one line
        print(f"gsworkbench: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:  # one line: what stopped, what was kept (NotebookInterrupted says)
        print(f"gsworkbench: {str(err) or 'interrupted'}", file=sys.stderr)
        return 128 + int(getattr(err, "signum", signal.SIGINT))  # 130 for Ctrl-C, 143 for SIGTERM


if __name__ == "__main__":
    sys.exit(main())
