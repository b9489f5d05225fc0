"""``Frames``: a batch of F affine maps x -> A x + b, built from rotation/translation/scale/center.

The similarity transform of the API is ``x -> s R (x - c) + c + t`` with ``s`` a scalar or a
3-vector (then ``s R`` means ``diag(s) R``: scale along the world axes after rotating), so
``A = diag(s) R`` and ``b = c + t - A c``. Frames are kept in float64 (differentiable in the
parameters when those are float64 tensors requiring grad).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from gsworkbench import gaussians

# |R R^T - I| and |det R - 1| allowed for a given rotation matrix (it is then re-orthonormalised).
ROTATION_TOL = 1e-4
# A frame is a similarity when |A A^T - s^2 I| <= SIMILARITY_TOL * s^2.
SIMILARITY_TOL = 1e-9


def _as_float64(name: str, x: Any) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        t = x
        if not t.is_floating_point():
            t = t.to(torch.float64)
    else:
        try:
            t = torch.as_tensor(x, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError) as err:
            raise ValueError(f"{name} must be a number, array or tensor, got {type(x).__name__}") from err
    t = t.to(torch.float64)
    if t.numel() and not bool(torch.isfinite(t.detach()).all()):
        raise ValueError(f"{name} contains non-finite values (NaN or Inf)")
    return t


def nearest_rotation(M: torch.Tensor) -> torch.Tensor:
    """The rotation closest to M [..., 3, 3] (orthogonal polar factor U V^T of its SVD)."""
    U, _, Vh = torch.linalg.svd(M)
    return U @ Vh


def _rotation(rotation: Any) -> tuple[torch.Tensor, bool]:
    """[F,3,3] rotation matrices from a matrix or wxyz quaternion (single or batched); and batched?"""
    R = _as_float64("rotation", rotation)
    if R.shape[-2:] == (3, 3) and R.dim() in (2, 3):
        batched = R.dim() == 3
        R = R.reshape(-1, 3, 3)
        err = (R @ R.transpose(-1, -2) - torch.eye(3, dtype=R.dtype, device=R.device)).abs().amax(dim=(-1, -2))
        det = torch.linalg.det(R.detach())
        if R.numel() and (bool((err.detach() > ROTATION_TOL).any()) or bool(((det - 1).abs() > ROTATION_TOL).any())):
            raise ValueError(
                "rotation matrix must be orthonormal with determinant +1 (within "
                f"{ROTATION_TOL:g}); got max |R R^T - I| = {float(err.max()):.3g}, det = "
                f"{', '.join(f'{float(d):.4g}' for d in det[:4])}"
            )
        # re-orthonormalise: float32 round-off in R must not turn a similarity into a general map
        return nearest_rotation(R), batched
    if R.shape[-1:] == (4,) and R.dim() in (1, 2):
        batched = R.dim() == 2
        q = R.reshape(-1, 4)
        if q.numel() and bool((q.detach().norm(dim=-1) < 1e-12).any()):
            raise ValueError("rotation quaternion must be non-zero")
        return gaussians.quat_to_rotmat(q), batched
    raise ValueError(
        f"rotation must be a 3x3 matrix, a wxyz quaternion [4], or batches [F,3,3] / [F,4]; got shape {list(R.shape)}"
    )


def _vector(name: str, x: Any) -> tuple[torch.Tensor, bool]:
    v = _as_float64(name, x)
    if v.shape == (3,):
        return v[None], False
    if v.dim() == 2 and v.shape[1] == 3:
        return v, True
    raise ValueError(f"{name} must have shape [3] or [F,3], got {list(v.shape)}")


def _scale(x: Any, frames: int | None) -> tuple[torch.Tensor, bool]:
    """[F,3] scales. A [3] scale is one 3-vector unless other arguments give F = 3 frames and ..."""
    s = _as_float64("scale", x)
    if s.dim() == 0:
        out, batched = s.reshape(1, 1).expand(1, 3), False
    elif s.dim() == 1 and s.shape[0] == 3 and frames is None:
        out, batched = s[None], False
    elif s.dim() == 1:
        out, batched = s[:, None].expand(-1, 3), True
    elif s.dim() == 2 and s.shape[1] in (1, 3):
        out, batched = s.expand(-1, 3), True
    else:
        raise ValueError(f"scale must be a scalar, a 3-vector, [F] or [F,3]; got shape {list(s.shape)}")
    if out.numel() and not bool((out.detach() > 0).all()):
        raise ValueError("scale must be positive (mirroring / zero scale cannot be represented by splats)")
    return out, batched


@dataclass(frozen=True)
class Frames:
    """F affine maps ``x -> A x + b``: A [F,3,3], b [F,3] (float64). ``batched``: F outputs wanted."""

    A: torch.Tensor
    b: torch.Tensor
    batched: bool

    def __post_init__(self) -> None:
        if self.A.dim() != 3 or self.A.shape[1:] != (3, 3) or self.b.shape != (self.A.shape[0], 3):
            raise ValueError(f"Frames needs A [F,3,3] and b [F,3]; got {list(self.A.shape)}, {list(self.b.shape)}")
        if not self.batched and self.A.shape[0] != 1:
            raise ValueError("an unbatched Frames holds exactly one transform")
        det = torch.linalg.det(self.A.detach())
        if self.A.numel() and not bool((det > 0).all()):
            raise ValueError("the linear part of a transform must have a positive determinant (no mirroring)")

    def __len__(self) -> int:
        return self.A.shape[0]

    @property
    def scale(self) -> torch.Tensor:
        """Uniform scale per frame [F]: sqrt(trace(A A^T) / 3)."""
        return torch.sqrt((self.A * self.A).sum(dim=(-1, -2)) / 3.0)

    @property
    def is_similarity(self) -> bool:
        """True when every A is s R (uniform scale): the fast path, no per-Gaussian decomposition."""
        s2 = (self.scale**2).detach()
        AAt = (self.A @ self.A.transpose(-1, -2)).detach()
        err = (AAt - s2[:, None, None] * torch.eye(3, dtype=AAt.dtype, device=AAt.device)).abs().amax(dim=(-1, -2))
        return bool((err <= SIMILARITY_TOL * s2).all())

    @property
    def rotation(self) -> torch.Tensor:
        """Rotation part [F,3,3]: the orthogonal factor of A's polar decomposition (A/s for a similarity).

        This is the rotation applied to the SH coefficients.
        """
        if self.is_similarity:
            return self.A / self.scale[:, None, None]
        return nearest_rotation(self.A)

    def to_splat_params(self, dtype: torch.dtype, device: torch.device, degree: int) -> dict[str, torch.Tensor]:
        """Kernel parameters: affine [F,12], quat_r [F,4], log_s [F], sh_rot [F,K,K] in ``dtype``."""
        R = self.rotation
        return {
            "affine": torch.cat([self.A.reshape(-1, 9), self.b], dim=1).to(dtype=dtype, device=device),
            "quat_r": gaussians.rotmat_to_quat(R).to(dtype=dtype, device=device),
            "log_s": torch.log(self.scale).to(dtype=dtype, device=device),
            "sh_rot": gaussians.sh_rotation_matrix(R, degree).to(dtype=dtype, device=device)
            if degree > 0
            else R.new_zeros(len(self), 0, 0).to(dtype=dtype, device=device),
        }

    def inverse(self) -> Frames:
        """The inverse maps: ``x -> A^-1 x - A^-1 b`` (a similarity's inverse is a similarity)."""
        Ainv = torch.linalg.inv(self.A)
        if self.is_similarity:  # exact structure: (s R)^-1 = R^T / s
            s = self.scale
            Ainv = self.A.transpose(-1, -2) / (s * s)[:, None, None]
        return Frames(Ainv, -(Ainv @ self.b[..., None])[..., 0], self.batched)

    def compose(self, first: Frames) -> Frames:
        """``self`` after ``first`` (x -> A2 (A1 x + b1) + b2), frame by frame (F broadcasts from 1)."""
        A = self.A @ first.A
        b = (self.A @ first.b[..., None])[..., 0] + self.b
        return Frames(A, b, self.batched or first.batched)


def make_frames(
    rotation: Any = None, translation: Any = None, scale: Any = None, center: Any = None
) -> Frames:
    """Frames of ``x -> s R (x - c) + c + t`` (see the module docstring).

    Args:
        rotation: 3x3 rotation matrix or wxyz quaternion, or batches [F,3,3] / [F,4] (default I).
        translation: t, [3] or [F,3] (default 0).
        scale: s > 0: a scalar, a 3-vector (non-uniform, along world axes), [F] or [F,3] (default 1).
            A [3] scale is a 3-vector unless rotation/translation/center are batched, then it is [F].
        center: pivot c, [3] or [F,3] (default 0).
    """
    parts: list[tuple[str, torch.Tensor, bool]] = []
    R = t = c = None
    if rotation is not None:
        R, rb = _rotation(rotation)
        parts.append(("rotation", R, rb))
    if translation is not None:
        t, tb = _vector("translation", translation)
        parts.append(("translation", t, tb))
    if center is not None:
        c, cb = _vector("center", center)
        parts.append(("center", c, cb))
    batched_sizes = {name: p.shape[0] for name, p, b in parts if b}
    frames = None
    if batched_sizes:
        if len(set(batched_sizes.values())) > 1:
            raise ValueError(f"inconsistent number of frames F across transform arguments: {batched_sizes}")
        frames = next(iter(batched_sizes.values()))
    s = None
    if scale is not None:
        s, sb = _scale(scale, frames)
        if sb:
            if frames is not None and s.shape[0] != frames:
                raise ValueError(f"scale has {s.shape[0]} frames, other transform arguments have {frames}")
            frames = s.shape[0]
    F = frames if frames is not None else 1
    eye = torch.eye(3, dtype=torch.float64)
    R = R.expand(F, 3, 3) if R is not None else eye.expand(F, 3, 3)
    s = s.expand(F, 3) if s is not None else torch.ones(F, 3, dtype=torch.float64)
    t = t.expand(F, 3) if t is not None else torch.zeros(F, 3, dtype=torch.float64)
    c = c.expand(F, 3) if c is not None else torch.zeros(F, 3, dtype=torch.float64)
    A = s[:, :, None] * R
    b = c + t - (A @ c[..., None])[..., 0]
    return Frames(A, b, frames is not None)
