"""The extension's loss ops, CPU (csrc/cpu/ssim.cpp, csrc/cpu/photometric_loss.cpp): fake kernels and
autograd, registered with torch.library. :func:`gsworkbench.train.losses.ssim` picks the fused SSIM on
the CPU, and :func:`gsworkbench.train.losses.photometric_loss` the one-pass loss terms; their torch
references are :func:`gsworkbench.train.losses.ssim_torch` and :func:`gsworkbench.train.losses.l1`."""

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


def _register_terms() -> None:
    @torch.library.register_fake("gsworkbench::photometric_terms")
    def _terms_fake(img, ref, with_grad):  # noqa: ANN001, ANN202
        return img.new_empty(3), (torch.empty_like(img) if with_grad else img.new_empty(0))

    @torch.library.register_fake("gsworkbench::photometric_terms_backward")
    def _terms_bwd_fake(grad_terms, img, ref, ssim_grad):  # noqa: ANN001, ANN202
        return torch.empty_like(img)

    def _setup(ctx, inputs, output):  # noqa: ANN001, ANN202
        img, ref, _ = inputs
        ctx.mark_non_differentiable(output[1])
        ctx.set_materialize_grads(False)  # no image-sized zeros for the non-differentiable ssim_grad
        ctx.save_for_backward(img, ref, output[1])

    def _backward(ctx, grad_terms, _grad_ssim_grad):  # noqa: ANN001, ANN202
        img, ref, ssim_grad = ctx.saved_tensors
        if grad_terms is None:
            return None, None, None
        if ctx.needs_input_grad[1]:
            raise NotImplementedError("photometric_terms has no gradient for ref; use losses.l1 and losses.ssim_torch")
        if ssim_grad.numel() == 0:  # the forward was told no gradient would be needed: compute it now
            ssim_grad = torch.ops.gsworkbench.photometric_terms(img, ref, True)[1]
        return torch.ops.gsworkbench.photometric_terms_backward(grad_terms, img, ref, ssim_grad), None, None

    torch.library.register_autograd("gsworkbench::photometric_terms", _backward, setup_context=_setup)


if has_kernel("ssim", "cpu"):
    _register()
if has_kernel("photometric_terms", "cpu"):
    _register_terms()


def has_fused_ssim(img: torch.Tensor) -> bool:
    """True when the fused SSIM serves ``img`` (a CPU tensor, the extension built)."""
    return img.device.type == "cpu" and has_kernel("ssim", "cpu")


def ssim(img: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Fused mean SSIM of img against ref, both [H,W,C] on the CPU; differentiable in img."""
    return torch.ops.gsworkbench.ssim(img, ref)


def has_photometric_terms(img: torch.Tensor) -> bool:
    """True when the one-pass loss terms serve ``img`` (a CPU tensor, the extension built with them)."""
    return img.device.type == "cpu" and has_kernel("photometric_terms", "cpu")


def photometric_terms(img: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """[3] = (mean |img - ref|, mean SSIM, mean (img - ref)^2) of img, ref [H,W,C] on the CPU, in one
    pass; differentiable in img (the SSIM gradient is computed in the same pass when img needs one)."""
    with_grad = torch.is_grad_enabled() and img.requires_grad
    return torch.ops.gsworkbench.photometric_terms(img, ref, with_grad)[0]
