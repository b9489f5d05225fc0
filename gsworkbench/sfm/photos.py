"""A researcher's photos as reconstruction takes them: a folder of images or a video, made upright and
brought to a working size.

- :func:`list_photos`: the image files of a folder (JPEG/PNG, sorted by name, subfolders included);
- :func:`prepare_photos`: each one read with its EXIF orientation applied, scaled so that its long side
  is at most ``max_size`` pixels, and written as a JPEG (quality 95) or PNG into one folder, under its
  name relative to the source folder. The copies carry the source's EXIF (its orientation reset), so
  COLMAP still reads a focal length from it;
- videos (:mod:`gsworkbench.sfm.video`) become such a folder of their sharpest frames first.

A file that cannot be decoded is a ValueError naming it; a folder with no image a FileNotFoundError.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PHOTO_SUFFIXES = (".jpg", ".jpeg", ".png")
VIDEO_SUFFIXES = (".mp4", ".mov", ".m4v", ".avi", ".mkv", ".webm")
JPEG_QUALITY = 95
EXIF_ORIENTATION = 0x0112


@dataclass(frozen=True)
class Photo:
    """One prepared photo: ``name`` (its path relative to the prepared folder, POSIX), the source file,
    the source's upright size and the prepared size (W, H) in pixels."""

    name: str
    source: Path
    source_size: tuple[int, int]
    size: tuple[int, int]


def is_video(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a file with a video suffix."""
    p = Path(path)
    return p.is_file() and p.suffix.lower() in VIDEO_SUFFIXES


def list_photos(folder: str | os.PathLike[str]) -> list[Path]:
    """The JPEG and PNG files under ``folder`` (sorted by relative path); FileNotFoundError naming the
    folder when it is missing or holds none."""
    root = Path(folder)
    if not root.is_dir():
        raise FileNotFoundError(f"photo folder not found: {root}")
    found = sorted(
        (
            p
            for p in root.rglob("*")
            if p.is_file() and p.suffix.lower() in PHOTO_SUFFIXES and not p.name.startswith(".")
        ),
        key=lambda p: p.relative_to(root).as_posix(),
    )
    if not found:
        raise FileNotFoundError(f"no images (JPEG or PNG) in {root}")
    return found


def working_size(size: tuple[int, int], max_size: int | None) -> tuple[int, int]:
    """(W, H) scaled so that the long side is at most ``max_size`` (None: unchanged), rounded, >= 1."""
    W, H = size
    if max_size is None or max(W, H) <= max_size:
        return W, H
    s = max_size / max(W, H)
    return max(1, round(W * s)), max(1, round(H * s))


def exif_orientation(path: Path) -> int:
    """A photo's EXIF orientation tag (1 to 8; 1, upright, where it has none or cannot be read)."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            tag = im.getexif().get(EXIF_ORIENTATION, 1)
    except (OSError, ValueError, SyntaxError):
        return 1
    return int(tag) if isinstance(tag, int) and 1 <= tag <= 8 else 1


def prepare_photo(
    src: Path, dest: Path, max_size: int | None, orientation: bool = True
) -> tuple[tuple[int, int], tuple[int, int]]:
    """Writes ``src`` upright (EXIF orientation applied; ``orientation=False``: the pixels as stored) and
    at most ``max_size`` on its long side to ``dest`` (format by its suffix); returns (upright source
    size, written size). ValueError naming ``src`` when it cannot be decoded."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        with Image.open(src) as im:
            exif = im.getexif()
            upright = ImageOps.exif_transpose(im) if orientation else im.copy()
            upright.load()
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
        raise ValueError(f"cannot read photo {src}: {e}") from None
    size = upright.size
    out = upright.convert("RGB")
    target = working_size(size, max_size)
    if target != size:
        out = out.resize(target, Image.Resampling.LANCZOS)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp{dest.suffix}")
    if dest.suffix.lower() == ".png":
        out.save(tmp)
    else:
        if EXIF_ORIENTATION in exif:
            exif[EXIF_ORIENTATION] = 1
        out.save(tmp, quality=JPEG_QUALITY, exif=exif.tobytes())
    os.replace(tmp, dest)
    return (int(size[0]), int(size[1])), (int(target[0]), int(target[1]))


def prepare_photos(
    folder: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    max_size: int | None = 1600,
    on_photo: Callable[[], object] | None = None,
) -> list[Photo]:
    """Prepares every photo of ``folder`` into ``dest`` (see the module docstring); a photo already
    there is kept (a re-run after an interrupt redoes only what is missing). ``on_photo`` is called
    after each (a progress bar's update)."""
    root, out = Path(folder), Path(dest)
    photos = []
    for src in list_photos(root):
        rel = src.relative_to(root).as_posix()
        target = out / rel
        if target.is_file():
            from PIL import Image

            with Image.open(target) as im:
                size = (int(im.size[0]), int(im.size[1]))
            photos.append(Photo(rel, src, size, size))
        else:
            src_size, size = prepare_photo(src, target, max_size)
            photos.append(Photo(rel, src, src_size, size))
        if on_photo is not None:
            on_photo()
    return photos
