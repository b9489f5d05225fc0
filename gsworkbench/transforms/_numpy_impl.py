"""``numpy`` backend: the vectorized reference of the splat transforms (whole-array operations).

Every backend fills the same outputs from the same kernel parameters (see
:meth:`gsworkbench.transforms.frames.Frames.to_splat_params`):
    means [N,3], quats [N,4], log_scales [N,3], sh_rest [N,K,3];
    affine [F,12] (A row-major, then b), quat_r [F,4], log_s [F], sh_rot [F,K,K], general (bool);
    outputs out_means [F,N,3], out_quats [F,N,4], out_log_scales [F,N,3], out_sh_rest [F,N,K,3].
"""

from __future__ import annotations

import numpy as np


def quat_to_rotmat(q: np.ndarray) -> np.ndarray:
    """[...,3,3] rotation matrices of quaternions [...,4] (wxyz, normalised here)."""
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = np.moveaxis(q, -1, 0)
    R = np.stack(
        [
            1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
            2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
            2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
        ],
        axis=-1,
    )  # fmt: skip
    return R.reshape(*q.shape[:-1], 3, 3)


def rotmat_to_quat(m: np.ndarray) -> np.ndarray:
    """Unit quaternions [...,4] (wxyz, w >= 0) of rotation matrices [...,3,3]."""
    t = m[..., 0, 0] + m[..., 1, 1] + m[..., 2, 2]
    d0, d1, d2 = m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]
    a21, a02, a10 = m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0], m[..., 1, 0] - m[..., 0, 1]
    s01, s02, s12 = m[..., 0, 1] + m[..., 1, 0], m[..., 0, 2] + m[..., 2, 0], m[..., 1, 2] + m[..., 2, 1]
    # four candidate (unnormalised) quaternions; the best-conditioned one is kept per matrix
    c = np.stack(
        [
            np.stack([1 + t, a21, a02, a10], -1),
            np.stack([a21, 1 + 2 * d0 - t, s01, s02], -1),
            np.stack([a02, s01, 1 + 2 * d1 - t, s12], -1),
            np.stack([a10, s02, s12, 1 + 2 * d2 - t], -1),
        ],
        axis=-2,
    )
    best = np.argmax(np.stack([t, m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]], -1), axis=-1)
    q = np.take_along_axis(c, best[..., None, None], axis=-2)[..., 0, :]
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    return np.where(q[..., :1] < 0, -q, q)


def quat_left_mul(r: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Hamilton products r * q, r [...,4] broadcast against q [...,4]."""
    rw, rx, ry, rz = np.moveaxis(r, -1, 0)
    qw, qx, qy, qz = np.moveaxis(q, -1, 0)
    return np.stack(
        [
            rw * qw - rx * qx - ry * qy - rz * qz,
            rw * qx + rx * qw + ry * qz - rz * qy,
            rw * qy - rx * qz + ry * qw + rz * qx,
            rw * qz + rx * qy - ry * qx + rz * qw,
        ],
        axis=-1,
    )


def general_covariances(
    A: np.ndarray, quats: np.ndarray, log_scales: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Quaternions [F,N,4] and log-scales [F,N,3] of the covariances A Sigma A^T (SVD, float64)."""
    R = quat_to_rotmat(quats.astype(np.float64))
    M = A.astype(np.float64)[:, None] @ R[None] * np.exp(log_scales.astype(np.float64))[None, :, None, :]
    U, S, _ = np.linalg.svd(M)
    U[..., :, 2] *= np.sign(np.linalg.det(U))[..., None]
    return rotmat_to_quat(U), np.log(S)


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
        q = quat_left_mul(quat_r[:, None, :], quats[None])
        ls = log_scales[None] + log_s[:, None, None]
    sh = np.einsum("fkj,njc->fnkc", sh_rot, sh_rest) if sh_rest.shape[1] else None
    out_means[...] = new_means
    out_quats[...] = q
    out_log_scales[...] = ls
    if sh is not None:
        out_sh_rest[...] = sh
