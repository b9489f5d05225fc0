"""Coarse-to-fine training: render and compare at a reduced resolution during the first steps.

``TrainConfig.resolution_schedule`` is ``((until_step, factor), ...)``: steps before the first
``until_step`` train at 1/``factor`` of the image size, then the next entry applies, and from the last
``until_step`` on at full size. ``((1000, 4), (2000, 2))``: 1/4 for steps 0..999, 1/2 for 1000..1999, full
size after. Empty (the default): full size throughout. As text (the command line, notebook 02):
``"1000:4,2000:2"``.

At factor f an image of W x H pixels becomes w x h = round(W / f) x round(H / f): its box average
(:func:`torch.nn.functional.avg_pool2d` when f divides both sides, else ``interpolate(mode="area")``),
and the alpha masks alike. The intrinsics follow the pixel-corner convention of the rasterizer and the
loaders (pixel i covers [i, i+1), its centre at i + 0.5; the loaders' downsample in gsworkbench/scenes/views.py):
fx, cx are multiplied by w / W and fy, cy by h / H, so the reduced image sees exactly the same field of
view. Held-out evaluation always renders at full size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from gsworkbench.scenes.images import box_pool

Schedule = tuple[tuple[int, int], ...]


def parse_schedule(text: str) -> Schedule:
    """``"1000:4,2000:2"`` -> ``((1000, 4), (2000, 2))`` (``""`` -> ``()``); ValueError on other text."""
    out = []
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        step, sep, factor = part.partition(":")
        try:
            if not sep:
                raise ValueError
            out.append((int(step), int(factor)))
        except ValueError:
            raise ValueError(
                f"resolution_schedule: expected 'until_step:factor,...' (e.g. '1000:4,2000:2'), got {text!r}"
            ) from None
    return tuple(out)


def check_schedule(value: Any) -> Schedule:
    """The schedule as a tuple of (until_step, factor) int pairs: from such pairs (tuples or lists, e.g.
    read back from JSON) or from text (:func:`parse_schedule`). ValueError unless every factor is an int
    >= 1 and the steps are ints >= 1, strictly increasing."""
    if isinstance(value, str):
        value = parse_schedule(value)
    hint = "a sequence of (until_step, factor) pairs, e.g. ((1000, 4), (2000, 2)) or '1000:4,2000:2'"
    if not isinstance(value, Sequence):
        raise ValueError(f"resolution_schedule must be {hint}; got {value!r}")
    out = []
    for entry in value:
        if not isinstance(entry, Sequence) or isinstance(entry, str) or len(entry) != 2:
            raise ValueError(f"resolution_schedule must be {hint}; got the entry {entry!r}")
        step, factor = entry
        for what, v in (("until_step", step), ("factor", factor)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"resolution_schedule: each {what} must be an int >= 1, got {v!r} in {entry!r}")
        if out and step <= out[-1][0]:
            raise ValueError(f"resolution_schedule: steps must increase, got {step} after {out[-1][0]}")
        out.append((int(step), int(factor)))
    return tuple(out)


def factor_at(schedule: Schedule, step: int) -> int:
    """The resolution factor (1 = full size) of training step ``step`` (0-based) under ``schedule``."""
    for until, factor in schedule:
        if step < until:
            return factor
    return 1


def check_fits(schedule: Schedule, width: int, height: int, min_side: int) -> None:
    """ValueError when a factor of ``schedule`` makes a ``width`` x ``height`` image smaller than
    ``min_side`` pixels on a side (the SSIM window needs 11)."""
    for until, factor in schedule:
        w, h = reduced_size(width, height, factor)
        if min(w, h) < min_side:
            raise ValueError(
                f"resolution_schedule: factor {factor} (until step {until}) makes the {width}x{height} images "
                f"{w}x{h}, smaller than {min_side} pixels on a side (the SSIM window); use a smaller factor"
            )


def reduced_size(width: int, height: int, factor: int) -> tuple[int, int]:
    """(w, h) in pixels at 1/``factor`` of ``width`` x ``height``: each side rounded, at least 1."""
    return max(1, int(width / factor + 0.5)), max(1, int(height / factor + 0.5))


def downsample(images: torch.Tensor, width: int, height: int) -> torch.Tensor:
    """Box average of images [..., H, W, C] to [..., height, width, C] (``avg_pool2d`` when the sizes
    divide, else ``interpolate(mode="area")``)."""
    H, W, C = images.shape[-3:]
    if (W, H) == (width, height):
        return images
    x = images.reshape(-1, H, W, C)
    if H % height == 0 and W % width == 0:
        y = box_pool(x, (H // height, W // width))
    else:
        y = F.interpolate(x.permute(0, 3, 1, 2), size=(height, width), mode="area").permute(0, 2, 3, 1)
    return y.reshape(*images.shape[:-3], height, width, C).contiguous()


def scale_intrinsics(Ks: torch.Tensor, width: int, height: int, new_width: int, new_height: int) -> torch.Tensor:
    """Intrinsics [..., 3, 3] (pixels) of a ``width`` x ``height`` image for the same view at
    ``new_width`` x ``new_height``: the first row (fx, skew, cx) times new_width / width, the second
    (fy, cy) times new_height / height (pixel corners stay corners)."""
    out = Ks.clone()
    out[..., 0, :] *= new_width / width
    out[..., 1, :] *= new_height / height
    return out


class ReducedViews:
    """A scene's train images (and alpha masks) at reduced resolutions, made on first use and cached
    per (view, factor). Only the current factor's images are kept: asking for another factor drops
    the others (a schedule passes each factor once)."""

    def __init__(self, scene: Any) -> None:
        self.scene = scene
        self.factor = 1
        self._cache: dict[int, tuple[torch.Tensor, torch.Tensor | None]] = {}

    def size(self, factor: int) -> tuple[int, int]:
        """(w, h) of the images at ``factor``."""
        return reduced_size(int(self.scene.width), int(self.scene.height), factor)

    def image(self, view: int, factor: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """View ``view``'s image [h,w,3] and alpha mask [h,w,1] (None without alphas) at ``factor``."""
        if factor == 1:
            alphas = self.scene.alphas
            return self.scene.images[view], None if alphas is None else alphas[view]
        if factor != self.factor:
            self._cache.clear()
            self.factor = factor
        if view not in self._cache:
            w, h = self.size(factor)
            alphas = self.scene.alphas
            self._cache[view] = (
                downsample(self.scene.images[view], w, h),
                None if alphas is None else downsample(alphas[view], w, h),
            )
        return self._cache[view]

    def Ks(self, views: torch.Tensor, factor: int) -> torch.Tensor:
        """The intrinsics [C,3,3] of ``views`` at ``factor``."""
        Ks = self.scene.Ks[views]
        if factor == 1:
            return Ks
        W, H = int(self.scene.width), int(self.scene.height)
        return scale_intrinsics(Ks, W, H, *self.size(factor))
