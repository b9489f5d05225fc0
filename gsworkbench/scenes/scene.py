"""The one dataset type: posed images, a train/test split, the scene scale and an initial point cloud.

Cameras follow the rasterizer's convention (:mod:`gsworkbench.core.cameras`): a viewmat [4,4] maps
world points to OpenCV camera space (x right, y down, z forward), K [3,3] is a pinhole in pixels with
pixel i covering [i, i+1) (its centre at i + 0.5), as in gsplat and COLMAP.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

Color = tuple[float, float, float]


@dataclass
class Scene:
    """Posed images and what training needs besides them.

    images: [V,H,W,3] float32 RGB in [0,1], already composited over ``background``.
    viewmats: [V,4,4] float32 world-to-camera (OpenCV axes). Ks: [V,3,3] float32 intrinsics in pixels.
    train_ids / test_ids: int64 view indices. scene_scale: camera extent in world units (gsplat's
    convention, see :func:`camera_extent`). points / point_colors: [P,3] float32 initial cloud (world)
    and its RGB in [0,1], or None. alphas: [V,H,W,1] the source's alpha where it had one.
    image_names: one name per view (the file name relative to the dataset folder), or empty.
    bounds: [2,3] float32 world-space box (min corner, max corner) that the source states the scene lies
    in (instant-ngp's ``aabb`` / ``aabb_scale``), or None: a hint for initialisation (for unbounded
    captures it can be far larger than the content).
    source: where the views came from, for the fingerprint a training run records
    (:func:`gsworkbench.train.fingerprint.scene_fingerprint`): ``folder`` (the dataset folder the
    image names are relative to) and, for built-in scenes, ``generator_key``; empty when unknown.
    """

    images: torch.Tensor
    viewmats: torch.Tensor
    Ks: torch.Tensor
    width: int
    height: int
    train_ids: torch.Tensor
    test_ids: torch.Tensor
    scene_scale: float
    points: torch.Tensor | None
    point_colors: torch.Tensor | None
    background: Color
    name: str
    alphas: torch.Tensor | None = None
    image_names: list[str] = field(default_factory=list)
    bounds: torch.Tensor | None = None
    source: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_views(
        cls, images: torch.Tensor, viewmats: torch.Tensor, Ks: torch.Tensor, is_test: torch.Tensor, *,
        points: torch.Tensor | None, point_colors: torch.Tensor | None, background: Color, name: str,
        alphas: torch.Tensor | None = None, image_names: list[str] | None = None,
        bounds: torch.Tensor | None = None, source: dict[str, Any] | None = None,
    ) -> Scene:  # fmt: skip
        """A scene from its views (``is_test`` [V] bool marks the test views); the size comes from the
        images and ``scene_scale`` from the cameras (:func:`camera_extent`). What every loader builds;
        loaders give ``source={"folder": ...}`` so that a training run's fingerprint hashes the files."""
        return cls(
            images=images, viewmats=viewmats, Ks=Ks, width=images.shape[2], height=images.shape[1],
            train_ids=torch.nonzero(~is_test).flatten(), test_ids=torch.nonzero(is_test).flatten(),
            scene_scale=camera_extent(viewmats), points=points, point_colors=point_colors,
            background=background, name=name, alphas=alphas, image_names=list(image_names or []),
            bounds=bounds, source=dict(source or {}),
        )  # fmt: skip

    def __post_init__(self) -> None:
        V = self.images.shape[0]
        if self.images.shape != (V, self.height, self.width, 3):
            raise ValueError(f"images must be [V,{self.height},{self.width},3], got {list(self.images.shape)}")
        if self.viewmats.shape != (V, 4, 4) or self.Ks.shape != (V, 3, 3):
            raise ValueError(
                f"viewmats must be [{V},4,4] and Ks [{V},3,3], got {list(self.viewmats.shape)}, {list(self.Ks.shape)}"
            )
        if self.alphas is not None and self.alphas.shape != (V, self.height, self.width, 1):
            raise ValueError(f"alphas must be [V,H,W,1], got {list(self.alphas.shape)}")
        for split, ids in (("train_ids", self.train_ids), ("test_ids", self.test_ids)):
            if ids.dtype != torch.int64 or ids.dim() != 1:
                raise ValueError(f"{split} must be a 1-D int64 tensor")
            if ids.numel() and ids.device.type != "meta" and (int(ids.min()) < 0 or int(ids.max()) >= V):
                raise ValueError(f"{split} must index views 0..{V - 1}")
        if (self.points is None) != (self.point_colors is None):
            raise ValueError("points and point_colors must be given together")
        if self.points is not None and (self.points.dim() != 2 or self.points.shape[1] != 3):
            raise ValueError(f"points must be [P,3], got {list(self.points.shape)}")
        if self.points is not None and self.point_colors.shape != self.points.shape:
            raise ValueError("point_colors must have the shape of points")
        if self.image_names and len(self.image_names) != V:
            raise ValueError(f"image_names has {len(self.image_names)} names for {V} views")
        if self.bounds is not None:
            b = self.bounds
            if b.shape != (2, 3):
                raise ValueError(f"bounds must be [2,3] (min corner, max corner), got {list(b.shape)}")
            if b.device.type != "meta" and not (torch.isfinite(b).all() and (b[0] <= b[1]).all()):
                raise ValueError(f"bounds must be finite with min <= max, got {b.tolist()}")

    def __len__(self) -> int:
        """The number of views."""
        return int(self.images.shape[0])

    def to(self, device: torch.device | str) -> Scene:
        """A copy with every tensor on ``device``."""
        moved = {
            f.name: getattr(self, f.name).to(device)
            for f in dataclasses.fields(self)
            if isinstance(getattr(self, f.name), torch.Tensor)
        }
        return dataclasses.replace(self, **moved)

    def camera_centers(self) -> torch.Tensor:
        """Camera centres in world space [V,3]: -Rᵀ t of each viewmat."""
        return camera_centers(self.viewmats)

    def subset(self, ids: Sequence[int] | torch.Tensor) -> Scene:
        """The views ``ids`` (in that order) as a scene; the split keeps the chosen views, re-indexed.

        The scene scale and point cloud are kept: they describe the scene, not the chosen views.
        """
        idx = torch.as_tensor(ids, dtype=torch.int64).reshape(-1)
        if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= len(self)):
            raise ValueError(f"subset ids must index views 0..{len(self) - 1}")
        new_of_old = torch.full((len(self),), -1, dtype=torch.int64)
        new_of_old[idx] = torch.arange(idx.numel())

        def remap(split: torch.Tensor) -> torch.Tensor:
            mapped = new_of_old[split.cpu()]
            return mapped[mapped >= 0].to(split.device)

        dev = self.images.device
        return dataclasses.replace(
            self,
            images=self.images[idx.to(dev)],
            viewmats=self.viewmats[idx.to(self.viewmats.device)],
            Ks=self.Ks[idx.to(self.Ks.device)],
            alphas=None if self.alphas is None else self.alphas[idx.to(self.alphas.device)],
            train_ids=remap(self.train_ids),
            test_ids=remap(self.test_ids),
            image_names=[self.image_names[i] for i in idx.tolist()] if self.image_names else [],
        )

    def validation_split(self, every: int = 10) -> Scene:
        """A scene to tune settings on: the training views only, every ``every``-th of them (from the
        first) held out as its test views and the rest trained on. The scene's own test views are dropped,
        so a setting chosen by its scores never saw them (NeRF-synthetic's protocol tunes on ``val``,
        never on ``test``)."""
        if isinstance(every, bool) or not isinstance(every, int) or every < 2:
            raise ValueError(f"every must be an int >= 2, got {every!r}")
        train = self.train_ids.cpu()
        if train.numel() < every:
            raise ValueError(f"scene {self.name!r} has {train.numel()} training views, fewer than every={every}")
        sub = self.subset(train)  # the training views, in order, as views 0..len(train)-1
        held = torch.zeros(len(sub), dtype=torch.bool)
        held[::every] = True
        return dataclasses.replace(sub, train_ids=torch.nonzero(~held).flatten().to(sub.train_ids.device),
                                   test_ids=torch.nonzero(held).flatten().to(sub.test_ids.device))


def camera_centers(viewmats: torch.Tensor) -> torch.Tensor:
    """World-space centres [V,3] of world-to-camera matrices [V,4,4]: c = -Rᵀ t."""
    R, t = viewmats[:, :3, :3], viewmats[:, :3, 3:]
    return -(R.transpose(1, 2) @ t)[..., 0]


def camera_extent(viewmats: torch.Tensor) -> float:
    """gsplat's scene scale: 1.1 × the largest distance of a camera centre from their mean."""
    c = camera_centers(viewmats.double())
    return 1.1 * float((c - c.mean(0)).norm(dim=1).max())
