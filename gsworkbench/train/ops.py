"""The extension's fused SSIM op (csrc/cpu/ssim.cpp): fake kernel and autograd, registered with
torch.library. :func:`gsworkbench.train.losses.ssim` picks it on the CPU; its torch reference is
:func:`gsworkbench.train.losses.ssim_torch`."""

from __future__ import annotations

import torch

from gsworkbench._ext import has_kernel


def _register() -> None:
    @torch.library.register_fake("gsworkbench::ssim")
    def _ssim_fake(img, ref):  # noqa: ANN001, ANN202
        return img.new_empty(())

    @torch.library.register_fake("gsworkbench::ssim_backward")
    def _ssim_bwd_fake(grad, img, ref):  # noqa: ANN001, ANN202
        return torch.empty_like(img)

    def _setup(ctx, inputs, output):  # noqa: ANN001, ANN202
        ctx.save_for_backward(*inputs)

    def _backward(ctx, grad):  # noqa: ANN001, ANN202
        img, ref = ctx.saved_tensors
        if ctx.needs_input_grad[1]:
            raise NotImplementedError("the fused ssim has no gradient for ref; use losses.ssim_torch")
        return torch.ops.gsworkbench.ssim_backward(grad, img, ref), None

    torch.library.register_autograd("gsworkbench::ssim", _backward, setup_context=_setup)


if has_kernel("ssim", "cpu"):
    _register()


def has_fused_ssim(img: torch.Tensor) -> bool:
    """True when the fused SSIM serves ``img`` (a CPU tensor, the extension built)."""
    return img.device.type == "cpu" and has_kernel("ssim", "cpu")


def ssim(img: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Fused mean SSIM of img against ref, both [H,W,C] on the CPU; differentiable in img."""
    return torch.ops.gsworkbench.ssim(img, ref)
