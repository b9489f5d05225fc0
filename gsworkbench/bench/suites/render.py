"""``render``: the 3DGS rasterizer (gsworkbench.splat), ext against the torch reference.

Full grid (ext): 10k, 100k, 1M Gaussians x 128^2, 256^2, 512^2, 800^2 x SH degree 0 and 3, forward and
forward+backward; the per-stage breakdown (project, sh, isect, rasterize) at SH degree 3. The torch
reference runs on the small end of the grid (<= 100k Gaussians at <= 256^2, forward+backward only at
10k) and is recorded as skipped elsewhere, as is ext forward+backward for 1M Gaussians above 512^2
(several seconds each on 2 cores). Plus the target case: 2,000 Gaussians at 128^2, SH degree 3,
forward, forward+backward and train-step (L1 loss + backward), each eager and under torch.compile
(aot_eager, inductor), interleaved. quick=True: 500 Gaussians at 64x48 (for tests), with the ext
train-step also under aot_eager. External rasterizers registered
with ``gsworkbench.bench.lineup.register_implementation("rasterize", name, fn)`` join the forward and
forward+backward cases (checked against the torch reference first; see that module).
"""

from __future__ import annotations

from typing import Any

from gsworkbench.bench.lineup import render_lineup_cases
from gsworkbench.bench.registry import Case, register_suite
from gsworkbench.compile import COMPILE_MODES
from gsworkbench.splat.bench import STAGES, WHOLE_CALLS, render_cases, summarize_render

FULL_NUMS = (10_000, 100_000, 1_000_000)
FULL_SIZES = ((128, 128), (256, 256), (512, 512), (800, 800))


def _skip_full(p: dict[str, Any]) -> str | None:
    big = p["width"] * p["height"] > 256 * 256
    if p["backend"] == "torch":
        if p["num"] > 100_000 or big:
            return "torch reference: too slow for this size (sub-sampled grid)"
        if p["stage"] == "forward+backward" and p["num"] > 10_000:
            return "torch reference: backward too slow for this size (sub-sampled grid)"
        if p["stage"] in ("project", "sh", "isect", "rasterize") and p["sh_degree"] != 3:
            return "stage breakdown at SH degree 3 only"
    elif p["stage"] in ("project", "sh", "isect", "rasterize") and p["sh_degree"] != 3:
        return "stage breakdown at SH degree 3 only"
    if p["num"] >= 1_000_000 and p["stage"] == "forward+backward" and big and p["width"] > 512:
        return "1M forward+backward above 512^2: over the suite's time budget"
    return None


def cases(quick: bool) -> list[Case]:
    if quick:
        return (
            render_cases([500], [(64, 48)], [0, 3], ["ext", "torch"], STAGES)
            + render_cases([500], [(64, 48)], [3], ["ext"], ("train-step",), compile_modes=("eager", "aot_eager"))
            + render_lineup_cases([500], [(64, 48)], [0, 3])
        )
    target = render_cases([2_000], [(128, 128)], [3], ["ext", "torch"], WHOLE_CALLS, compile_modes=COMPILE_MODES)
    grid = render_cases(FULL_NUMS, FULL_SIZES, [0, 3], ["ext", "torch"], STAGES, skip=_skip_full)
    lineup = render_lineup_cases([2_000], [(128, 128)], [3]) + render_lineup_cases(
        FULL_NUMS, FULL_SIZES, [0, 3], skip=_skip_full
    )
    return target + grid + lineup


register_suite("render", __doc__.split("\n\n")[0], summarize_render)(cases)
