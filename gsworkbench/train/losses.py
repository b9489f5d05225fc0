"""Image losses and metrics of the trainer: L1, SSIM (differentiable), PSNR.

Images are [..., H, W, 3] tensors in [0, 1] (the rasterizer's layout). The training SSIM uses an
11 x 11 Gaussian window with sigma 1.5 and the constants of Wang et al. (K1 = 0.01, K2 = 0.03, data
range 1), over the valid region (no padding); the evaluation SSIM is scikit-image's
(:func:`gsworkbench.train.evaluate.ssim_reference`), which the tests compare with this one.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

from gsworkbench.train import fused_losses

SSIM_WINDOW = 11
SSIM_SIGMA = 1.5
_C1 = 0.01**2
_C2 = 0.03**2


@functools.lru_cache(maxsize=8)
def _window(size: int, sigma: float, dtype: torch.dtype, device: str) -> torch.Tensor:
    x = torch.arange(size, dtype=torch.float64) - (size - 1) / 2
    w = torch.exp(-(x**2) / (2 * sigma**2))
    return (w / w.sum()).to(dtype=dtype, device=device)


def _blur(x: torch.Tensor, window: torch.Tensor) -> torch.Tensor:
    """Separable valid-mode Gaussian blur of x [B,C,H,W]."""
    c = x.shape[1]
    k = window.numel()
    x = F.conv2d(x, window.view(1, 1, 1, k).expand(c, 1, 1, k), groups=c)
    return F.conv2d(x, window.view(1, 1, k, 1).expand(c, 1, k, 1), groups=c)


def _check(img: torch.Tensor, ref: torch.Tensor) -> None:
    if img.shape != ref.shape:
        raise ValueError(f"ssim: shapes differ, {list(img.shape)} vs {list(ref.shape)}")
    if img.dim() < 3 or min(img.shape[-3], img.shape[-2]) < SSIM_WINDOW:
        raise ValueError(f"ssim needs images [..., H, W, C] with H, W >= {SSIM_WINDOW}, got {list(img.shape)}")


def ssim(img: torch.Tensor, ref: torch.Tensor, backend: str = "ext") -> torch.Tensor:
    """Mean SSIM of img against ref, both [..., H, W, C] in [0, 1] with H, W >= 11; differentiable in img.

    ``backend="ext"`` uses the fused CPU kernel for single images [H,W,C] (falling back to the torch
    reference elsewhere: CUDA, batches, a ref that needs gradients); ``"torch"`` is the reference.
    """
    _check(img, ref)
    if backend == "ext" and _one_pair(img, ref):
        if fused_losses.has_fused_ssim(img):
            return fused_losses.ssim(img, ref)
    return ssim_torch(img, ref)


def ssim_torch(img: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """The torch reference of :func:`ssim` (separable valid-mode blur of the five window statistics)."""
    _check(img, ref)
    h, w, c = img.shape[-3:]
    x = img.reshape(-1, h, w, c).permute(0, 3, 1, 2)
    y = ref.reshape(-1, h, w, c).permute(0, 3, 1, 2)
    win = _window(SSIM_WINDOW, SSIM_SIGMA, img.dtype, str(img.device))
    stats = _blur(torch.cat([x, y, x * x, y * y, x * y], dim=1), win)
    mx, my, xx, yy, xy = stats.split(c, dim=1)
    sxx, syy, sxy = xx - mx * mx, yy - my * my, xy - mx * my
    num = (2 * mx * my + _C1) * (2 * sxy + _C2)
    den = (mx * mx + my * my + _C1) * (sxx + syy + _C2)
    return (num / den).mean()


def l1(img: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Mean absolute error."""
    return (img - ref).abs().mean()


def psnr_from_mse(mse: float) -> float:
    """PSNR in dB for images in [0, 1]."""
    return float("inf") if mse <= 0 else -10.0 * math.log10(mse)


def psnr(img: torch.Tensor, ref: torch.Tensor) -> float:
    """PSNR in dB of img against ref (values in [0, 1]; img is clamped to that range first)."""
    return psnr_from_mse(float(((img.detach().clamp(0, 1) - ref) ** 2).mean()))


def photometric_loss(
    img: torch.Tensor, ref: torch.Tensor, ssim_lambda: float, backend: str = "ext"
) -> tuple[torch.Tensor, dict]:
    """(1 - lambda) L1 + lambda (1 - SSIM), and its parts ``l1``, ``ssim`` and, from the fused kernel,
    ``mse`` (detached floats are taken by the caller).

    ``backend="ext"`` takes the three terms and the SSIM gradient in one pass of the extension's kernel
    (:func:`gsworkbench.train.fused_losses.photometric_terms`) for single CPU images [H,W,C]; ``"torch"`` (and
    anything the kernel does not serve) uses :func:`l1` and :func:`ssim`.
    """
    if backend == "ext" and ssim_lambda != 0 and _one_pair(img, ref) and fused_losses.has_photometric_terms(img):
        terms = fused_losses.photometric_terms(img, ref)
        l, s = terms[0], terms[1]
        return (1 - ssim_lambda) * l + ssim_lambda * (1 - s), {"l1": l, "ssim": s, "mse": terms[2]}
    l = l1(img, ref)
    if ssim_lambda == 0:
        return l, {"l1": l}
    s = ssim(img, ref, backend)
    return (1 - ssim_lambda) * l + ssim_lambda * (1 - s), {"l1": l, "ssim": s}


def _one_pair(img: torch.Tensor, ref: torch.Tensor) -> bool:
    """True for what the extension's loss kernels take: one image pair [H,W,C] of one shape and dtype,
    H, W >= 11, and a ref that needs no gradient (anything else takes the torch reference, which raises
    the errors naming wrong sizes)."""
    if img.dim() != 3 or img.shape != ref.shape or img.dtype != ref.dtype or ref.requires_grad:
        return False
    return min(img.shape[0], img.shape[1]) >= SSIM_WINDOW
