"""Evaluation on held-out views: PSNR, SSIM (scikit-image's, the library reference), LPIPS status, and
the same PSNR and SSIM over the background alone.

The background of a view is the pixels that no point of the scene's sparse cloud projects near
(:func:`sfm_background_mask`): what SfM did not reconstruct (sky, plain walls, the far field, the
image edges), where a capture's splats start from nothing. Reported beside the whole image, it keeps a
gain on the object from hiding a loss behind it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from gsworkbench.train.appearance import colour_corrected_psnr
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


BACKGROUND_RADIUS = 0.03  # a point covers a disk of this share of the image diagonal around its projection
COLUMNS = ["view", "psnr_db", "ssim", "lpips", "psnr_cc_db", "background_share", "psnr_background_db",
           "ssim_background"]


def sfm_background_mask(
    points: torch.Tensor, viewmat: torch.Tensor, K: torch.Tensor, width: int, height: int,
    radius: float = BACKGROUND_RADIUS,
) -> np.ndarray:  # fmt: skip
    """The view's background: bool [height, width], True where no point of ``points`` [P,3] (world)
    projects within ``radius`` x the image diagonal (pixels), points behind the camera left out.
    ``viewmat`` [4,4] world-to-camera (OpenCV axes), ``K`` [3,3] in pixels."""
    from scipy.ndimage import binary_dilation

    p = points.detach().double().cpu() @ viewmat[:3, :3].double().cpu().T + viewmat[:3, 3].double().cpu()
    p = p[p[:, 2] > 1e-6]
    uv = (p @ K.double().cpu().T)[:, :2] / p[:, 2:3]
    u, v = uv[:, 0].floor().long().numpy(), uv[:, 1].floor().long().numpy()
    inside = (u >= 0) & (u < width) & (v >= 0) & (v < height)
    near = np.zeros((height, width), dtype=bool)
    near[v[inside], u[inside]] = True
    r = max(1, round(radius * float(np.hypot(width, height))))
    yy, xx = np.mgrid[-r : r + 1, -r : r + 1]
    return ~binary_dilation(near, structure=xx**2 + yy**2 <= r * r)


def masked_scores(img: torch.Tensor, ref: torch.Tensor, mask: np.ndarray) -> tuple[float, float]:
    """(PSNR in dB, mean SSIM) of img against ref ([H,W,3] in [0,1]) over the pixels of ``mask`` [H,W]
    (SSIM: scikit-image's per-pixel map, as :func:`ssim_reference`, averaged over the mask without the
    border that scikit-image's own mean leaves out, so a full mask gives :func:`ssim_reference`); NaN
    for an empty mask."""
    from skimage.metrics import structural_similarity

    if not mask.any():
        return float("nan"), float("nan")
    a, b = img.detach().clamp(0, 1).double().cpu().numpy(), ref.detach().double().cpu().numpy()
    mse = float(((a - b) ** 2)[mask].mean())
    _, ssim_map = structural_similarity(a, b, channel_axis=-1, data_range=1.0, gaussian_weights=True, sigma=SSIM_SIGMA,
                                        use_sample_covariance=False, full=True)  # fmt: skip
    pad = (2 * int(3.5 * SSIM_SIGMA + 0.5) + 1 - 1) // 2  # scikit-image's window (truncate 3.5) less its centre
    inner = np.zeros_like(mask)
    inner[pad : mask.shape[0] - pad, pad : mask.shape[1] - pad] = True
    ssim_value = float(ssim_map.mean(axis=-1)[mask & inner].mean()) if (mask & inner).any() else float("nan")
    return float(-10.0 * np.log10(max(mse, 1e-12))), ssim_value


def evaluate_views(
    render: Callable[[int], torch.Tensor],
    images: torch.Tensor | Mapping[int, torch.Tensor],
    view_ids: Sequence[int],
    backgrounds: Mapping[int, np.ndarray] | None = None,
) -> tuple[pd.DataFrame, dict[int, np.ndarray]]:
    """Renders each view with ``render(view) -> [H,W,3]`` and scores it against ``images[view]``
    ([V,H,W,3], or the reference [H,W,3] of each view by index); ``backgrounds``: each view's background
    mask (:func:`sfm_background_mask`), scored apart too.

    Returns a table (:data:`COLUMNS`: view, psnr_db, ssim, lpips, psnr_cc_db (after the best affine
    colour fit, :func:`~gsworkbench.train.appearance.colour_corrected_psnr`), and background_share,
    psnr_background_db, ssim_background, NaN without masks) and the renders as uint8 arrays by view;
    lpips is NaN, not computed (:data:`LPIPS_NOTE` says why; the metrics table carries that note).
    """
    rows, renders = [], {}
    for v in view_ids:
        v = int(v)
        with torch.no_grad():
            img = render(v).clamp(0, 1)
        ref = images[v]
        nan = float("nan")
        row = {"view": v, "psnr_db": psnr(img, ref), "ssim": ssim_reference(img, ref), "lpips": nan,
               "psnr_cc_db": colour_corrected_psnr(img, ref),
               "background_share": nan, "psnr_background_db": nan, "ssim_background": nan}  # fmt: skip
        if backgrounds is not None and v in backgrounds:
            mask = backgrounds[v]
            row["background_share"] = float(mask.mean())
            row["psnr_background_db"], row["ssim_background"] = masked_scores(img, ref, mask)
        rows.append(row)
        renders[v] = (img.cpu().numpy() * 255 + 0.5).astype(np.uint8)
    return pd.DataFrame(rows, columns=COLUMNS), renders
