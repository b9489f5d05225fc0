"""``torch`` backend: differentiable splat transforms on any device (CPU or GPU).

Same parameters as the other backends (see :mod:`gsworkbench.transforms._numpy_impl`), returned
as new tensors [F,N,...] so autograd flows to the splats and to the transform parameters.
"""

from __future__ import annotations

import torch

from gsworkbench.core import gaussians


def transform_torch(
    means: torch.Tensor, quats: torch.Tensor, log_scales: torch.Tensor, sh_rest: torch.Tensor,
    affine: torch.Tensor, quat_r: torch.Tensor, log_s: torch.Tensor, sh_rot: torch.Tensor, general: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """(means [F,N,3], quats [F,N,4], log_scales [F,N,3], sh_rest [F,N,K,3])."""
    A = affine[:, :9].reshape(-1, 3, 3)
    b = affine[:, 9:]
    new_means = torch.einsum("fij,nj->fni", A, means) + b[:, None, :]
    if general:
        M = (A[:, None] @ gaussians.quat_to_rotmat(quats)[None]) * torch.exp(log_scales)[None, :, None, :]
        U, S, _ = torch.linalg.svd(M)
        sign = torch.sign(torch.linalg.det(U))
        U = torch.cat([U[..., :2], U[..., 2:] * sign[..., None, None]], dim=-1)
        new_quats = gaussians.rotmat_to_quat(U)
        new_log_scales = torch.log(S)
    else:
        new_quats = gaussians.quat_multiply(quat_r[:, None, :], quats[None])
        new_log_scales = log_scales[None] + log_s[:, None, None]
    new_sh = torch.einsum("fkj,njc->fnkc", sh_rot, sh_rest)
    return new_means, new_quats, new_log_scales, new_sh
