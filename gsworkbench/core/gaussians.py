"""The one module of Gaussian parameter math, used by every capability.

Conventions (the Inria 3DGS / gsplat ones):
- quaternions are wxyz, not necessarily normalised; rotation matrices act on column vectors;
- covariance Sigma = R S S^T R^T with S = diag(scales) (linear scales, world units);
- a Cholesky factor L is lower-triangular with a positive diagonal, Sigma = L L^T; a field stores it
  raw as 6 numbers per Gaussian (log of the diagonal, then the three off-diagonal entries);
- activations: scales = exp(log_scales), opacity = sigmoid(opacity_logit);
- real spherical harmonics up to degree 3 in the 3DGS basis and sign convention; colour =
  SH(dir) + 0.5, clamped at 0, where dir is the unit vector from the camera centre to the Gaussian.

All functions are pure torch, batched over leading dimensions, and differentiable.
"""

from __future__ import annotations

import functools
import math

import torch

# ---- activations -----------------------------------------------------------------------------


def scales_from_log(log_scales: torch.Tensor) -> torch.Tensor:
    """Linear scales from log-scales (same shape)."""
    return torch.exp(log_scales)


def log_from_scales(scales: torch.Tensor) -> torch.Tensor:
    """Log-scales from linear scales (same shape)."""
    return torch.log(scales)


def opacity_from_logit(logits: torch.Tensor) -> torch.Tensor:
    """Opacity in [0, 1] from logits."""
    return torch.sigmoid(logits)


def logit_from_opacity(opacity: torch.Tensor, eps: float = 1e-7) -> torch.Tensor:
    """Logits from opacities in [0, 1] (clamped to [eps, 1 - eps])."""
    o = opacity.clamp(eps, 1.0 - eps)
    return torch.log(o) - torch.log1p(-o)


# ---- quaternions -----------------------------------------------------------------------------


def quat_normalize(q: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Unit quaternions [..., 4] (wxyz)."""
    return q / torch.linalg.vector_norm(q, dim=-1, keepdim=True).clamp_min(eps)


# Rotation entries as sums of two signed products of quaternion components, left * right (wxyz = 0123;
# a left index i + 4 means -q_i): the 9 row-major first terms, then the 9 second terms; R = I + 2 (first +
# second). Two
# gathers replace ~30 tiny ops (the per-call cost for a few frames) and round exactly as the
# written-out form 1 - 2 (yy + zz), 2 (xy - wz), ...
_ROTMAT_LEFT = (
    6, 1, 1, 1, 5, 2, 1, 2, 5,  # -yy, xy, xz, xy, -xx, yz, xz, yz, -xx
    7, 4, 0, 0, 7, 4, 4, 0, 6,  # -zz, -wz, wy, wz, -zz, -wx, -wy, wx, -yy
)  # fmt: skip
_ROTMAT_RIGHT = (2, 2, 3, 2, 1, 3, 3, 3, 1, 3, 3, 2, 3, 3, 1, 2, 1, 2)
# The 4x4 candidate table of rotmat_to_quat (row-major) as pair sums over v = [m (9), -m (9), 1 + t,
# 1 + 2 m00, 1 + 2 m11, 1 + 2 m22, -t, 0] (m the row-major matrix, t its trace): first terms, then
# second terms. Row 0 is [1 + t, a21, a02, a10] (a21 = m21 - m12, ...), rows 1-3 pair an axis with w
# and the symmetric parts (s01 = m01 + m10, ...), with 1 + 2 m_ii - t on the diagonal.
_QUAT_FIRST = (18, 7, 2, 3, 7, 19, 1, 2, 2, 1, 20, 5, 3, 2, 5, 21)
_QUAT_SECOND = (23, 14, 15, 10, 14, 22, 3, 6, 15, 3, 22, 7, 10, 6, 7, 22)


@functools.cache
def _constant_cached(values: tuple, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype, device=device)


def _constant(values: tuple, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The constant tensor ``values`` (cached outside torch.compile)."""
    if torch.compiler.is_compiling():
        return torch.tensor(values, dtype=dtype, device=device)
    return _constant_cached(values, dtype, device)


def quat_to_rotmat(q: torch.Tensor) -> torch.Tensor:
    """Rotation matrices [..., 3, 3] from quaternions [..., 4] (wxyz, normalised here).

    R = [[1 - 2 (yy + zz), 2 (xy - wz), 2 (xz + wy)],
         [2 (xy + wz), 1 - 2 (xx + zz), 2 (yz - wx)],
         [2 (xz - wy), 2 (yz + wx), 1 - 2 (xx + yy)]] of the unit quaternion (w, x, y, z).
    """
    return unit_quat_to_rotmat(quat_normalize(q))


def unit_quat_to_rotmat(u: torch.Tensor) -> torch.Tensor:
    """:func:`quat_to_rotmat` of quaternions [..., 4] that are already unit (not normalised again)."""
    left = torch.cat([u, -u], dim=-1).index_select(-1, _constant(_ROTMAT_LEFT, torch.long, u.device))
    products = (left * u.index_select(-1, _constant(_ROTMAT_RIGHT, torch.long, u.device))).unflatten(-1, (2, 9))
    eye = _constant((1, 0, 0, 0, 1, 0, 0, 0, 1), u.dtype, u.device)
    return torch.add(eye, products.sum(-2), alpha=2).reshape(*u.shape[:-1], 3, 3)


def quat_multiply(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Hamilton product a * b of quaternions [..., 4] (wxyz); rotation by a after b."""
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        dim=-1,
    )


def rotmat_to_quat(R: torch.Tensor) -> torch.Tensor:
    """Unit quaternions [..., 4] (wxyz, w >= 0) from rotation matrices [..., 3, 3].

    Of the four candidate (unnormalised) quaternions, each matrix takes the best-conditioned one: the
    one whose largest component is built from the largest of (trace, m00, m11, m22). The C++ twin is
    ``rotmat_to_quat`` in csrc/include/gsw/quat.h.
    """
    m = R.reshape(*R.shape[:-2], 9)
    d = m[..., ::4]  # m00, m11, m22
    m00, m11, m22 = d.unbind(-1)
    t = (m00 + m11 + m22).unsqueeze(-1)
    zero = _constant((0,), m.dtype, m.device).expand(t.shape)
    v = torch.cat([m, -m, 1 + t, 1 + 2 * d, -t, zero], dim=-1)
    first = v.index_select(-1, _constant(_QUAT_FIRST, torch.long, m.device))
    second = v.index_select(-1, _constant(_QUAT_SECOND, torch.long, m.device))
    cands = torch.add(first, second).unflatten(-1, (4, 4))
    best = torch.cat([t, d], dim=-1).argmax(-1, keepdim=True)
    q = torch.gather(cands, -2, best[..., None].expand(*best.shape, 4)).squeeze(-2)
    return quat_canonical(quat_normalize(q))


def quat_canonical(q: torch.Tensor) -> torch.Tensor:
    """The same rotations [..., 4] (wxyz) with w >= 0 (q and -q rotate alike)."""
    return torch.where(q[..., :1] < 0, -q, q)


# ---- covariances -----------------------------------------------------------------------------


def covariance_from_scales_quats(scales: torch.Tensor, quats: torch.Tensor) -> torch.Tensor:
    """Sigma = R S S^T R^T [..., 3, 3] from linear scales [..., 3] and quaternions [..., 4]."""
    M = quat_to_rotmat(quats) * scales[..., None, :]
    return M @ M.transpose(-1, -2)


def cholesky_from_raw(raw: torch.Tensor) -> torch.Tensor:
    """Lower Cholesky factors [..., 3, 3] from raw parameters [..., 6].

    raw = (log L00, log L11, log L22, L10, L20, L21): exp keeps the diagonal positive.
    """
    d = torch.exp(raw[..., :3])
    zero = torch.zeros_like(raw[..., 0])
    rows = [d[..., 0], zero, zero, raw[..., 3], d[..., 1], zero, raw[..., 4], raw[..., 5], d[..., 2]]
    return torch.stack(rows, dim=-1).reshape(*raw.shape[:-1], 3, 3)


def raw_from_cholesky(L: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`cholesky_from_raw`: [..., 3, 3] lower factors to raw [..., 6]."""
    diag = torch.log(torch.diagonal(L, dim1=-2, dim2=-1))
    return torch.cat([diag, L[..., 1, 0:1], L[..., 2, 0:1], L[..., 2, 1:2]], dim=-1)


def cholesky_from_scales_quats(scales: torch.Tensor, quats: torch.Tensor) -> torch.Tensor:
    """Lower Cholesky factor [..., 3, 3] of the covariance of (scales, quats)."""
    return torch.linalg.cholesky(covariance_from_scales_quats(scales, quats))


# ---- spherical harmonics ---------------------------------------------------------------------

SH_C0 = 0.28209479177387814
SH_C1 = 0.4886025119029199
SH_C2 = (1.0925484305920792, -1.0925484305920792, 0.31539156525252005, -1.0925484305920792, 0.5462742152960396)
SH_C3 = (
    -0.5900435899266435,
    2.890611442640554,
    -0.4570457994644658,
    0.3731763325901154,
    -0.4570457994644658,
    1.445305721320277,
    -0.5900435899266435,
)
MAX_SH_DEGREE = 3


def num_sh_bases(degree: int) -> int:
    """(degree + 1)^2 coefficients per channel."""
    if not 0 <= degree <= MAX_SH_DEGREE:
        raise ValueError(f"sh degree must be in 0..{MAX_SH_DEGREE}, got {degree}")
    return (degree + 1) ** 2


def sh_degree_from_bases(k: int) -> int:
    """Inverse of :func:`num_sh_bases`; ValueError unless k is 1, 4, 9 or 16."""
    d = math.isqrt(k) - 1
    if (d + 1) ** 2 != k or not 0 <= d <= MAX_SH_DEGREE:
        raise ValueError(f"number of SH coefficients must be 1, 4, 9 or 16, got {k}")
    return d


def sh_basis(dirs: torch.Tensor, degree: int) -> torch.Tensor:
    """Real SH basis [..., (degree+1)^2] at unit directions [..., 3], 3DGS ordering and signs."""
    num_sh_bases(degree)
    x, y, z = dirs.unbind(-1)
    out = [torch.full_like(x, SH_C0)]
    if degree >= 1:
        out += [-SH_C1 * y, SH_C1 * z, -SH_C1 * x]
    if degree >= 2:
        xx, yy, zz, xy, yz, xz = x * x, y * y, z * z, x * y, y * z, x * z
        out += [
            SH_C2[0] * xy,
            SH_C2[1] * yz,
            SH_C2[2] * (2 * zz - xx - yy),
            SH_C2[3] * xz,
            SH_C2[4] * (xx - yy),
        ]
    if degree >= 3:
        out += [
            SH_C3[0] * y * (3 * xx - yy),
            SH_C3[1] * xy * z,
            SH_C3[2] * y * (4 * zz - xx - yy),
            SH_C3[3] * z * (2 * zz - 3 * xx - 3 * yy),
            SH_C3[4] * x * (4 * zz - xx - yy),
            SH_C3[5] * z * (xx - yy),
            SH_C3[6] * x * (xx - 3 * yy),
        ]
    return torch.stack(out, dim=-1)


def eval_sh(coeffs: torch.Tensor, dirs: torch.Tensor, degree: int) -> torch.Tensor:
    """SH value [..., 3] of coefficients [..., K, 3] (K >= (degree+1)^2) at directions [..., 3].

    Directions are normalised here. Uses the first (degree+1)^2 coefficients.
    """
    k = num_sh_bases(degree)
    if coeffs.shape[-2] < k:
        raise ValueError(f"sh degree {degree} needs {k} coefficients per channel, got {coeffs.shape[-2]}")
    d = dirs / dirs.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    basis = sh_basis(d, degree)
    return (basis[..., None] * coeffs[..., :k, :]).sum(-2)


def sh_to_color(coeffs: torch.Tensor, dirs: torch.Tensor, degree: int) -> torch.Tensor:
    """3DGS colour [..., 3]: eval_sh + 0.5, clamped at 0."""
    return torch.clamp_min(eval_sh(coeffs, dirs, degree) + 0.5, 0.0)


def rgb_to_sh_dc(rgb: torch.Tensor) -> torch.Tensor:
    """The degree-0 coefficient that renders as ``rgb``."""
    return (rgb - 0.5) / SH_C0


# ---- rotating spherical harmonics ------------------------------------------------------------


def _fibonacci_dirs(n: int, dtype: torch.dtype, device: torch.device | str | None) -> torch.Tensor:
    """``n`` well-spread unit directions [n,3] (a Fibonacci lattice on the sphere)."""
    i = torch.arange(n, dtype=torch.float64) + 0.5
    z = 1.0 - 2.0 * i / n
    r = torch.sqrt((1.0 - z * z).clamp_min(0.0))
    phi = math.pi * (3.0 - math.sqrt(5.0)) * i
    d = torch.stack([r * torch.cos(phi), r * torch.sin(phi), z], dim=-1)
    return d.to(dtype=dtype, device=device)


_SH_FIT_DIRS = 48  # sample directions used to solve for the band rotation matrices


def _kron_power(M: torch.Tensor, l: int) -> torch.Tensor:
    """l-fold Kronecker power of matrices [..., 3, 3] -> [..., 3^l, 3^l] (or vectors [..., 3] -> [..., 3^l])."""
    out = M
    for _ in range(l - 1):
        if M.dim() >= 2 and M.shape[-2:] == (3, 3):
            n = out.shape[-1]
            out = (out[..., :, None, :, None] * M[..., None, :, None, :]).reshape(*M.shape[:-2], 3 * n, 3 * n)
        else:
            out = (out[..., :, None] * M[..., None, :]).reshape(*M.shape[:-1], -1)
    return out


# l -> (C_l, G_l) of _sh_band_poly. A plain dict rather than functools.cache: torch.compile traces a
# cached function's body anyway (and warns about the cache), while it reads a filled dict as constants.
_SH_BAND_POLY: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}


def _sh_band_poly(l: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(C_l [n, 3^l], G_l [n, 3^l]) in float64 with D_l(R) = C_l kron^l(R) G_l^T, n = 2l+1.

    Band l of the basis is a homogeneous polynomial of degree l: Y_l(v) = C_l kron^l(v) for every v.
    Over well-spread directions d_j, Y_l(R d_j) = C_l kron^l(R) kron^l(d_j), and the least-squares
    solution of Y_l(R d_j) = D_l Y_l(d_j) is D_l = C_l kron^l(R) G_l^T with G_l = pinv(Y_l(d)) kron^l(d).
    Both are fitted once; the identities are exact (to rounding) because the d_j span the space.
    """
    if l not in _SH_BAND_POLY:
        _SH_BAND_POLY[l] = _fit_sh_band_poly(l)
    return _SH_BAND_POLY[l]


def _fit_sh_band_poly(l: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The least-squares fit of :func:`_sh_band_poly` (uncached)."""
    dirs = _fibonacci_dirs(_SH_FIT_DIRS, torch.float64, "cpu")
    y = sh_basis(dirs, l)[:, l * l : (l + 1) * (l + 1)]  # [J, n]
    kv = _kron_power(dirs, l)  # [J, 3^l]
    C = (torch.linalg.pinv(kv) @ y).T
    G = torch.linalg.pinv(y) @ kv
    return C, G


def sh_band_rotations(R: torch.Tensor, degree: int) -> list[torch.Tensor]:
    """Rotation matrices of SH bands 1..degree for rotations R [..., 3, 3].

    Returns ``[D_1, ..., D_degree]``, ``D_l`` of shape [..., 2l+1, 2l+1], in the basis and sign
    convention of :func:`sh_basis`. They satisfy ``Y_l(R d) = D_l Y_l(d)`` for every direction d, so
    coefficients ``c_l`` of band l become ``D_l c_l`` when the scene rotates by R: the rotated
    function evaluated at ``R d`` equals the original at ``d``. Each ``D_l`` is orthogonal and
    ``D_l(R1 R2) = D_l(R1) D_l(R2)``.

    Each ``D_l`` is a fixed polynomial of R's entries (see :func:`_sh_band_poly`): exact to rounding,
    differentiable in R, and cheap (microseconds). R must be a proper rotation.
    """
    num_sh_bases(degree)
    out = []
    for l in range(1, degree + 1):
        C, G = (t.to(dtype=R.dtype, device=R.device) for t in _sh_band_poly(l))
        out.append(C @ _kron_power(R, l) @ G.T)
    return out


def sh_rotation_matrix(R: torch.Tensor, degree: int) -> torch.Tensor:
    """Block-diagonal rotation [..., K, K] of the non-DC SH coefficients, K = (degree+1)^2 - 1.

    ``sh_rest' = M @ sh_rest`` (acting on the coefficient axis of [..., K, 3]) rotates the SH of
    every channel by R [..., 3, 3]; see :func:`sh_band_rotations`.
    """
    k = num_sh_bases(degree) - 1
    M = R.new_zeros(*R.shape[:-2], k, k)
    for l, D in enumerate(sh_band_rotations(R, degree), start=1):
        a, b = l * l - 1, (l + 1) * (l + 1) - 1
        M[..., a:b, a:b] = D
    return M
