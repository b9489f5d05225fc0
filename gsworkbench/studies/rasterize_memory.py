"""Measured peak memory of ``rasterize`` (ext backend) against its estimate
(:func:`gsworkbench.splat.memory_estimate.rasterize_bytes`).

Each case runs in a fresh Python process, so nothing an earlier case left allocated (torch's and
glibc's free lists, the extension's per-thread scratch) hides part of its peak. In that process the
inputs are built, one tiny render warms up the libraries (thread pools, op registration), and then
:func:`gsworkbench.bench.peak_rss.peak_rss_increase_mib` measures how far the resident set rises above
its level just before the call: torch tensors and the extension's own buffers alike. The case's
estimate is computed with the number of tile intersections the call found (the up-front check in
``rasterize`` knows pixels and Gaussians only; see :mod:`gsworkbench.splat.memory_estimate`).

The table in docs/tables/rasterize_memory.csv is written by
``python -m gsworkbench.studies.rasterize_memory docs/tables/rasterize_memory.csv`` (one case at a time;
the largest peaks at about 1 GiB).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from gsworkbench.core.provenance import short_commit


@dataclass(frozen=True)
class MemoryCase:
    """One measured render: ``num`` synthetic Gaussians into ``cameras`` orbit views of ``width`` x
    ``height`` pixels; plain RGB colours [N,3] (``sh_degree`` None) or SH coefficients of that degree;
    ``grad``: forward and the backward of sum(colours) + sum(alphas) to every input, else forward
    under ``torch.no_grad()``; ``backgrounds``: a grey background composited behind; ``render_mode``
    as ``rasterize`` takes it."""

    num: int
    width: int
    height: int
    sh_degree: int | None = None
    grad: bool = False
    cameras: int = 1
    backgrounds: bool = False
    render_mode: str = "RGB"


# pixel-heavy (few Gaussians, up to 16 MP) and Gaussian-heavy (up to 1M at a small image), forward and
# forward+backward, then backgrounds and expected depth; peaks stay under about 1 GiB so the table can
# be rebuilt on a shared machine
TABLE_CASES = (
    MemoryCase(1_000, 1000, 1000),
    MemoryCase(1_000, 1000, 1000, grad=True),
    MemoryCase(1_000, 2000, 2000),
    MemoryCase(1_000, 2000, 2000, grad=True),
    MemoryCase(1_000, 4000, 4000),
    MemoryCase(1_000, 4000, 4000, grad=True),
    MemoryCase(100_000, 256, 256),
    MemoryCase(100_000, 256, 256, grad=True),
    MemoryCase(1_000_000, 256, 256),
    MemoryCase(1_000_000, 256, 256, grad=True),
    MemoryCase(1_000_000, 256, 256, sh_degree=3),
    MemoryCase(1_000_000, 256, 256, sh_degree=3, grad=True),
    MemoryCase(100_000, 512, 512, sh_degree=3, grad=True, cameras=4),
    MemoryCase(1_000, 4000, 4000, backgrounds=True),
    MemoryCase(1_000, 4000, 4000, backgrounds=True, grad=True),
    MemoryCase(1_000, 2000, 2000, render_mode="RGB+ED", grad=True),
)


def _inputs(case: MemoryCase) -> tuple[list[Any], Any, Any]:
    """The leaves (means, quats, scales, opacities, colours) and the cameras (viewmats, Ks) of ``case``."""
    from gsworkbench.core import cameras
    from gsworkbench.core.splats import synthetic_splats

    s = synthetic_splats(case.num, 0 if case.sh_degree is None else case.sh_degree, seed=0)
    colors = s.sh.clone() if case.sh_degree is not None else s.sh[:, 0].clone()
    leaves = [s.means.clone(), s.quats.clone(), s.scales.clone(), s.opacities.clone(), colors]
    for t in leaves:
        t.requires_grad_(case.grad)
    vm, Ks = cameras.orbit_cameras(case.cameras, case.width, case.height, distance=3.0)
    return leaves, vm, Ks


def measure_in_process(case: MemoryCase) -> dict[str, Any]:
    """Peak resident-set increase of one render of ``case`` in this process (bytes), its tile
    intersections and the estimate. Meant for a fresh process: :func:`measure` runs it in one."""
    import torch

    from gsworkbench.bench.peak_rss import peak_rss_increase_mib
    from gsworkbench.splat import rasterize
    from gsworkbench.splat.memory_estimate import rasterize_bytes

    warm_leaves, warm_vm, warm_Ks = _inputs(dataclasses.replace(case, num=100, width=64, height=64, cameras=1))
    leaves, vm, Ks = _inputs(case)
    sh = case.sh_degree

    def render(ts: list[Any], viewmats: Any, Ks_: Any, width: int, height: int) -> dict[str, Any]:
        bg = torch.full((viewmats.shape[0], 3), 0.5) if case.backgrounds else None
        with torch.set_grad_enabled(case.grad):
            img, alpha, meta = rasterize(*ts, viewmats, Ks_, width, height, sh_degree=sh, backgrounds=bg,
                                         render_mode=case.render_mode, backend="ext")  # fmt: skip
            if case.grad:
                (img.sum() + alpha.sum()).backward()
        return {"n_isects": int(meta["n_isects"])}

    render(warm_leaves, warm_vm, warm_Ks, 64, 64)
    out: dict[str, Any] = {}
    peak_mib = peak_rss_increase_mib(lambda: out.update(render(leaves, vm, Ks, case.width, case.height)))
    depth_only = case.render_mode in ("D", "ED")
    D = 1 if depth_only else 3 + (case.render_mode in ("RGB+D", "RGB+ED"))
    k = leaves[4].shape[1] if sh is not None and not depth_only else 0
    estimate = rasterize_bytes(
        case.cameras, case.width, case.height, D, 4, "ext", 16, case.backgrounds, case.grad,
        n_gaussians=case.num, sh_bases=k, n_isects=out["n_isects"],
        expected_depth=case.render_mode in ("ED", "RGB+ED"), threads=torch.get_num_threads(),
    )  # fmt: skip
    return {**dataclasses.asdict(case), "n_isects": out["n_isects"], "threads": torch.get_num_threads(),
            "peak_bytes": int(peak_mib * 2**20), "estimate_bytes": estimate}  # fmt: skip


def measure(case: MemoryCase, timeout_s: float = 600.0) -> dict[str, Any]:
    """:func:`measure_in_process` of ``case`` in a fresh Python process; RuntimeError (with the child's
    last error line) when that process fails."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])]))
    env.pop("GSW_MEMORY_LIMIT", None)  # the measured call must run, not be refused
    cmd = [sys.executable, "-m", "gsworkbench.studies.rasterize_memory", "--case", json.dumps(dataclasses.asdict(case))]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s, check=False)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"measuring {case} failed (exit {proc.returncode}): {last}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def memory_table(cases: tuple[MemoryCase, ...] = TABLE_CASES) -> pd.DataFrame:
    """One row per case, measured one at a time: sizes, intersections, measured peak and estimate (MiB),
    their ratio (estimate / measured) and the commit measured (:func:`~gsworkbench.core.provenance.short_commit`)."""
    rows = [measure(c) for c in cases]
    df = pd.DataFrame(rows)
    df["peak_mib"] = (df.pop("peak_bytes") / 2**20).round(1)
    df["estimate_mib"] = (df.pop("estimate_bytes") / 2**20).round(1)
    df["estimate_over_peak"] = (df["estimate_mib"] / df["peak_mib"]).round(2)
    df["sh_degree"] = df["sh_degree"].astype("Int64")
    df["commit"] = short_commit()
    return df


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], prog="python -m gsworkbench.studies.rasterize_memory"
    )
    p.add_argument("csv", nargs="?", help="write the table of TABLE_CASES here (CSV)")
    p.add_argument("--case", help="internal: measure one case (JSON of MemoryCase) in this process")
    args = p.parse_args(argv)
    if args.case:
        print(json.dumps(measure_in_process(MemoryCase(**json.loads(args.case)))))
        return 0
    df = memory_table()
    if args.csv:
        df.to_csv(args.csv, index=False)
    print(df.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
