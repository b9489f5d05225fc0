"""The tile cover's effect, one device, one run: for each splat kind (100k ``trained``, ``volumetric`` and
``dense`` splats, and 300k ``surface`` ones, at 800x800 from the render suite's camera), the tile lists
of the 3-sigma box against the box cut to the alpha support (csrc/include/gsw/tile_cover.h) and against
those lists also cut where their tiles saturate (``cut_saturated``, csrc/include/gsw/tile_saturation.h;
the kernel cuts only long lists of large footprints), the same kernels otherwise. Per list:
intersections, those the rasterizer reads (each tile's list up to its pixels' last blend), and the
medians (with quartiles) of the intersection stage, the rasterize stage and both together, timed in
alternation; and whether the images are equal to the box's to the bit. The splats' colours are their
SH at the camera (the SH stage is not timed).

    python -m gsworkbench.studies.tile_cover_table docs/tables/tile_cover_cpu.csv
    python -m gsworkbench.studies.tile_cover_table --save-splats kinds.pt   # where scenes can be built
    python -m gsworkbench.studies.tile_cover_table --splats kinds.pt --device cuda docs/tables/tile_cover_cuda.csv

Run it on a quiet machine with ``OMP_WAIT_POLICY=PASSIVE``. Each row records the command, commit, device
and threads.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from gsworkbench.core import gaussians
from gsworkbench.core.atomic import write_table
from gsworkbench.core.provenance import cpu_model, short_commit
from gsworkbench.splat import _torch_impl, ops
from gsworkbench.studies.scene_splats import kind_camera, object_scene, scene_splats

COMMAND = "python -m gsworkbench.studies.tile_cover_table"
KINDS = (("trained", 100_000), ("volumetric", 100_000), ("dense", 100_000), ("surface", 300_000))
SIZE = 800


def build_splats(kinds: tuple[tuple[str, int], ...] = KINDS, size: int = SIZE) -> dict[str, dict[str, torch.Tensor]]:
    """Each kind's splats as rasterizer inputs (means, quats, linear scales, opacities, colours [N,3] at
    the camera) and its camera (viewmats [1,4,4], Ks [1,3,3]), built as the render suite builds them."""
    out = {}
    for kind, num in kinds:
        scene = object_scene(size, size)
        s = scene_splats(kind, scene, num, sh_degree=3)
        vm, Ks = kind_camera(kind, scene, size, size)
        colors = _torch_impl.sh_to_color(s.sh, _torch_impl.view_dirs(s.means, vm), 3)[0]
        out[kind] = dict(means=s.means, quats=s.quats, scales=gaussians.scales_from_log(s.log_scales),
                         opacities=gaussians.opacity_from_logit(s.opacity_logits), colors=colors.contiguous(),
                         viewmats=vm, Ks=Ks)  # fmt: skip
    return out


def _quartiles(fn: Callable[[], Any], sync: Callable[[], None], reps: int) -> tuple[float, float, float]:
    """Median, first and third quartile of ``reps`` timings of ``fn`` (seconds)."""
    times = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    q = statistics.quantiles(times, n=4)
    return statistics.median(times), q[0], q[2]


def _kind_rows(kind: str, d: dict[str, torch.Tensor], sync: Callable[[], None], reps: int,
               size: int) -> list[dict[str, Any]]:  # fmt: skip
    """The three rows (``box``, ``cover``, ``saturated``) of one kind's splats ``d`` (on the device already)."""
    ts, tiles = 16, (size + 15) // 16
    radii, m2, depths, conics, _ = ops.project_gaussians(
        d["means"], d["quats"], d["scales"], d["viewmats"], d["Ks"], size, size, 0.3, 0.01, 1e10
    )
    opac, colors = d["opacities"][None].contiguous(), d["colors"][None].contiguous()
    lists = {"box": (), "cover": (conics, opac), "saturated": (conics, opac, True)}

    def isect(extra: tuple) -> tuple:
        return ops.isect_tiles(m2, radii, depths, ts, tiles, tiles, *extra)

    def read(lst: tuple) -> int:
        """Intersections the rasterizer reads: each tile's list up to its pixels' last blend."""
        last = torch.ops.gsworkbench.splat_rasterize(m2, conics, colors, opac, size, size, ts, lst[3], lst[2])[3]
        per_tile = last[0].reshape(tiles, ts, tiles, ts).amax(dim=(1, 3)).reshape(-1).long()
        start = lst[3].reshape(-1).long()
        return int((per_tile - start + 1).clamp_min(0).sum())

    def raster(lst: tuple) -> tuple:
        return ops.rasterize_to_pixels(m2, conics, colors, opac, size, size, ts, lst[3], lst[2])

    made = {name: isect(extra) for name, extra in lists.items()}
    images = {name: raster(lst)[0] for name, lst in made.items()}
    timed: dict[str, dict[str, list]] = {name: {"isect": [], "rasterize": [], "both": []} for name in lists}
    for _ in range(3):  # the lists alternate in rounds, so a drift in the machine hits both
        for name, extra in lists.items():
            timed[name]["isect"].append(_quartiles(lambda e=extra: isect(e), sync, reps))
            timed[name]["rasterize"].append(_quartiles(lambda n=name: raster(made[n]), sync, reps))
            timed[name]["both"].append(_quartiles(lambda e=extra: raster(isect(e)), sync, reps))
    rows = []
    for name in lists:
        row: dict[str, Any] = {"kind": kind, "gaussians": len(d["means"]), "list": name,
                               "intersections": int(made[name][2].numel()),
                               "read_by_rasterizer": read(made[name])}  # fmt: skip
        for stage, runs in timed[name].items():
            med, q1, q3 = min(runs)  # the quietest round's median and quartiles
            row.update({f"{stage}_ms": 1e3 * med, f"{stage}_q1_ms": 1e3 * q1, f"{stage}_q3_ms": 1e3 * q3})
        row["images_equal"] = bool(torch.equal(images[name], images["box"]))
        rows.append(row)
    return rows


def cover_table(splats: dict[str, dict[str, torch.Tensor]], device: str = "cpu", reps: int = 20,
                size: int = SIZE) -> pd.DataFrame:  # fmt: skip
    """One row per kind and list (``box``, ``cover``, ``saturated``): intersections, those read, stage
    medians and quartiles (ms), and ``images_equal`` (the list's image against the box's, to the bit)."""
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    rows = []
    with torch.no_grad():
        for kind, d in splats.items():
            rows += _kind_rows(kind, {k: v.to(device) for k, v in d.items()}, sync, reps, size)
    table = pd.DataFrame(rows)
    table["size"] = f"{size}x{size}"
    table["device"] = torch.cuda.get_device_name() if device.startswith("cuda") else cpu_model()
    table["threads"] = torch.get_num_threads()
    table["torch"] = torch.__version__
    table["commit"] = short_commit()
    table["command"] = f"{COMMAND} --device {device}"
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description="tile lists of the 3-sigma box against the tile cover")
    parser.add_argument("out", type=Path, nargs="?", help="the CSV to write (e.g. docs/tables/tile_cover_cpu.csv)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads (default 2)")
    parser.add_argument("--reps", type=int, default=20, help="timings per stage and round (default 20)")
    parser.add_argument("--splats", type=Path, help="read the kinds' splats from this file (from --save-splats)")
    parser.add_argument("--save-splats", type=Path, help="build the kinds' splats, save them here and stop")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.save_splats is not None:
        torch.save(build_splats(), args.save_splats)
        print(f"written: {args.save_splats}", file=sys.stderr)
        return 0
    if args.out is None:
        parser.error("give the CSV to write (or --save-splats)")
    splats = torch.load(args.splats, weights_only=True) if args.splats is not None else build_splats()
    table = cover_table(splats, args.device, args.reps)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_table(args.out, table)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table[["kind", "list", "intersections", "isect_ms", "rasterize_ms", "both_ms", "images_equal"]]
              .to_string(index=False))  # fmt: skip
    print(f"\nwritten: {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
