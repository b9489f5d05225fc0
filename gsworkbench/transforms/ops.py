"""The extension's transform op (``gsworkbench::transform_splats``): fake kernel and Python wrapper.

The op writes into preallocated outputs (schema in csrc/gsworkbench.cpp, CPU kernel in
csrc/cpu/transforms.cpp, per-Gaussian math in csrc/include/gsw/transforms.h). It has no autograd:
the ``ext`` backend is not differentiable (use ``backend="torch"`` for gradients).
"""

from __future__ import annotations

import torch

from gsworkbench._ext import has_ext, require_ext


def _register() -> None:
    @torch.library.register_fake("gsworkbench::transform_splats")
    def _fake(means, quats, log_scales, sh_rest, affine, sh_rot, general,  # noqa: ANN001, ANN202
              out_means, out_quats, out_log_scales, out_sh_rest):  # fmt: skip
        return None


if has_ext():
    _register()


def transform_ext(
    means: torch.Tensor, quats: torch.Tensor, log_scales: torch.Tensor, sh_rest: torch.Tensor,
    affine: torch.Tensor, sh_rot: torch.Tensor, general: bool,
    out_means: torch.Tensor, out_quats: torch.Tensor, out_log_scales: torch.Tensor, out_sh_rest: torch.Tensor,
) -> None:  # fmt: skip
    """Fills out_* [F,N,...] (contiguous, CPU, same dtype as the inputs); not differentiable.

    affine [F,12] is A (row-major) then b per frame; sh_rot [F,K,K] the block-diagonal SH rotation.
    general=False requires A = s R (the kernel derives R's quaternion and log s from A).
    """
    require_ext()
    if any(t.requires_grad for t in (means, quats, log_scales, sh_rest)):
        raise ValueError("the ext transform kernel is not differentiable; use backend='torch' for gradients")
    torch.ops.gsworkbench.transform_splats(
        means, quats, log_scales, sh_rest, affine, sh_rot, general,
        out_means, out_quats, out_log_scales, out_sh_rest,
    )  # fmt: skip
