"""``numpy`` backend: the vectorized reference of the splat transforms (whole-array operations).

Every backend fills the same outputs from the same kernel parameters (see
:meth:`gsworkbench.transforms.frames.Frames.params`):
    means [N,3], quats [N,4], log_scales [N,3], sh_rest [N,K,3];
    affine [F,12] (A row-major, then b), quat_r [F,4], log_s [F], sh_rot [F,K,K], general (bool);
    outputs out_means [F,N,3], out_quats [F,N,4], out_log_scales [F,N,3], out_sh_rest [F,N,K,3].
"""

from __future__ import annotations

import numpy as np
import torch

from gsworkbench.core import gaussians


def _quat_math(fn, *arrays: np.ndarray) -> np.ndarray:  # noqa: ANN001
    """``fn`` (a quaternion function of :mod:`gsworkbench.core.gaussians`) on numpy arrays: torch views of
    them in, a numpy array out. The quaternion math lives in gaussians.py only."""
    return fn(*(torch.from_numpy(np.ascontiguousarray(a)) for a in arrays)).numpy()


def general_covariances(
    A: np.ndarray, quats: np.ndarray, log_scales: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Quaternions [F,N,4] and log-scales [F,N,3] of the covariances A Sigma A^T (SVD, float64)."""
    R = _quat_math(gaussians.quat_to_rotmat, quats.astype(np.float64))
    M = A.astype(np.float64)[:, None] @ R[None] * np.exp(log_scales.astype(np.float64))[None, :, None, :]
    U, S, _ = np.linalg.svd(M)
    U[..., :, 2] *= np.sign(np.linalg.det(U))[..., None]
    return _quat_math(gaussians.rotmat_to_quat, U), np.log(S)


def transform_numpy(
    means: np.ndarray, quats: np.ndarray, log_scales: np.ndarray, sh_rest: np.ndarray,
    affine: np.ndarray, quat_r: np.ndarray, log_s: np.ndarray, sh_rot: np.ndarray, general: bool,
    out_means: np.ndarray, out_quats: np.ndarray, out_log_scales: np.ndarray, out_sh_rest: np.ndarray,
) -> None:  # fmt: skip
    """Fills the outputs (see the module docstring); computes everything before writing (in-place safe)."""
    A = affine[:, :9].reshape(-1, 3, 3)
    b = affine[:, 9:]
    new_means = np.einsum("fij,nj->fni", A, means) + b[:, None, :]
    if general:
        q, ls = general_covariances(A, quats, log_scales)
    else:
        q = _quat_math(gaussians.quat_multiply, quat_r[:, None, :], quats[None])
        ls = log_scales[None] + log_s[:, None, None]
    sh = np.einsum("fkj,njc->fnkc", sh_rot, sh_rest) if sh_rest.shape[1] else None
    out_means[...] = new_means
    out_quats[...] = q
    out_log_scales[...] = ls
    if sh is not None:
        out_sh_rest[...] = sh
