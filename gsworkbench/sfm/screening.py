"""Photos that would mislead the mapper, found before any feature is extracted, and photos that the
mapper put apart from the rest.

- **Duplicates**: the same picture twice (a copied file, or the same shot saved again): the same
  pixels at thumbnail size. Two identical views give the mapper a pair with no baseline; the first by
  name is kept, each other one is left out and named with the photo it repeats.
- **Panoramas** (and other strips): an aspect ratio of :data:`PANORAMA_ASPECT` or more, among photos
  that are not. A stitched panorama is not one pinhole view; it is left out and named.
- **Another scene**: after mapping, a second model of :data:`SEPARATE_MODEL_MIN` photos or more that
  shares none with the kept one: a folder mixing two scenes, or a part of one that no photo links.
  Its photos are named in the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from gsworkbench.sfm.photos import Photo

THUMB = 24  # thumbnail side (pixels) on which duplicates are compared
DUPLICATE_DIFF = 1.5 / 255  # mean absolute difference of two thumbnails (in [0, 1]) under which they repeat
PANORAMA_ASPECT = 2.5  # long side over short side from which a photo counts as a panorama
SEPARATE_MODEL_MIN = 3


def thumbnail(path: Path) -> np.ndarray:
    """A photo as a THUMB x THUMB grey image in [0, 1] (float32), for comparing pictures."""
    from PIL import Image

    with Image.open(path) as im:
        return np.asarray(im.convert("L").resize((THUMB, THUMB), Image.Resampling.BOX), dtype=np.float32) / 255.0


def duplicates(photos: Sequence[Photo], photo_dir: Path) -> dict[str, str]:
    """Photo name -> the earlier photo (by name) it repeats: the same size and thumbnails within
    :data:`DUPLICATE_DIFF`."""
    seen: list[tuple[Photo, np.ndarray]] = []
    out: dict[str, str] = {}
    for p in sorted(photos, key=lambda q: q.name):
        thumb = thumbnail(photo_dir / p.name)
        twin = next((q for q, t in seen if q.size == p.size and float(np.abs(t - thumb).mean()) < DUPLICATE_DIFF), None)
        if twin is None:
            seen.append((p, thumb))
        else:
            out[p.name] = twin.name
    return out


def panoramas(photos: Sequence[Photo]) -> list[str]:
    """The photos whose long side is :data:`PANORAMA_ASPECT` times their short side or more, when most
    photos are not (a set of nothing but strips is left as it is)."""
    strips = [p.name for p in photos if max(p.size) >= PANORAMA_ASPECT * min(p.size)]
    return strips if len(strips) < len(photos) / 2 else []


def separate_models(sparse: Path, kept: Path) -> list[list[str]]:
    """The photo names of every other model under ``sparse`` with :data:`SEPARATE_MODEL_MIN` photos or
    more and none in common with the ``kept`` model's, largest first (the same photos found by two
    strategies count once)."""
    from gsworkbench.sfm.registration import registered_names

    keep = registered_names(kept)
    groups: list[set[str]] = []
    for d in sorted(p for p in sparse.iterdir() if p.is_dir() and not p.name.startswith(".") and p != kept):
        names = registered_names(d)
        if len(names) >= SEPARATE_MODEL_MIN and not names & keep and not any(names & g for g in groups):
            groups.append(names)
    return [sorted(g) for g in sorted(groups, key=len, reverse=True)]
