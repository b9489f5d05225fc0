"""Image files for the loaders: read (Pillow) with errors that name the file, composite, downsample."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".PNG", ".JPG", ".JPEG")


def check_downsample(downsample: object) -> int:
    """The downsample factor as a positive int, or a ValueError."""
    if isinstance(downsample, bool) or not isinstance(downsample, (int, np.integer)) or downsample < 1:
        raise ValueError(f"downsample must be a positive integer, got {downsample!r}")
    return int(downsample)


def check_folder_and_split(folder: Path, name: str, every: object) -> None:
    """The loaders' shared checks: ``every`` (the test-view stride ``name``) is a positive int or None,
    and ``folder`` exists; a ValueError or FileNotFoundError otherwise."""
    if every is not None and (not isinstance(every, int) or every < 1):
        raise ValueError(f"{name} must be a positive integer or None, got {every!r}")
    if not folder.is_dir():
        raise FileNotFoundError(f"scene folder not found: {folder}")


def check_background(background: Sequence[float]) -> tuple[float, float, float]:
    """The background colour as three floats in [0,1], or a ValueError."""
    bg = tuple(float(c) for c in background)
    if len(bg) != 3 or not all(0.0 <= c <= 1.0 for c in bg):
        raise ValueError(f"background must be three values in [0,1], got {background!r}")
    return bg  # type: ignore[return-value]


def _bomb_message(path: Path, e: Exception) -> str:
    from PIL import Image

    return (
        f"image {path} is over Pillow's decompression-bomb limit ({e}); if the file is trusted, raise "
        f"PIL.Image.MAX_IMAGE_PIXELS (now {Image.MAX_IMAGE_PIXELS}) or load a downsampled copy (images_2, ...)"
    )


def image_size(path: str | os.PathLike[str]) -> tuple[int, int]:
    """(W, H) of an image file from its header (nothing decoded). FileNotFoundError for a missing file,
    ValueError naming the file for one Pillow cannot identify or one over its decompression-bomb limit."""
    from PIL import Image, UnidentifiedImageError

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"image file not found: {path}")
    try:
        with Image.open(path) as im:
            return int(im.size[0]), int(im.size[1])
    except Image.DecompressionBombError as e:
        raise ValueError(_bomb_message(path, e)) from e
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
        raise ValueError(f"cannot read image {path}: {e}") from e


def read_image(path: str | os.PathLike[str]) -> np.ndarray:
    """An image file as float32 [H,W,C] in [0,1], C = 3 (RGB) or 4 (RGBA, straight alpha).

    Raises FileNotFoundError for a missing file and ValueError naming the file for one Pillow cannot read
    or one over Pillow's decompression-bomb limit (``PIL.Image.MAX_IMAGE_PIXELS``, twice it is refused).
    """
    from PIL import Image, UnidentifiedImageError

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"image file not found: {path}")
    try:
        with Image.open(path) as im:
            im.load()
            has_alpha = im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info)
            if im.mode in ("I;16", "I;16B", "I"):  # 16-bit grey
                arr = np.asarray(im, dtype=np.float32) / 65535.0
                arr = np.repeat(arr[..., None], 3, axis=2)
            else:
                arr = np.asarray(im.convert("RGBA" if has_alpha else "RGB"), dtype=np.float32) / 255.0
    except Image.DecompressionBombError as e:
        raise ValueError(_bomb_message(path, e)) from e
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
        raise ValueError(f"cannot read image {path}: {e}") from e
    return np.ascontiguousarray(arr)


def find_image(folder: Path, rel: str) -> Path:
    """``folder / rel``, or that name with the first of the usual extensions that exists (NeRF-synthetic
    frames name files without one); ``folder / rel`` itself, missing, when none does."""
    base = folder / rel
    if base.is_file():
        return base
    for ext in IMAGE_EXTENSIONS:
        cand = base.with_name(base.name + ext)
        if cand.is_file():
            return cand
    return base


def box_pool(images: torch.Tensor, kernel: tuple[int, int]) -> torch.Tensor:
    """Box average of images [N,H,W,C] over ``kernel`` = (rows, columns) pixel blocks -> [N, H // rows,
    W // columns, C] (a partial last block is dropped, as ``avg_pool2d`` does). The loaders' downsample
    and the trainer's coarse-to-fine targets (gsworkbench/train/resolution.py) use it."""
    return F.avg_pool2d(images.permute(0, 3, 1, 2), kernel).permute(0, 2, 3, 1).contiguous()
