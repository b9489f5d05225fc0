"""Held-out scores over the background alone: the mask of the pixels no sparse point projects near,
against a brute-force reference, and the masked PSNR and SSIM against the whole-image ones."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gsworkbench.core.cameras import intrinsics_from_fov, look_at
from gsworkbench.train.evaluate import masked_scores, sfm_background_mask, ssim_reference
from gsworkbench.train.losses import psnr


def brute_background(points, viewmat, K, width, height, radius):  # noqa: ANN001, ANN201
    """Each pixel's distance (in whole pixels) to every projected point in front of the camera, in a loop."""
    cam = points.double() @ viewmat[:3, :3].double().T + viewmat[:3, 3].double()
    r = max(1, round(radius * float(np.hypot(width, height))))
    near = np.zeros((height, width), dtype=bool)
    for p in cam:
        if p[2] <= 1e-6:
            continue
        uv = (K.double() @ p)[:2] / p[2]
        u, v = int(np.floor(float(uv[0]))), int(np.floor(float(uv[1])))
        if not (0 <= u < width and 0 <= v < height):
            continue
        for y in range(height):
            for x in range(width):
                if (x - u) ** 2 + (y - v) ** 2 <= r * r:
                    near[y, x] = True
    return ~near


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_background_mask_matches_a_brute_force_reference(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    points = torch.randn(40, 3, generator=g) * torch.tensor([1.0, 1.0, 0.5])
    points[:5] += torch.tensor([0.0, -8.0, 0.0])  # behind the camera: they cover nothing
    viewmat, K = look_at((0.3, -3.0, 0.8), (0.0, 0.0, 0.0)), intrinsics_from_fov(48, 36, 60.0)
    mask = sfm_background_mask(points, viewmat, K, 48, 36, radius=0.05)
    np.testing.assert_array_equal(mask, brute_background(points, viewmat, K, 48, 36, 0.05))
    assert 0.05 < mask.mean() < 0.95  # both kinds of pixel are there
    assert sfm_background_mask(points[:0], viewmat, K, 48, 36).all()  # no point: all background


def test_masked_scores_are_the_whole_image_scores_on_a_full_mask_and_a_reference_elsewhere() -> None:
    g = torch.Generator().manual_seed(3)
    ref = torch.rand(32, 40, 3, generator=g, dtype=torch.float64)
    img = (ref + 0.05 * torch.randn(32, 40, 3, generator=g, dtype=torch.float64)).clamp(0, 1)
    full = np.ones((32, 40), dtype=bool)
    p, s = masked_scores(img, ref, full)
    assert p == pytest.approx(psnr(img, ref), rel=1e-9) and s == pytest.approx(ssim_reference(img, ref), rel=1e-9)
    half = np.zeros((32, 40), dtype=bool)
    half[:, :20] = True
    img2 = img.clone()
    img2[:, 20:] = 1 - ref[:, 20:]  # ruin the right half: the left half's score must not see it
    p_half, _ = masked_scores(img2, ref, half)
    want = -10 * np.log10(((img2[:, :20] - ref[:, :20]) ** 2).mean().item())
    assert p_half == pytest.approx(want, rel=1e-9) and p_half > masked_scores(img2, ref, full)[0] + 5
    assert all(np.isnan(masked_scores(img, ref, np.zeros((32, 40), dtype=bool))))
