"""From a loader's list of frames to a Scene's tensors: missing images, downsampled folders,
undistortion, per-view sizes, alpha compositing, box downsampling. Shared by both loaders.

The rules, in order:

1. **Missing images.** Frames whose image file does not exist are skipped with one warning that gives
   their count and the first missing path (``missing="skip"``, the default: what instant-ngp and
   nerfstudio do), or refused with a FileNotFoundError (``missing="error"``).
2. **Downsampling.** With ``downsample=d > 1``, a sibling folder of downsampled copies (``images_d``,
   as nerfstudio and Mip-NeRF 360 ship them) is used when it holds every image; otherwise the
   full-size images are box-averaged by d after undistortion.
3. **Camera to file size.** A camera whose stated size differs from its image file's is rescaled to the
   file (ValueError naming the file when the aspect ratios differ).
4. **Undistortion.** Distorted cameras are undistorted to pinholes once, cached
   (:mod:`gsworkbench.scenes.undistort`).
5. **Per-view sizes.** Views whose images differ in size (COLMAP's undistorter writes them a few
   pixels apart) are cropped to the smallest width and height, centred (the odd column or row comes
   off the right or bottom), and their principal points move by the columns and rows cropped off the
   left and top; a view that would lose more than 10 % of its width or height is a ValueError naming
   the file. Every view of a Scene thus has one size, and K describes the cropped image exactly.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from gsworkbench.scenes.images import box_pool, image_size, read_image
from gsworkbench.scenes.lens import PINHOLE_MODELS, check_camera, fit_to_image, pinhole_K
from gsworkbench.scenes.undistort import undistorted_view

Missing = Literal["skip", "error"]
MAX_CROP_FRACTION = 0.1


class MissingImagesWarning(UserWarning):
    """Frames listed by a dataset whose image files do not exist were skipped."""


@dataclass
class View:
    """One frame as a loader lists it. ``image``: the file (may not exist); ``name``: its path relative
    to the dataset folder; ``camera``: a ``pycolmap.Camera`` at its stated size, or a callable that
    builds it (given once the image is known to exist); ``where``: the file (and entry) the camera
    comes from, for errors; ``viewmat``: [4,4] float64 world-to-camera, OpenCV axes."""

    image: Path
    name: str
    camera: Any
    where: str
    viewmat: np.ndarray
    is_test: bool = False


def check_missing(missing: object) -> Missing:
    """``missing`` if it is "skip" or "error", else a ValueError."""
    if missing not in ("skip", "error"):
        raise ValueError(f"missing must be 'skip' or 'error', got {missing!r}")
    return missing  # type: ignore[return-value]


def drop_missing(views: Sequence[View], missing: Missing, listed_in: Path | str) -> list[View]:
    """The views whose image exists (rule 1); ``listed_in`` names the file that lists the frames."""
    gone = [v for v in views if not v.image.is_file()]
    if not gone:
        return list(views)
    first = gone[0].image
    if missing == "error" or len(gone) == len(views):
        raise FileNotFoundError(
            f"image file not found: {first} ({len(gone)} of the {len(views)} frames listed in {listed_in} "
            f"have no image file{'' if missing == 'error' else '; none is left'})"
        )
    warnings.warn(
        f"{len(gone)} of the {len(views)} frames listed in {listed_in} have no image file and are skipped "
        f"(the first: {first}); pass missing='error' to refuse such a dataset",
        MissingImagesWarning,
        stacklevel=3,
    )
    return [v for v in views if v.image.is_file()]


def use_downsampled_folder(
    views: Sequence[View], downsample: int, candidates: Callable[[View], Sequence[Path]], root: Path
) -> tuple[list[View], int]:
    """Rule 2: the views re-pointed at downsampled copies and a remaining box factor of 1 when every
    view has an existing candidate (the first that exists), else the views unchanged and ``downsample``."""
    if downsample == 1:
        return list(views), 1
    found = []
    for v in views:
        path = next((p for p in candidates(v) if p.is_file()), None)
        if path is None:
            return list(views), downsample
        found.append(replace(v, image=path, name=path.relative_to(root).as_posix()))
    return found, 1


def _crop_to_common(images: list[np.ndarray], Ks: np.ndarray, views: Sequence[View]) -> list[np.ndarray]:
    """Rule 5, in place on Ks [V,3,3]: the images cropped to the smallest width and height."""
    narrow = min(range(len(images)), key=lambda i: images[i].shape[1])
    low = min(range(len(images)), key=lambda i: images[i].shape[0])
    Hc, Wc = images[low].shape[0], images[narrow].shape[1]
    out = []
    for i, (im, v) in enumerate(zip(images, views)):
        H, W = im.shape[:2]
        for size, common, j, what in ((W, Wc, narrow, "wide"), (H, Hc, low, "high")):
            if size - common > MAX_CROP_FRACTION * size:
                raise ValueError(
                    f"image {views[j].image} is only {common} pixels {what} (after undistortion) but {v.image} is "
                    f"{size}: views differ in size by more than {MAX_CROP_FRACTION:.0%}, more than cropping to a "
                    "common size should take"
                )
        left, top = (W - Wc) // 2, (H - Hc) // 2
        out.append(im[top : top + Hc, left : left + Wc])
        Ks[i, 0, 2] -= left
        Ks[i, 1, 2] -= top
    return out


def assemble(
    views: Sequence[View],
    background: tuple[float, float, float],
    downsample: int,
    cache_dir: str | os.PathLike[str] | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """Rules 3-5 and compositing: images [V,h,w,3] float32 composited over ``background``, alphas
    [V,h,w,1] (None when no file had alpha) and Ks [V,3,3] float32, box-downsampled by ``downsample``
    (the right/bottom size mod d pixels are cropped, so K scales exactly by 1/d)."""
    if not views:
        raise ValueError("no images to load")
    images, Ks = [], []
    for v in views:
        W, H = image_size(v.image)
        cam = v.camera() if callable(v.camera) else v.camera
        check_camera(cam, v.where)
        cam = fit_to_image(cam, W, H, v.image, v.where)
        if cam.model_name in PINHOLE_MODELS:
            img, K = read_image(v.image), pinhole_K(cam)
        else:
            img, K = undistorted_view(v.image, cam, lambda p=v.image: read_image(p), cache_dir)
        images.append(img)
        Ks.append(K)
    Ks_np = np.stack(Ks)
    images = _crop_to_common(images, Ks_np, views)
    h, w = images[0].shape[:2]
    if w < downsample or h < downsample:
        raise ValueError(f"downsample {downsample} is larger than the image size {w}x{h} of {views[0].image}")
    bg = torch.tensor(background, dtype=torch.float32)
    any_alpha = any(im.shape[2] == 4 for im in images)
    rgbs, alphas = [], []
    for im in images:
        t = torch.from_numpy(np.ascontiguousarray(im))
        a = t[..., 3:] if t.shape[2] == 4 else torch.ones(h, w, 1)
        rgbs.append(t[..., :3] * a + bg * (1 - a))
        alphas.append(a)
    rgb, alpha = torch.stack(rgbs), torch.stack(alphas)
    Ks_t = torch.tensor(Ks_np, dtype=torch.float32)
    if downsample > 1:
        rgb, alpha = (box_pool(t, (downsample, downsample)) for t in (rgb, alpha))
        Ks_t[:, :2, :] /= downsample
    return rgb.clamp_(0, 1), (alpha if any_alpha else None), Ks_t
