"""``Frames``: a batch of F affine maps x -> A x + b, built from rotation/translation/scale/center.

The similarity transform of the API is ``x -> s R (x - c) + c + t`` with ``s`` a scalar or a
3-vector (then ``s R`` means ``diag(s) R``: scale along the world axes after rotating), so
``A = diag(s) R`` and ``b = c + t - A c``. Frames are small float64 numpy arrays: building them
costs microseconds, so per-call overhead stays far below the kernels' time. Transform parameters
are constants: gradients (``backend="torch"``) flow to the splats, not to the transform.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from gsworkbench.core import gaussians

# |R R^T - I| and |det R - 1| allowed for a given rotation matrix (it is then re-orthonormalised).
ROTATION_TOL = 1e-4
# A frame is a similarity when |A A^T - s^2 I| <= SIMILARITY_TOL * s^2.
SIMILARITY_TOL = 1e-9


def _as_float64(name: str, x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        if x.requires_grad:
            raise ValueError(
                f"{name} requires grad, but transform parameters are constants (gradients flow to the "
                "splats only); pass a detached tensor"
            )
        x = x.detach().cpu().numpy()
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a number, array or tensor, got {type(x).__name__}") from err
    if not np.isfinite(a).all():
        raise ValueError(f"{name} contains non-finite values (NaN or Inf)")
    return a


def nearest_rotation(M: np.ndarray) -> np.ndarray:
    """The rotation closest to M [..., 3, 3] (orthogonal polar factor U V^T of its SVD)."""
    U, _, Vh = np.linalg.svd(M)
    return U @ Vh


def _rotation(rotation: Any) -> tuple[np.ndarray, bool, torch.Tensor | None]:
    """[F,3,3] rotation matrices from a matrix or wxyz quaternion (single or batched); batched?; and
    for a quaternion, the unit quaternions [F,4] (w >= 0) of those matrices (else None)."""
    R = _as_float64("rotation", rotation)
    if R.shape[-2:] == (3, 3) and R.ndim in (2, 3):
        batched = R.ndim == 3
        R = R.reshape(-1, 3, 3)
        if R.size:
            err = np.abs(R @ np.swapaxes(R, -1, -2) - np.eye(3)).max()
            det = np.linalg.det(R)
            if err > ROTATION_TOL or np.abs(det - 1).max() > ROTATION_TOL:
                raise ValueError(
                    "rotation matrix must be orthonormal with determinant +1 (within "
                    f"{ROTATION_TOL:g}); got max |R R^T - I| = {err:.3g}, det = "
                    f"{', '.join(f'{d:.4g}' for d in det[:4])}"
                )
        # re-orthonormalise: float32 round-off in R must not turn a similarity into a general map
        return nearest_rotation(R), batched, None
    if R.shape[-1:] == (4,) and R.ndim in (1, 2):
        batched = R.ndim == 2
        q = R.reshape(-1, 4)
        if (np.linalg.norm(q, axis=-1) < 1e-12).any():
            raise ValueError("rotation quaternion must be non-zero")
        with torch.no_grad():  # R of the canonical unit quaternion is R of q, rounding included
            unit = gaussians.quat_canonical(gaussians.quat_normalize(torch.from_numpy(q)))
            return gaussians.unit_quat_to_rotmat(unit).numpy(), batched, unit
    raise ValueError(
        "rotation must be a 3x3 matrix, a wxyz quaternion [4], or batches [F,3,3] / [F,4]; "
        f"got shape {list(R.shape)}"
    )


def _vector(name: str, x: Any) -> tuple[np.ndarray, bool]:
    v = _as_float64(name, x)
    if v.shape == (3,):
        return v[None], False
    if v.ndim == 2 and v.shape[1] == 3:
        return v, True
    raise ValueError(f"{name} must have shape [3] or [F,3], got {list(v.shape)}")


def _scale(x: Any, frames: int | None) -> tuple[np.ndarray, bool]:
    """[F,3] scales. A [3] scale is one 3-vector, unless other arguments have exactly F = 3 frames."""
    s = _as_float64("scale", x)
    if s.ndim == 0:
        out, batched = np.full((1, 3), float(s)), False
    elif s.ndim == 1 and s.shape[0] == 3 and frames != 3:
        out, batched = s[None], False
    elif s.ndim == 1:
        out, batched = np.repeat(s[:, None], 3, axis=1), True
    elif s.ndim == 2 and s.shape[1] in (1, 3):  # one row broadcasts over the frames of the others
        out, batched = np.broadcast_to(s, (s.shape[0], 3)).copy(), s.shape[0] != 1
    else:
        raise ValueError(f"scale must be a scalar, a 3-vector, [F] or [F,3]; got shape {list(s.shape)}")
    if not (out > 0).all():
        raise ValueError("scale must be positive (mirroring / zero scale cannot be represented by splats)")
    return out, batched


@dataclass(frozen=True, eq=False)
class Frames:
    """F affine maps ``x -> A x + b``: A [F,3,3], b [F,3] (float64 numpy). ``batched``: F outputs wanted.

    ``is_similarity`` (every A is s R) is decided at construction (``similarity`` may say so for frames
    built that way), and so are the kernel parameters as float64 CPU tensors (:meth:`params`): a
    transform with prebuilt Frames then reads no numpy and takes no data-dependent branch, so it traces
    whole under torch.compile.
    """

    A: np.ndarray
    b: np.ndarray
    batched: bool
    similarity: bool | None = field(default=None, compare=False, repr=False)
    # the unit quaternions [F,4] or [1,4] (wxyz, w >= 0) of the rotation part when the frames were built
    # from them (make_frames): quat_r is then taken as given, not recovered from the matrix
    rotation_quat: torch.Tensor | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        A = np.asarray(self.A, dtype=np.float64)
        b = np.asarray(self.b, dtype=np.float64)
        if A.ndim != 3 or A.shape[1:] != (3, 3) or b.shape != (A.shape[0], 3):
            raise ValueError(f"Frames needs A [F,3,3] and b [F,3]; got {list(A.shape)}, {list(b.shape)}")
        if not self.batched and A.shape[0] != 1:
            raise ValueError("an unbatched Frames holds exactly one transform")
        if not (np.isfinite(A).all() and np.isfinite(b).all()):
            raise ValueError("Frames contains non-finite values")
        if A.size and not (np.linalg.det(A) > 0).all():
            raise ValueError("the linear part of a transform must have a positive determinant (no mirroring)")
        object.__setattr__(self, "A", A)
        object.__setattr__(self, "b", b)
        if self.similarity is None:
            object.__setattr__(self, "similarity", self._check_similarity())
        scale = self.scale
        rotation = torch.from_numpy(A / scale[:, None, None] if self.similarity else nearest_rotation(A))
        quat_r = self.rotation_quat
        if quat_r is None or not self.similarity:
            with torch.no_grad():
                quat_r = gaussians.rotmat_to_quat(rotation)
        object.__setattr__(self, "_tensors", {
            "affine": torch.from_numpy(np.concatenate([A.reshape(-1, 9), b], axis=1)),
            "rotation": rotation,
            "quat_r": quat_r.expand(A.shape[0], 4).contiguous(),
            "log_s": torch.from_numpy(np.log(scale)),
        })  # fmt: skip

    def __len__(self) -> int:
        return self.A.shape[0]

    @property
    def scale(self) -> np.ndarray:
        """Uniform scale per frame [F]: sqrt(trace(A A^T) / 3)."""
        return np.sqrt((self.A * self.A).sum(axis=(-1, -2)) / 3.0)

    @property
    def is_similarity(self) -> bool:
        """True when every A is s R (uniform scale): the fast path, no per-Gaussian decomposition."""
        return bool(self.similarity)

    def _check_similarity(self) -> bool:
        s2 = self.scale**2
        err = np.abs(self.A @ np.swapaxes(self.A, -1, -2) - s2[:, None, None] * np.eye(3)).max(axis=(-1, -2))
        return bool((err <= SIMILARITY_TOL * s2).all())

    @property
    def rotation(self) -> np.ndarray:
        """Rotation part [F,3,3]: the orthogonal factor of A's polar decomposition (A/s for a similarity).

        This is the rotation applied to the SH coefficients.
        """
        return self._tensors["rotation"].numpy()

    def params(self, degree: int) -> dict[str, torch.Tensor]:
        """The per-frame kernel parameters, computed once here for every backend (float64 CPU tensors,
        in the order the kernels take them):

        - ``affine`` [F,12]: A row-major, then b;
        - ``quat_r`` [F,4]: the quaternion (wxyz, w >= 0) of the rotation part R (A = s R for a similarity);
        - ``log_s`` [F]: log of the uniform scale s = sqrt(trace(A A^T) / 3);
        - ``sh_rot`` [F,K,K]: the block-diagonal rotation of SH bands 1..degree by R.

        ``quat_r`` and ``log_s`` are used by the similarity path only (``is_similarity``)."""
        t = self._tensors
        k = gaussians.num_sh_bases(degree) - 1
        R = t["rotation"]
        if degree > 0:
            with torch.no_grad():
                sh_rot = gaussians.sh_rotation_matrix(R, degree)
        else:
            sh_rot = R.new_zeros(R.shape[0], k, k)
        return {"affine": t["affine"], "quat_r": t["quat_r"], "log_s": t["log_s"], "sh_rot": sh_rot}

    def inverse(self) -> Frames:
        """The inverse maps: ``x -> A^-1 x - A^-1 b`` (a similarity's inverse is a similarity)."""
        if self.is_similarity:  # exact structure: (s R)^-1 = R^T / s
            Ainv = np.swapaxes(self.A, -1, -2) / (self.scale**2)[:, None, None]
        else:
            Ainv = np.linalg.inv(self.A)
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
            A [3] scale is one 3-vector for every frame, except when rotation/translation/center are
            batched with exactly F = 3 frames: then it is one scalar per frame (pass [3,3] or [1,3]
            rows to say otherwise).
        center: pivot c, [3] or [F,3] (default 0).
    """
    sizes: dict[str, int] = {}
    R = t = c = s = quat = None
    if rotation is not None:
        R, rb, quat = _rotation(rotation)
        if rb:
            sizes["rotation"] = R.shape[0]
    if translation is not None:
        t, tb = _vector("translation", translation)
        if tb:
            sizes["translation"] = t.shape[0]
    if center is not None:
        c, cb = _vector("center", center)
        if cb:
            sizes["center"] = c.shape[0]
    frames = next(iter(sizes.values())) if sizes else None
    if scale is not None:
        s, sb = _scale(scale, frames)
        if sb:
            sizes["scale"] = s.shape[0]
    if len(set(sizes.values())) > 1:
        raise ValueError(f"inconsistent number of frames F across transform arguments: {sizes}")
    R = R if R is not None else np.eye(3)[None]
    s = s if s is not None else np.ones((1, 3))
    t = t if t is not None else np.zeros((1, 3))
    c = c if c is not None else np.zeros((1, 3))
    A = s[:, :, None] * R  # frames broadcast: every argument has 1 or F rows
    b = c + t - (A @ c[..., None])[..., 0]
    if sizes and A.shape[0] != b.shape[0]:
        A = np.broadcast_to(A, (b.shape[0], 3, 3))
    # uniform scales and orthonormal R: a similarity by construction
    similarity = bool((s == s[:, :1]).all())
    return Frames(
        A, b, bool(sizes), similarity=True if similarity else None, rotation_quat=quat if similarity else None
    )
