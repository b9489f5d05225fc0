"""Mip-Splatting's 3D smoothing filter (Yu et al., CVPR 2024): a Gaussian no training camera could
resolve finer than its pixels is kept from becoming finer than that in 3D.

Each Gaussian's highest sampling rate over the training cameras whose view holds its centre is
``rate = focal / depth`` (pixels per world unit at that distance; :func:`max_sampling_rate`). The
filter is an isotropic 3D Gaussian of variance ``variance / rate^2`` (``variance`` in pixels^2, 0.2 in
the paper) convolved with the Gaussian: its covariance gains ``variance / rate^2`` on the diagonal
(each scale s becomes sqrt(s^2 + variance / rate^2)) and its opacity is multiplied by
sqrt(det(Sigma) / det(Sigma + filter)), so its integral is kept (:func:`filtered_scales_opacities`).
The determinants do not depend on the rotation, so the factor is the product over the three axes of
s / sqrt(s^2 + variance / rate^2).

The rate is not learned: the trainer recomputes it as the Gaussians move and densify
(:class:`gsworkbench.train.trainer.Trainer`), and an exported splat set carries the filter in its
scales and opacities, so any renderer shows what training saw.
"""

from __future__ import annotations

import torch

from gsworkbench.core.cameras import camera_points, pixel_coordinates

# a centre within this share of the image size outside its edges still counts as seen (the paper's margin:
# a Gaussian just outside the frame still reaches into it)
FRUSTUM_MARGIN = 0.15


def max_sampling_rate(
    means: torch.Tensor, viewmats: torch.Tensor, Ks: torch.Tensor, width: int, height: int,
    near_plane: float = 0.01, margin: float = FRUSTUM_MARGIN,
) -> torch.Tensor:  # fmt: skip
    """Each Gaussian's highest sampling rate over the cameras: rate [N] in pixels per world unit,
    max over the cameras c that see its centre of max(fx_c, fy_c) / depth_c; 0 where none does.

    ``means`` [N,3] world; ``viewmats`` [C,4,4] world-to-camera (OpenCV axes, +z forward); ``Ks``
    [C,3,3] in pixels for ``width`` x ``height`` images. A camera sees a centre in front of
    ``near_plane`` whose projection lies within ``margin`` x the image size of the image. Not
    differentiable (the rate is a fixed property of the cameras, recomputed, never learned)."""
    with torch.no_grad():
        p = camera_points(means, viewmats)  # [C,N,3]
        z = p[..., 2]
        u, v = pixel_coordinates(p, Ks)
        K = Ks.to(means.dtype)
        inside = (
            (z > near_plane)
            & (u >= -margin * width) & (u <= (1 + margin) * width)
            & (v >= -margin * height) & (v <= (1 + margin) * height)
        )  # fmt: skip
        focal = torch.maximum(K[:, 0, 0], K[:, 1, 1])[:, None]
        rate = torch.where(inside, focal / z.clamp_min(near_plane), torch.zeros_like(z))
        return rate.amax(0) if len(rate) else means.new_zeros(len(means))


def filtered_scales_opacities(
    scales: torch.Tensor, opacities: torch.Tensor, rate: torch.Tensor, variance: float = 0.2
) -> tuple[torch.Tensor, torch.Tensor]:
    """The scales [N,3] and opacities [N] of the Gaussians convolved with their 3D filter: scale
    sqrt(s^2 + variance / rate^2) and opacity times prod_axes s / sqrt(s^2 + variance / rate^2).
    ``rate`` [N] (:func:`max_sampling_rate`) in pixels per world unit; a Gaussian with rate 0 (no
    camera sees it) is returned unchanged. Differentiable in ``scales`` and ``opacities``."""
    seen = rate > 0
    filt = torch.where(seen, variance / torch.where(seen, rate, torch.ones_like(rate)).square(), 0.0)
    widened = scales.square() + filt[:, None].to(scales.dtype)
    out_scales = widened.sqrt()
    # in logs: a product of three ratios of small numbers stays representable
    log_ratio = (scales.log() - 0.5 * widened.log()).sum(-1)
    return out_scales, opacities * log_ratio.exp()
