"""Camera refinement during training: small pose errors of the photos' recovered cameras, learned
beside the splats so that the splats need not blur to reconcile views that disagree by a pixel.

``pose_opt=True`` gives each training view a rigid correction ``D`` (a rotation in the continuous 6D
form of Zhou et al. and a translation), applied on the camera side of its world-to-camera matrix:
``viewmat' = D @ viewmat``. Corrections start at the identity and are learned with their own Adam at
:attr:`CameraRefinement.lr`; the translation is in units of the scene scale, so one learning rate
serves scenes of any size (gsplat's ``pose_opt`` works on scenes normalised to unit size).

``intrinsics_opt=True`` adds a per-view focal scale and principal-point shift, for photos whose lens
differs a little from the one shared camera they were undistorted with. Both are a linear map of
camera coordinates (``x -> e^s x + p z`` for ``x`` and ``y``: the same pixel as focal ``e^s f`` and
principal point ``c + p f``), so they too go on the camera side of the viewmat, and the projection of
means and covariances stays exact. The SH colours' view directions then come from a camera centre
off by the same few percent; that changes a colour far less than the pixel it moves.
A radial residual ``k1`` per view, which no such map follows, warps the render itself
(:func:`radial_warp`) before the loss.

Held-out views keep the poses they were given: their corrections are never rendered in a step, so
they stay at the identity. A held-out photo whose recovered pose is off by as much as the training
photos' were is then scored partly on that error; :func:`align_pose` fits a held-out view's correction
to its photo with the splats fixed (the test-time pose alignment of pose-free methods such as BARF),
which the trainer's ``eval_pose_steps`` applies before scoring.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

ROTATION_6D = 6  # the first two columns of the rotation, deviations from the identity's
PARAMS = 3 + ROTATION_6D  # translation (scene scales), then the 6D rotation
LENS_PARAMS = 4  # log focal scale, principal-point shift (x, y) / focal, radial residual k1


def rotation_from_6d(d6: torch.Tensor) -> torch.Tensor:
    """Rotations [...,3,3] from the 6D form [...,6] (the two first columns, orthonormalised by
    Gram-Schmidt; the third is their cross product). Zeros give the identity (the form stores the
    deviation from the identity's columns)."""
    a1 = d6[..., 0:3] + d6.new_tensor([1.0, 0.0, 0.0])
    a2 = d6[..., 3:6] + d6.new_tensor([0.0, 1.0, 0.0])
    b1 = torch.nn.functional.normalize(a1, dim=-1)
    b2 = torch.nn.functional.normalize(a2 - (b1 * a2).sum(-1, keepdim=True) * b1, dim=-1)
    b3 = torch.linalg.cross(b1, b2, dim=-1)
    return torch.stack([b1, b2, b3], dim=-1)


def correction_matrices(params: torch.Tensor, scale: float) -> torch.Tensor:
    """Rigid transforms [...,4,4] from corrections [...,9] (translation in units of ``scale``)."""
    out = torch.zeros(*params.shape[:-1], 4, 4, dtype=params.dtype, device=params.device)
    out[..., :3, :3] = rotation_from_6d(params[..., 3:])
    out[..., :3, 3] = params[..., :3] * scale
    out[..., 3, 3] = 1.0
    return out


def intrinsic_matrices(params: torch.Tensor) -> torch.Tensor:
    """Camera-side maps [...,4,4] from intrinsic corrections [...,3]: (log focal scale, principal-point
    shift in x and y in units of the focal length)."""
    out = torch.zeros(*params.shape[:-1], 4, 4, dtype=params.dtype, device=params.device)
    f = params[..., 0].exp()
    out[..., 0, 0], out[..., 1, 1] = f, f
    out[..., 0, 2], out[..., 1, 2] = params[..., 1], params[..., 2]
    out[..., 2, 2], out[..., 3, 3] = 1.0, 1.0
    return out


def radial_warp(images: torch.Tensor, k1: torch.Tensor, Ks: torch.Tensor) -> torch.Tensor:
    """``images`` [C,H,W,D] as a lens with radial residual ``k1`` [C] records them: the pixel at ``p``
    takes the image's value at ``c + (p - c)(1 + k1 r^2)``, ``r = |p - c| / f`` (``Ks`` [C,3,3] give
    ``c`` and ``f``), bilinear, edges clamped; zero ``k1`` leaves the images as they are (to rounding)."""
    C, H, W, _ = images.shape
    x = torch.arange(W, device=images.device, dtype=images.dtype) + 0.5  # pixel centres
    y = torch.arange(H, device=images.device, dtype=images.dtype) + 0.5
    Ks = Ks.to(images.dtype)[:, :, :, None, None]  # [C,3,3,1,1]
    fx, fy, cx, cy = Ks[:, 0, 0], Ks[:, 1, 1], Ks[:, 0, 2], Ks[:, 1, 2]
    dx, dy = x[None, None, :] - cx, y[None, :, None] - cy  # [C,1,W], [C,H,1]
    gain = 1 + k1[:, None, None].to(images.dtype) * ((dx / fx) ** 2 + (dy / fy) ** 2)  # [C,H,W]
    grid = torch.stack([2 * (cx + dx * gain) / W - 1, 2 * (cy + dy * gain) / H - 1], dim=-1)
    out = torch.nn.functional.grid_sample(images.permute(0, 3, 1, 2), grid, mode="bilinear", padding_mode="border",
                                          align_corners=False)  # fmt: skip
    return out.permute(0, 2, 3, 1)


def corrected_viewmats(
    viewmats: torch.Tensor, params: torch.Tensor, scale: float, intrinsics: torch.Tensor | None = None
) -> torch.Tensor:
    """``viewmats`` [C,4,4] (world to camera) with corrections ``params`` [C,9] on the camera side, and
    ``intrinsics`` [C,3] (:func:`intrinsic_matrices`) after them."""
    out = correction_matrices(params, scale) @ viewmats
    return out if intrinsics is None else intrinsic_matrices(intrinsics) @ out


class CameraRefinement:
    """One pose correction per view of a scene with ``num_views`` views: ``params`` [V,9], zeros at the
    start; ``scale``: the scene scale (world units of one translation unit); ``lr``: Adam's rate."""

    def __init__(
        self, num_views: int, lr: float, scale: float, device: torch.device | str = "cpu", intrinsics: bool = False
    ) -> None:
        self.params = torch.zeros(num_views, PARAMS, device=device, requires_grad=True)
        # [V,4] (log focal scale, principal-point shift / focal, radial residual) where the lens is refined too
        self.intrinsics = torch.zeros(num_views, LENS_PARAMS, device=device, requires_grad=True) if intrinsics else None
        self.scale = float(scale)
        self.lr = lr
        self.tensors = [self.params] + ([self.intrinsics] if self.intrinsics is not None else [])  # what it learns
        self.optimizer = torch.optim.Adam(self.tensors, lr=lr, eps=1e-15)

    def apply(self, viewmats: torch.Tensor, views: torch.Tensor) -> torch.Tensor:
        """``viewmats`` [C,4,4] of scene views ``views`` [C] with their corrections (differentiable)."""
        lens = None if self.intrinsics is None else self.intrinsics[views].to(viewmats.dtype)
        return corrected_viewmats(viewmats, self.params[views].to(viewmats.dtype), self.scale, lens)

    def lens(self, views: torch.Tensor) -> torch.Tensor | None:
        """The lens corrections [C,4] of ``views``, or None where the lens is not refined."""
        return None if self.intrinsics is None else self.intrinsics[views]

    def step(self) -> None:
        """One Adam step on the corrections that have gradients, then their gradients cleared."""
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def summary(self, views: torch.Tensor) -> dict[str, float]:
        """The median and largest correction of ``views``: rotation in degrees, translation in % of the
        scene scale."""
        with torch.no_grad():
            d = correction_matrices(self.params[views].detach().double(), 1.0)
            cos = ((d[:, 0, 0] + d[:, 1, 1] + d[:, 2, 2] - 1) / 2).clamp(-1, 1)
            deg = torch.rad2deg(torch.arccos(cos))
            pct = 100 * d[:, :3, 3].norm(dim=1)
        if len(deg) == 0:
            return {}
        out = {
            "pose_correction_deg_median": float(deg.median()), "pose_correction_deg_max": float(deg.max()),
            "pose_correction_pct_median": float(pct.median()), "pose_correction_pct_max": float(pct.max()),
        }  # fmt: skip
        if self.intrinsics is not None:  # focal change and principal-point shift in % of the focal length
            lens = self.intrinsics[views].detach().double()
            out["focal_correction_pct_median"] = float(100 * lens[:, 0].expm1().abs().median())
            out["principal_correction_pct_median"] = float(100 * lens[:, 1:].norm(dim=1).median())
        return out

    def state_dict(self) -> dict[str, Any]:
        lens = None if self.intrinsics is None else self.intrinsics.detach().cpu()
        return {"params": self.params.detach().cpu(), "intrinsics": lens, "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        with torch.no_grad():
            self.params.copy_(state["params"].to(self.params.device))
            if self.intrinsics is not None and state.get("intrinsics") is not None:
                self.intrinsics.copy_(state["intrinsics"].to(self.intrinsics.device))
        if (self.intrinsics is None) == (state.get("intrinsics") is None):  # the same tensors: the same moments
            self.optimizer.load_state_dict(state["optimizer"])


def align_pose(
    render: Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor],
    target: torch.Tensor,
    steps: int,
    lr: float,
    intrinsics: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The correction that best aligns a view to its photo with the splats fixed: ``steps`` Adam steps
    on the L1 error of ``render(pose, lens)`` ([H,W,3]) against ``target`` [H,W,3], from the identity.
    Returns (pose [9], lens [4] with ``intrinsics``, else None), the pair that scored best. ``lr``:
    Adam's rate (the rotation's 6D deviations, translation in scene scales, the lens's terms)."""
    pose = torch.zeros(PARAMS, device=target.device, requires_grad=True)
    lens = torch.zeros(LENS_PARAMS, device=target.device, requires_grad=True) if intrinsics else None
    optimizer = torch.optim.Adam([pose] + ([lens] if lens is not None else []), lr=lr, eps=1e-15)

    def snapshot() -> tuple[torch.Tensor, torch.Tensor | None]:
        return pose.detach().clone(), None if lens is None else lens.detach().clone()

    best, best_loss = snapshot(), float("inf")
    for _ in range(steps):
        loss = (render(pose, lens) - target).abs().mean()
        value = float(loss.detach())
        if value < best_loss:  # the correction before this step's update: the one that scored `value`
            best, best_loss = snapshot(), value
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return best
