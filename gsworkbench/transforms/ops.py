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
    def _fake(means, quats, log_scales, sh_rest, affine, quat_r, log_s, sh_rot, general,  # noqa: ANN001, ANN202
              out_means, out_quats, out_log_scales, out_sh_rest):  # fmt: skip
        return None  # the op only writes into its (mutable) out tensors


if has_ext():
    _register()


def transform_ext(
    means: torch.Tensor, quats: torch.Tensor, log_scales: torch.Tensor, sh_rest: torch.Tensor,
    affine: torch.Tensor, quat_r: torch.Tensor, log_s: torch.Tensor, sh_rot: torch.Tensor, general: bool,
    out_means: torch.Tensor, out_quats: torch.Tensor, out_log_scales: torch.Tensor, out_sh_rest: torch.Tensor,
) -> None:  # fmt: skip
    """Fills out_* [F,N,...] (contiguous, on the inputs' device and dtype); not differentiable.

    The per-frame parameters come from :meth:`gsworkbench.transforms.Frames.params`: affine [F,12] (A
    row-major, then b), quat_r [F,4] and log_s [F] (the similarity path: A = s R(quat_r)), sh_rot
    [F,K,K] (the block-diagonal SH rotation). general=True re-decomposes each covariance under A.
    """
    require_ext()
    if any(t.requires_grad for t in (means, quats, log_scales, sh_rest)):
        raise ValueError("the ext transform kernel is not differentiable; use backend='torch' for gradients")
    torch.ops.gsworkbench.transform_splats(
        means, quats, log_scales, sh_rest, affine, quat_r, log_s, sh_rot, general,
        out_means, out_quats, out_log_scales, out_sh_rest,
    )  # fmt: skip


def transform_bytes(n: int, sh_degree: int, frames: int = 1, itemsize: int = 4) -> int:
    """Bytes one ``transform_splats`` call reads and writes for ``n`` splats at ``sh_degree`` and
    ``frames`` frames (float32 by default): means, quats and log-scales (10 values) and the SH rest
    (3 ((d + 1)^2 - 1) values) read once and written once per frame. Left out: opacities and SH DC
    (shared with the input, never copied), the per-frame parameters (a few hundred bytes) and, without
    preallocated ``out``, the kernel's zero-filling of fresh pages."""
    per = (10 + 3 * ((sh_degree + 1) ** 2 - 1)) * itemsize
    return per * n * (1 + frames)
