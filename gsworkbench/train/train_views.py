"""The train views as initialisation needs them: poses, intrinsics, the image size, optional alpha
masks and photos, and where world points land in each view."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from gsworkbench.core.cameras import camera_points, pixel_coordinates

HULL_ALPHA = 0.1  # a pixel is inside a view's mask where its alpha exceeds this
HULL_DILATE_PX = 1  # masks grow by this many pixels (pixel-centre quantisation, antialiased edges)


@dataclass(frozen=True)
class TrainViews:
    """The train views as initialisation needs them (CPU, float32): viewmats [V,4,4] world-to-camera
    (OpenCV axes), Ks [V,3,3] in pixels, the image size, masks [V,H,W] bool (None without alphas) and
    the photos [V,H,W,3] RGB in [0,1] (None unless asked for)."""

    viewmats: torch.Tensor
    Ks: torch.Tensor
    width: int
    height: int
    masks: torch.Tensor | None
    images: torch.Tensor | None = None

    @classmethod
    def of(cls, scene: Any, masks: bool = False, images: bool = False) -> TrainViews:
        ids = scene.train_ids.cpu()
        m = None
        if masks and scene.alphas is not None:
            a = scene.alphas[ids.to(scene.alphas.device)].detach().cpu().float()[..., 0] > HULL_ALPHA  # [V,H,W]
            k = 2 * HULL_DILATE_PX + 1
            m = F.max_pool2d(a[:, None].float(), k, stride=1, padding=HULL_DILATE_PX)[:, 0] > 0
        return cls(
            scene.viewmats[ids.to(scene.viewmats.device)].detach().cpu().float(),
            scene.Ks[ids.to(scene.Ks.device)].detach().cpu().float(),
            int(scene.width),
            int(scene.height),
            m,
            scene.images[ids.to(scene.images.device)].detach().cpu().float() if images else None,
        )

    def __len__(self) -> int:
        return int(self.viewmats.shape[0])

    def project(self, points: torch.Tensor, near: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Pixel coordinates of points [P,3] in every view: x, y [V,P] (pixel i covers [i, i+1)) and
        seen [V,P] bool (in front of the near plane and inside the image)."""
        cam = camera_points(points, self.viewmats)  # [V,P,3]
        x, y = pixel_coordinates(cam, self.Ks)
        seen = (cam[..., 2] > near) & (x >= 0) & (x < self.width) & (y >= 0) & (y < self.height)
        return x, y, seen

    def views_seeing(self, points: torch.Tensor, near: float) -> torch.Tensor:
        """How many views see each point [P,3]: [P] int64."""
        return self.project(points, near)[2].sum(0)

    def hull_stats(self, points: torch.Tensor, near: float) -> tuple[torch.Tensor, torch.Tensor]:
        """For points [P,3]: how many views see each one [P] and whether some view sees it outside its
        mask [P] bool (carved away)."""
        if self.masks is None:
            raise ValueError("the visual hull needs alpha masks")
        x, y, seen = self.project(points, near)
        V, H, W = self.masks.shape
        px = x.clamp(0, W - 1).long()
        py = y.clamp(0, H - 1).long()
        flat = torch.arange(V)[:, None] * (H * W) + py * W + px
        inside = self.masks.reshape(-1)[flat]
        return seen.sum(0), (seen & ~inside).any(0)

    def colors_at(self, points: torch.Tensor, near: float) -> tuple[torch.Tensor, torch.Tensor]:
        """The colour of the pixel each point [P,3] falls on in every view, [V,P,3] (NaN where the view
        does not see it), and seen [V,P] bool. Needs the photos (``of(..., images=True)``)."""
        if self.images is None:
            raise ValueError("colours need the train photos: TrainViews.of(scene, images=True)")
        x, y, seen = self.project(points, near)
        V, H, W = self.images.shape[:3]
        px = x.clamp(0, W - 1).long()
        py = y.clamp(0, H - 1).long()
        flat = torch.arange(V)[:, None] * (H * W) + py * W + px
        rgb = self.images.reshape(-1, 3)[flat]  # [V,P,3]
        return rgb.masked_fill(~seen[..., None], float("nan")), seen
