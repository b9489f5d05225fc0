"""Evaluation on held-out views: PSNR, SSIM (scikit-image's, the library reference), LPIPS status."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from gsworkbench.train.losses import SSIM_SIGMA, psnr

LPIPS_NOTE = (
    "not computed: the lpips package needs torchvision, and PyPI's torchvision for torch 2.13 is a CUDA "
    "build that does not import beside the CPU torch pinned here"
)


def ssim_reference(img: torch.Tensor, ref: torch.Tensor) -> float:
    """scikit-image's SSIM of img against ref ([H,W,3] in [0,1]): Gaussian window sigma 1.5, data range 1,
    population covariances (Wang et al.'s definition, as the 3DGS papers report it)."""
    from skimage.metrics import structural_similarity

    a = img.detach().clamp(0, 1).double().cpu().numpy()
    b = ref.detach().double().cpu().numpy()
    return float(
        structural_similarity(
            a, b, channel_axis=-1, data_range=1.0, gaussian_weights=True, sigma=SSIM_SIGMA, use_sample_covariance=False
        )
    )


def evaluate_views(
    render: Callable[[int], torch.Tensor],
    images: torch.Tensor | Mapping[int, torch.Tensor],
    view_ids: Sequence[int],
) -> tuple[pd.DataFrame, dict[int, np.ndarray]]:
    """Renders each view with ``render(view) -> [H,W,3]`` and scores it against ``images[view]``
    ([V,H,W,3], or the reference [H,W,3] of each view by index).

    Returns a table (view, psnr_db, ssim, lpips) and the renders as uint8 arrays by view; lpips is NaN,
    not computed (:data:`LPIPS_NOTE` says why; the metrics table carries that note).
    """
    rows, renders = [], {}
    for v in view_ids:
        v = int(v)
        with torch.no_grad():
            img = render(v).clamp(0, 1)
        ref = images[v]
        rows.append({"view": v, "psnr_db": psnr(img, ref), "ssim": ssim_reference(img, ref), "lpips": float("nan")})
        renders[v] = (img.cpu().numpy() * 255 + 0.5).astype(np.uint8)
    return pd.DataFrame(rows, columns=["view", "psnr_db", "ssim", "lpips"]), renders
