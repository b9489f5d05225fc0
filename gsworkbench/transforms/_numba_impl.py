"""``numba`` backend: one fused parallel loop over the splats (``prange``), per-Gaussian scalar math.

Same arguments as :func:`gsworkbench.transforms._numpy_impl.transform_numpy`. Compiled on first use
(``cache=True`` keeps the machine code on disk); :func:`warm_up` compiles it ahead of timings.

numba cannot call the torch functions of :mod:`gsworkbench.core.gaussians`, so the per-Gaussian quaternion
math is ported here as scalar functions (:func:`quat_mul`, :func:`quat_to_rotmat`,
:func:`rotmat_to_quat`) together with the 3x3 Jacobi SVD of csrc/include/gsw/svd3.h
(:func:`svd3_jacobi`); tests/test_transforms.py compares each with gaussians.py / torch.linalg.
The per-frame parameters (quat_r, log_s, sh_rot) come from :class:`~gsworkbench.transforms.Frames`.
"""

from __future__ import annotations

import math

import numpy as np

from gsworkbench.core.numba_threads import match_torch_threads

try:
    import numba
except ImportError:  # pragma: no cover - numba is a project requirement
    numba = None


def available() -> bool:
    """True when numba imports."""
    return numba is not None


# ---- per-Gaussian math (plain Python here; compiled with numba.njit below) ---------------------


def quat_mul(a0, a1, a2, a3, b0, b1, b2, b3):  # noqa: ANN001, ANN201
    """Hamilton product a * b of quaternions given as wxyz scalars; a (w, x, y, z) tuple."""
    return (
        a0 * b0 - a1 * b1 - a2 * b2 - a3 * b3,
        a0 * b1 + a1 * b0 + a2 * b3 - a3 * b2,
        a0 * b2 - a1 * b3 + a2 * b0 + a3 * b1,
        a0 * b3 + a1 * b2 - a2 * b1 + a3 * b0,
    )


def quat_to_rotmat(qw, qx, qy, qz, R):  # noqa: ANN001, ANN201
    """Writes R [3,3] = the rotation of the quaternion (wxyz, normalised here; 0 gives I)."""
    n = max(math.sqrt(qw * qw + qx * qx + qy * qy + qz * qz), 1e-12)
    w, x, y, z = qw / n, qx / n, qy / n, qz / n
    R[0, 0] = 1 - 2 * (y * y + z * z)
    R[0, 1] = 2 * (x * y - w * z)
    R[0, 2] = 2 * (x * z + w * y)
    R[1, 0] = 2 * (x * y + w * z)
    R[1, 1] = 1 - 2 * (x * x + z * z)
    R[1, 2] = 2 * (y * z - w * x)
    R[2, 0] = 2 * (x * z - w * y)
    R[2, 1] = 2 * (y * z + w * x)
    R[2, 2] = 1 - 2 * (x * x + y * y)


def rotmat_to_quat(M, q):  # noqa: ANN001, ANN201
    """Writes q [4] = the unit quaternion (wxyz, w >= 0) of the rotation M [3,3]."""
    t = M[0, 0] + M[1, 1] + M[2, 2]
    if t >= M[0, 0] and t >= M[1, 1] and t >= M[2, 2]:
        c0, c1, c2, c3 = 1 + t, M[2, 1] - M[1, 2], M[0, 2] - M[2, 0], M[1, 0] - M[0, 1]
    elif M[0, 0] >= M[1, 1] and M[0, 0] >= M[2, 2]:
        c0, c1, c2, c3 = M[2, 1] - M[1, 2], 1 + 2 * M[0, 0] - t, M[0, 1] + M[1, 0], M[0, 2] + M[2, 0]
    elif M[1, 1] >= M[2, 2]:
        c0, c1, c2, c3 = M[0, 2] - M[2, 0], M[0, 1] + M[1, 0], 1 + 2 * M[1, 1] - t, M[1, 2] + M[2, 1]
    else:
        c0, c1, c2, c3 = M[1, 0] - M[0, 1], M[0, 2] + M[2, 0], M[1, 2] + M[2, 1], 1 + 2 * M[2, 2] - t
    inv = 1.0 / math.sqrt(c0 * c0 + c1 * c1 + c2 * c2 + c3 * c3)
    if c0 < 0:
        inv = -inv
    q[0] = c0 * inv
    q[1] = c1 * inv
    q[2] = c2 * inv
    q[3] = c3 * inv


def svd3_jacobi(M, U, sigma):  # noqa: ANN001, ANN201
    """M [3,3] = U diag(sigma) V^T by one-sided Jacobi (float64): writes U (det +1) and sigma >= 0
    (not sorted). M is overwritten (its columns end as U diag(sigma))."""
    for _sweep in range(12):
        rotated = False
        for p in range(2):
            for r in range(p + 1, 3):
                a = M[0, p] * M[0, p] + M[1, p] * M[1, p] + M[2, p] * M[2, p]
                bb = M[0, r] * M[0, r] + M[1, r] * M[1, r] + M[2, r] * M[2, r]
                g = M[0, p] * M[0, r] + M[1, p] * M[1, r] + M[2, p] * M[2, r]
                if g == 0.0 or abs(g) <= 1e-15 * math.sqrt(a * bb):
                    continue
                rotated = True
                zeta = (bb - a) / (2 * g)
                t = (1.0 if zeta >= 0 else -1.0) / (abs(zeta) + math.sqrt(1 + zeta * zeta))
                c = 1 / math.sqrt(1 + t * t)
                sn = c * t
                for i in range(3):
                    mp = M[i, p]
                    mr = M[i, r]
                    M[i, p] = c * mp - sn * mr
                    M[i, r] = sn * mp + c * mr
        if not rotated:
            break
    for j in range(3):
        nrm = math.sqrt(M[0, j] ** 2 + M[1, j] ** 2 + M[2, j] ** 2)
        sigma[j] = nrm
        inv = 1.0 / nrm if nrm > 0 else 0.0
        for i in range(3):
            U[i, j] = M[i, j] * inv
    det = (
        U[0, 0] * (U[1, 1] * U[2, 2] - U[1, 2] * U[2, 1])
        - U[0, 1] * (U[1, 0] * U[2, 2] - U[1, 2] * U[2, 0])
        + U[0, 2] * (U[1, 0] * U[2, 1] - U[1, 1] * U[2, 0])
    )
    if det < 0:
        for i in range(3):
            U[i, 2] = -U[i, 2]


def _general_one(A, qw, qx, qy, qz, l0, l1, l2, out_q, out_ls):  # noqa: ANN001, ANN202
    """Unit quaternion of U and log sigma of A R(q) diag(exp l) = U diag(sigma) V^T (float64)."""
    R = np.empty((3, 3))
    quat_to_rotmat(qw, qx, qy, qz, R)
    s = (math.exp(l0), math.exp(l1), math.exp(l2))
    M = np.empty((3, 3))
    for i in range(3):
        for j in range(3):
            M[i, j] = (A[i, 0] * R[0, j] + A[i, 1] * R[1, j] + A[i, 2] * R[2, j]) * s[j]
    U = np.empty((3, 3))
    sigma = np.empty(3)
    svd3_jacobi(M, U, sigma)
    for j in range(3):
        out_ls[j] = math.log(sigma[j])
    rotmat_to_quat(U, out_q)


def _rotate_sh(D, sh_rest, n, out_sh):  # noqa: ANN001, ANN202
    """out_sh [K,3] = the SH rest of Gaussian n with bands l = 1..3 rotated by the blocks of D [K,K]."""
    K = sh_rest.shape[1]
    tmp = np.empty((7, 3), dtype=sh_rest.dtype)  # one band, read fully before writing (in-place safe)
    for band in range(1, 4):
        o = band * band - 1
        m = 2 * band + 1
        if o + m > K:
            break
        for j in range(m):
            for c in range(3):
                tmp[j, c] = sh_rest[n, o + j, c]
        for i in range(m):
            s0 = 0.0
            s1 = 0.0
            s2 = 0.0
            for j in range(m):
                d = D[o + i, o + j]
                s0 += d * tmp[j, 0]
                s1 += d * tmp[j, 1]
                s2 += d * tmp[j, 2]
            out_sh[o + i, 0] = s0
            out_sh[o + i, 1] = s1
            out_sh[o + i, 2] = s2


def _kernel(means, quats, log_scales, sh_rest, affine, quat_r, log_s, sh_rot, general,  # noqa: ANN001, ANN202
            out_means, out_quats, out_log_scales, out_sh_rest):  # fmt: skip
    F = affine.shape[0]
    N = means.shape[0]
    K = sh_rest.shape[1]
    for f in range(F):
        a = affine[f]
        r0, r1, r2, r3 = quat_r[f, 0], quat_r[f, 1], quat_r[f, 2], quat_r[f, 3]
        ls = log_s[f]
        D = sh_rot[f]
        Ad = np.empty((3, 3))
        for i in range(3):
            for j in range(3):
                Ad[i, j] = a[3 * i + j]
        om, oq, os, osh = out_means[f], out_quats[f], out_log_scales[f], out_sh_rest[f]
        if general:
            for n in numba.prange(N):
                x, y, z = means[n, 0], means[n, 1], means[n, 2]
                q = np.empty(4)
                lsn = np.empty(3)
                _general_one(Ad, quats[n, 0], quats[n, 1], quats[n, 2], quats[n, 3],
                             log_scales[n, 0], log_scales[n, 1], log_scales[n, 2], q, lsn)  # fmt: skip
                om[n, 0] = a[0] * x + a[1] * y + a[2] * z + a[9]
                om[n, 1] = a[3] * x + a[4] * y + a[5] * z + a[10]
                om[n, 2] = a[6] * x + a[7] * y + a[8] * z + a[11]
                for c in range(4):
                    oq[n, c] = q[c]
                for c in range(3):
                    os[n, c] = lsn[c]
                if K > 0:
                    _rotate_sh(D, sh_rest, n, osh[n])
        else:  # the similarity fast path: no allocation, no branch per Gaussian
            for n in numba.prange(N):
                x, y, z = means[n, 0], means[n, 1], means[n, 2]
                w, qx, qy, qz = quat_mul(r0, r1, r2, r3, quats[n, 0], quats[n, 1], quats[n, 2], quats[n, 3])
                l0, l1, l2 = log_scales[n, 0] + ls, log_scales[n, 1] + ls, log_scales[n, 2] + ls
                om[n, 0] = a[0] * x + a[1] * y + a[2] * z + a[9]
                om[n, 1] = a[3] * x + a[4] * y + a[5] * z + a[10]
                om[n, 2] = a[6] * x + a[7] * y + a[8] * z + a[11]
                oq[n, 0] = w
                oq[n, 1] = qx
                oq[n, 2] = qy
                oq[n, 3] = qz
                os[n, 0] = l0
                os[n, 1] = l1
                os[n, 2] = l2
                if K > 0:
                    _rotate_sh(D, sh_rest, n, osh[n])


if numba is not None:
    _scalar = numba.njit(fastmath=True, cache=True)
    quat_mul = _scalar(quat_mul)
    quat_to_rotmat = _scalar(quat_to_rotmat)
    rotmat_to_quat = _scalar(rotmat_to_quat)
    svd3_jacobi = _scalar(svd3_jacobi)
    _general_one = _scalar(_general_one)
    _rotate_sh = _scalar(_rotate_sh)
    _kernel_jit = numba.njit(parallel=True, fastmath=True, cache=True)(_kernel)


def transform_numba(
    means: np.ndarray, quats: np.ndarray, log_scales: np.ndarray, sh_rest: np.ndarray,
    affine: np.ndarray, quat_r: np.ndarray, log_s: np.ndarray, sh_rot: np.ndarray, general: bool,
    out_means: np.ndarray, out_quats: np.ndarray, out_log_scales: np.ndarray, out_sh_rest: np.ndarray,
) -> None:  # fmt: skip
    """Fills the outputs with one fused parallel pass per frame (in-place safe per Gaussian)."""
    if numba is None:
        raise NotImplementedError("the numba backend needs the numba package, which is not installed")
    match_torch_threads()
    _kernel_jit(means, quats, log_scales, sh_rest, affine, quat_r, log_s, sh_rot, bool(general),
                out_means, out_quats, out_log_scales, out_sh_rest)  # fmt: skip


def warm_up() -> None:
    """Compiles (or loads from cache) the float32 and float64 specialisations."""
    for dt in (np.float32, np.float64):
        for k in (0, 3, 15):
            n, f = 2, 1
            aff = np.zeros((f, 12), dt)
            aff[:, [0, 4, 8]] = 1
            args = [np.ones((n, 3), dt), np.ones((n, 4), dt), np.zeros((n, 3), dt), np.zeros((n, k, 3), dt),
                    aff, np.array([[1, 0, 0, 0]], dt), np.zeros(f, dt), np.zeros((f, k, k), dt)]  # fmt: skip
            outs = [np.empty((f, n, 3), dt), np.empty((f, n, 4), dt), np.empty((f, n, 3), dt),
                    np.empty((f, n, k, 3), dt)]  # fmt: skip
            for general in (False, True):
                transform_numba(*args, general, *outs)
