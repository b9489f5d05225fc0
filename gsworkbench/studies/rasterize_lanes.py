"""Why the rasterizer sits far below the machine's peak: its SIMD lanes and threads, counted.

For each splat kind (100k ``trained``, ``volumetric`` and ``dense`` splats at 800x800, the render
suite's camera, the tile cover's lists), one forward with the counting twin of the CPU kernel
(:func:`gsworkbench.splat.ops.rasterize_lane_counts`) and timed runs of the plain kernel give:

- the per-pixel model's evaluations (``model_evaluations``: each pixel's list up to its last blend,
  the count behind the roofline table's rasterize rows) against the kernel's own work: the
  tile-Gaussian pairs whose support reaches a row of the tile, the chunk blends and their lanes;
- the share of those lanes whose pixel was still compositing (``active_pct``) and of those that
  blended (``blended_pct``);
- the lanes' flop rate (every evaluated lane counted at the model's 34 + 2 x channels flops) against
  the float32 FMA peak, beside the model's (``lane_pct_of_peak``, ``model_pct_of_peak``);
- the threads' balance: the busiest thread's time inside its tiles over the mean (``imbalance``, from
  the counting run, whose counting slows every tile alike).

    python -m gsworkbench.studies.rasterize_lanes docs/tables/rasterize_lanes.csv

Run it on a quiet machine with ``OMP_WAIT_POLICY=PASSIVE``; each row records the command, commit, CPU,
threads and the run's ceilings.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from gsworkbench.bench.ceilings import run_ceilings
from gsworkbench.core.atomic import write_table
from gsworkbench.core.provenance import cpu_model, short_commit
from gsworkbench.splat import ops
from gsworkbench.studies.tile_cover_table import build_splats

COMMAND = "python -m gsworkbench.studies.rasterize_lanes docs/tables/rasterize_lanes.csv"
KINDS = (("trained", 100_000), ("volumetric", 100_000), ("dense", 100_000))
SIZE = 800


def kind_row(kind: str, d: dict[str, torch.Tensor], size: int, reps: int, peak_gflops: float) -> dict[str, Any]:
    """One kind's row: counts from the counting forward, the plain forward's median time, the shares."""
    ts, tiles = 16, (size + 15) // 16
    radii, m2, depths, conics, _ = ops.project_gaussians(
        d["means"], d["quats"], d["scales"], d["viewmats"], d["Ks"], size, size, 0.3, 0.01, 1e10
    )
    opac, colors = d["opacities"][None].contiguous(), d["colors"][None].contiguous()
    _, _, flatten_ids, offsets = ops.isect_tiles(m2, radii, depths, ts, tiles, tiles, conics, opac)
    args = (m2, conics, colors, opac, size, size, ts, offsets, flatten_ids)
    last = torch.ops.gsworkbench.splat_rasterize(*args)[3]
    counts = ops.rasterize_lane_counts(*args)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        torch.ops.gsworkbench.splat_rasterize(*args)
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    q = statistics.quantiles(times, n=4)
    channels = colors.shape[-1]
    flops_per_eval = ops.rasterize_flops_per_evaluation(channels)
    model = ops.blended_evaluations(offsets, last, ts)
    lanes = counts.lanes
    return {
        "kind": kind,
        "gaussians": int(d["means"].shape[0]),
        "intersections": int(flatten_ids.numel()),
        "model_evaluations": model,
        "pairs_reaching_rows": counts.pairs,
        "chunk_blends": counts.blends,
        "lanes": lanes,
        "lanes_active": counts.active,
        "lanes_blended": counts.blended,
        "active_pct": 100 * counts.active / max(lanes, 1),
        "blended_pct": 100 * counts.blended / max(lanes, 1),
        "rasterize_ms": 1e3 * med,
        "rasterize_q1_ms": 1e3 * q[0],
        "rasterize_q3_ms": 1e3 * q[2],
        "lane_gflops": lanes * flops_per_eval / med / 1e9,
        "lane_pct_of_peak": 100 * lanes * flops_per_eval / med / 1e9 / peak_gflops,
        "model_pct_of_peak": 100 * model * flops_per_eval / med / 1e9 / peak_gflops,
        "threads_used": counts.threads,
        "imbalance": counts.busy_max_s / (counts.busy_sum_s / counts.threads) if counts.busy_sum_s > 0 else math.nan,
    }


def lanes_table(splats: dict[str, dict[str, torch.Tensor]], reps: int = 20, size: int = SIZE,
                peak_gflops: float | None = None) -> pd.DataFrame:  # fmt: skip
    """One row per kind (see the module's docstring); ``peak_gflops``: measured here when not given."""
    threads = torch.get_num_threads()
    bandwidth = math.nan
    if peak_gflops is None:
        ceilings = run_ceilings(threads)
        peak_gflops = ceilings.peak_gflops if ceilings else math.nan
        bandwidth = ceilings.bandwidth_gbs if ceilings else math.nan
    with torch.no_grad():
        rows = [kind_row(kind, d, size, reps, peak_gflops) for kind, d in splats.items()]
    table = pd.DataFrame(rows)
    table["size"] = f"{size}x{size}"
    table["peak_gflops"] = peak_gflops
    table["bandwidth_gbs"] = bandwidth
    table["cpu"] = cpu_model()
    table["threads"] = threads
    table["torch"] = torch.__version__
    table["commit"] = short_commit()
    table["command"] = (COMMAND + (f" --threads {threads}" if threads != 2 else "")
                        + (f" --reps {reps}" if reps != 20 else ""))  # fmt: skip
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gsworkbench.studies.rasterize_lanes",
                                     description="the CPU rasterizer's lanes and threads, counted, per splat kind")
    parser.add_argument("out", type=Path, help="the CSV to write (e.g. docs/tables/rasterize_lanes.csv)")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads (default 2)")
    parser.add_argument("--reps", type=int, default=20, help="timings of the plain forward per kind (default 20)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    table = lanes_table(build_splats(KINDS, SIZE), args.reps)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_table(args.out, table)
    cols = ["kind", "model_evaluations", "lanes", "active_pct", "blended_pct", "rasterize_ms", "lane_pct_of_peak",
            "model_pct_of_peak", "imbalance"]  # fmt: skip
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table[cols].to_string(index=False))
    print(f"\nwritten: {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
