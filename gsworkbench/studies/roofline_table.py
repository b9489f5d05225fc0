"""The headline roofline table: ``python -m gsworkbench.studies.roofline_table docs/tables/roofline.csv``
runs the headline kernels at 2 threads (``--threads``), three passes (``--rounds``), and writes, one row
a case (and one a stage of each training step), the kernel, its work per call, its quietest pass's
median time and IQR, arithmetic intensity, achieved GFLOP/s and GB/s, % of the machine's roof
(:mod:`gsworkbench.bench.roofline`), a training stage's share of its step and the step's time over its
render forward+backward, the speed-up over the numba peer where there is one, the ceilings, and the
command, commit, CPU and threads. Run it on a quiet machine with ``OMP_WAIT_POLICY=PASSIVE``.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from gsworkbench.bench.ceilings import MachineCeilings, ceilings_enabled, highest_ceilings, measure_ceilings
from gsworkbench.bench.registry import get_suite
from gsworkbench.bench.roofline import add_roofline_columns
from gsworkbench.bench.runner import run_cases
from gsworkbench.core.atomic import write_table
from gsworkbench.core.provenance import cpu_model, short_commit
from gsworkbench.studies.suites import render, train, transforms
from gsworkbench.train.step_work import STEP, step_stage_work
from gsworkbench.train.timers import STAGES

COMMAND = "python -m gsworkbench.studies.roofline_table"
DEFAULT_THREADS = 2
DEFAULT_MIN_RUN_TIME = 1.0  # seconds per case: a few rounds even for the slowest headline case
DEFAULT_ROUNDS = 3  # passes over every case; each case keeps its quietest pass

PEER = "numba"
"""The backend of the peer rows (the field and the transform): fused numba kernels, timed in the same run."""

HEADLINE_SCENES = (("dense", 100_000), ("volumetric", 100_000), ("cloud", 100_000), ("trained", 100_000))
RENDER_STAGES = ("project", "sh", "isect", "rasterize", "forward")
# the training steps broken into stages: (kind, Gaussians, image size); the ``cloud`` kind fills one view's
# frustum only, so a step (which cycles through the train views) would not see what it is built for
TRAIN_STEPS = (("trained", 100_000, (800, 800)),)
UNCOUNTED = {"flops_per_call": math.nan, "bytes_per_call": math.nan}


def headline_cases(tiny: bool = False) -> list[Any]:
    """The headline cases: field forward and forward+backward at N = 4096 x B = 65536 (ext), the render
    ext forward and its stages of 100k ``dense``, ``volumetric``, ``cloud`` and ``trained`` splats at
    800x800, SH degree 3 (and the ``trained`` forward+backward), the training steps of :data:`TRAIN_STEPS`
    (ext; :func:`step_stage_rows` breaks them into stages), the 1M-splat ext transform (SH degrees 0
    and 3, preallocated ``out``) and the fused Adam step at 1M Gaussians; the field and the transform
    also as their numba peers (:data:`PEER`).
    ``tiny``: the same kernels at toy sizes (for tests)."""
    N, B = (100, 200) if tiny else (4096, 65536)
    size, scene_size = ((64, 48), (64, 64)) if tiny else ((800, 800), (800, 800))
    scenes = tuple((kind, 2_000 if tiny else num) for kind, num in HEADLINE_SCENES)
    n_transform, n_adam = (1_000, 2_000) if tiny else (1_000_000, 1_000_000)
    field_names = {f"field/{backend}/N{N}/B{B}/full/{mode}" for mode in ("forward", "forward+backward")
                   for backend in (PEER, "ext")}  # fmt: skip
    out = [c for c in get_suite("field").cases(tiny) if c.name in field_names]
    out += render.scene_cases(scenes, [size], scene_size, stages=RENDER_STAGES)
    out += render.scene_cases(scenes[-1:], [size], scene_size, stages=("forward+backward",))
    out += [train.step_case("ext", kind, 2_000 if tiny else num, size if tiny else step_size)
            for kind, num, step_size in TRAIN_STEPS]  # fmt: skip
    out += transforms.sweep_cases([n_transform], (0, 3), (PEER, "ext"), (True,))
    out += [c for c in get_suite("adam").cases(tiny) if c.name == f"adam/fused/n{n_adam}/visible1"]
    return out


def step_stage_rows(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` (one row a case) with each timed training step's row (case ``train/...``, from the train
    suite) given the counts of its whole step and followed by one row a stage of
    :data:`~gsworkbench.train.timers.STAGES` and one of the time outside them (``unstaged``, not
    counted): case ``<step case>/<stage>``, the stage's median seconds over the timed steps
    (``ms_<stage>``; no IQR) and its counts (:func:`gsworkbench.train.step_work.step_stage_work`, on the
    means over the train views of the intersections and blended evaluations). Adds ``pct_of_step`` (a
    stage's median over its step's, in %) and, on the step's row, ``step_over_forward_backward``: its
    median over that of the render ``forward+backward`` case of the same kind, count and image size in
    ``df`` (NaN without one). A step that did not run (no stage times) keeps its one row."""
    fwd_bwd = {(r["scene"], r["num"], r["width"], r["height"]): r["median_s"] for r in df.to_dict("records")
               if r.get("stage") == "forward+backward"}  # fmt: skip
    rows = []
    for r in df.to_dict("records"):
        if not str(r["case"]).startswith("train/") or pd.isna(r.get(f"ms_{STAGES[0]}", math.nan)):
            rows.append(r)
            continue
        works = step_stage_work(int(r["gaussians"]), int(r["width"]), int(r["height"]), int(r["sh_degree"]),
                                r["mean_n_isects"], r["mean_evaluations"])  # fmt: skip
        ratio = r["median_s"] / fwd_bwd.get((r["scene"], r["num"], r["width"], r["height"]), math.nan)
        rows.append({**r, **works[STEP], "step_over_forward_backward": ratio})
        for stage in (*STAGES, train.UNSTAGED):
            seconds = r[f"ms_{stage}"] / 1e3
            rows.append({"case": f"{r['case']}/{stage}", "median_s": seconds, "iqr_s": math.nan,
                         **works.get(stage, UNCOUNTED), "pct_of_step": 100 * seconds / r["median_s"]})  # fmt: skip
    return pd.DataFrame(rows)


def peer_speedups(kernels: pd.Series, median_s: pd.Series) -> list[float]:
    """For each ``.../ext/...`` kernel, the median of its :data:`PEER` row over its own (NaN elsewhere)."""
    med = dict(zip(kernels, median_s, strict=True))
    return [med.get(k.replace("/ext/", f"/{PEER}/"), math.nan) / m if "/ext/" in k else math.nan
            for k, m in zip(kernels, median_s, strict=True)]  # fmt: skip


def command_line(out: str, threads: int, min_run_time: float, tiny: bool, rounds: int = DEFAULT_ROUNDS) -> str:
    """The command that writes a table with these options to ``out`` (defaults left out)."""
    return (f"{COMMAND} {out}" + (f" --threads {threads}" if threads != DEFAULT_THREADS else "")
            + (f" --min-run-time {min_run_time:g}" if min_run_time != DEFAULT_MIN_RUN_TIME else "")
            + (f" --rounds {rounds}" if rounds != DEFAULT_ROUNDS else "")
            + (" --tiny" if tiny else ""))  # fmt: skip


def roofline_table(threads: int, tiny: bool = False, min_run_time: float = DEFAULT_MIN_RUN_TIME,
                   ceilings: MachineCeilings | None = None, progress: bool = True,
                   rounds: int = DEFAULT_ROUNDS) -> pd.DataFrame:  # fmt: skip
    """Runs :func:`headline_cases` at ``threads`` threads ``rounds`` times and returns one row a case:
    kernel, flops and bytes per call, the quietest round's median seconds and IQR (the cases are timed
    one after another, so a shared machine's slow minutes hit some cases and not others; the lowest of
    the rounds' medians filters them), intensity, achieved GFLOP/s and GB/s, % of the roof, the median
    over the rounds of each round's ext/numba ratio, the ceilings, commit, CPU and threads.
    ``ceilings``: the run's; when not given, measured once a pass and the highest of them kept."""
    measured = []
    frames = []
    for r in range(rounds):
        if ceilings is None and ceilings_enabled():  # once a pass: the highest is the machine's roof
            found = measure_ceilings.__wrapped__(threads)
            measured += [found] if found is not None else []
        df = run_cases(headline_cases(tiny), threads=threads, min_run_time=min_run_time, progress=progress)
        df["round"] = r
        df["speedup_vs_numba"] = peer_speedups(df["case"], df["median_s"])
        frames.append(df)
    if ceilings is None:
        ceilings = highest_ceilings(measured) if measured else None
    runs = pd.concat(frames, ignore_index=True)
    quietest = runs.loc[runs.groupby("case", sort=False).median_s.idxmin()].reset_index(drop=True)
    quietest = step_stage_rows(quietest)
    peer = runs.groupby("case", sort=False).speedup_vs_numba.median()
    df = add_roofline_columns(quietest, ceilings)
    table = pd.DataFrame({
        "kernel": df["case"],
        "flops_per_call": df.get("flops_per_call"),
        "bytes_per_call": df.get("bytes_per_call"),
        "median_s": df["median_s"],
        "iqr_s": df.get("iqr_s"),
        "intensity": df["intensity"],
        "gflops": df["gflops"],
        "gbs": df["gbs"],
        "pct_of_peak": df["pct_of_peak"],
        "pct_of_step": df.get("pct_of_step", math.nan),
        "step_over_forward_backward": df.get("step_over_forward_backward", math.nan),
    })  # fmt: skip
    table["speedup_vs_numba"] = table.kernel.map(peer)
    table["rounds"] = rounds
    table["peak_gflops"] = ceilings.peak_gflops if ceilings else math.nan
    table["bandwidth_gbs"] = ceilings.bandwidth_gbs if ceilings else math.nan
    table["commit"] = short_commit()
    table["cpu"] = cpu_model()
    table["threads"] = threads
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gsworkbench.studies.roofline_table",
                                     description="the headline kernels' share of the machine's roof, as a CSV")
    parser.add_argument("out", type=Path, help="the CSV to write (e.g. docs/tables/roofline.csv)")
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS, help=f"threads (default {DEFAULT_THREADS})")
    parser.add_argument("--min-run-time", type=float, default=DEFAULT_MIN_RUN_TIME,
                        help=f"seconds of timing per case (default {DEFAULT_MIN_RUN_TIME:g})")
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS,
                        help=f"passes over every case; each keeps its quietest (default {DEFAULT_ROUNDS})")
    parser.add_argument("--tiny", action="store_true", help="toy sizes (a check that the command works)")
    args = parser.parse_args(argv)
    table = roofline_table(args.threads, args.tiny, args.min_run_time, rounds=args.rounds)
    table["command"] = command_line(str(args.out), args.threads, args.min_run_time, args.tiny, args.rounds)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_table(args.out, table)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        cols = ["kernel", "median_s", "intensity", "gflops", "gbs", "pct_of_peak", "pct_of_step",
                "step_over_forward_backward", "speedup_vs_numba"]  # fmt: skip
        print(table[cols].to_string(index=False))
    print(f"\nwritten: {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
