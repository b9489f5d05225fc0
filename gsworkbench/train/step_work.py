"""The work of one training step, stage by stage, for the roofline (:mod:`gsworkbench.bench.roofline`).

:func:`step_stage_work` counts each stage of :data:`gsworkbench.train.timers.STAGES` for one view with
the kernels' own counts (:mod:`gsworkbench.splat.ops`, :func:`gsworkbench.train.adam.adam_step_bytes`)
and says NaN where there is none. What each count leaves out is in docs/roofline.md.
"""

from __future__ import annotations

import math

from gsworkbench.splat.ops import (
    isect_work,
    project_work,
    rasterize_backward_work,
    rasterize_work,
    sh_work,
)
from gsworkbench.train.adam import adam_step_bytes
from gsworkbench.train.timers import STAGES

STEP = "step"  # the key of the whole step's counts in step_stage_work's answer


def parameter_values(num: int, sh_degree: int) -> int:
    """The trained values of ``num`` Gaussians: mean 3, quaternion 4, log-scales 3, opacity logit 1 and
    3 (d + 1)^2 SH coefficients each."""
    return num * (11 + 3 * (sh_degree + 1) ** 2)


def step_stage_work(
    num: int, width: int, height: int, sh_degree: int, n_isects: float, evaluations: float | None = None,
    tile_size: int = 16, channels: int = 3, itemsize: int = 4,
) -> dict[str, dict[str, float]]:  # fmt: skip
    """``flops_per_call`` and ``bytes_per_call`` of each stage of one training step (keys: the stages of
    :data:`~gsworkbench.train.timers.STAGES`, and :data:`STEP` for their sums) on one view of ``width`` x
    ``height`` with ``n_isects`` tile intersections and the forward's ``evaluations``
    (:func:`~gsworkbench.splat.ops.blended_evaluations`; None or NaN: the rasterizer's bound), ``num``
    Gaussians at ``sh_degree``, dense Adam:

    - ``project``, ``sh``, ``isect``: the forward stages' counts;
    - ``rasterize``: the forward keeping the state its backward reads;
    - ``loss``: bytes only, the rendered and the target image read and the SSIM gradient image written
      (the fused photometric kernel); its flops (L1 and SSIM's windowed sums) are not counted (NaN);
    - ``backward``: the rasterize backward's count; the backward of the loss, the background, SH, the
      projection and the activations are not counted;
    - ``optimizer``: :func:`~gsworkbench.train.adam.adam_step_bytes` of every parameter value
      (:func:`parameter_values`);
    - ``prepare`` and ``densify``: not counted (NaN).

    :data:`STEP`: the sum of the counted flops (sh, rasterize, backward) and of the counted bytes."""
    if evaluations is not None and math.isnan(evaluations):
        evaluations = None
    evals = None if evaluations is None else round(evaluations)
    isects = round(n_isects)
    image = width * height * channels * itemsize
    nan = {"flops_per_call": math.nan, "bytes_per_call": math.nan}
    adam = float(adam_step_bytes(parameter_values(num, sh_degree), itemsize))
    works = {
        "prepare": nan,
        "project": project_work(num, itemsize=itemsize),
        "sh": sh_work(num, sh_degree, itemsize=itemsize),
        "isect": isect_work(num, isects, width, height, tile_size),
        "rasterize": rasterize_work(isects, width, height, tile_size, channels, itemsize=itemsize, evaluations=evals,
                                    keep_state=True),  # fmt: skip
        "loss": {"flops_per_call": math.nan, "bytes_per_call": float(3 * image)},
        "backward": rasterize_backward_work(num, isects, width, height, tile_size, channels, itemsize=itemsize,
                                            evaluations=evals),  # fmt: skip
        "optimizer": {"flops_per_call": math.nan, "bytes_per_call": adam},
        "densify": nan,
    }
    keys = ("flops_per_call", "bytes_per_call")
    works = {s: {k: works[s][k] for k in keys} for s in STAGES}
    works[STEP] = {k: float(sum(w[k] for w in works.values() if not math.isnan(w[k]))) for k in keys}
    return works
