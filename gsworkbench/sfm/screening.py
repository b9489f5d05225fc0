"""Photos that would mislead the mapper, found before any feature is extracted, and photos that the
mapper put apart from the rest.

- **Duplicates**: the same picture twice (a copied file, or the same shot saved again): the same
  pixels at thumbnail size. Two identical views give the mapper a pair with no baseline; the first by
  name is kept, each other one is left out and named with the photo it repeats.
- **Panoramas** (and other strips): an aspect ratio of :data:`PANORAMA_ASPECT` or more, among photos
  that are not. A stitched panorama is not one pinhole view; it is left out and named.
- **A wrong EXIF orientation tag**: a photo whose pixels were already upright but whose tag says to
  turn them (an editor that rotated the pixels and kept the tag) is prepared turned. SIFT does not
  mind, so it registers, but as a camera rolled by the tag's turn against the others: after mapping,
  a photo with a tag other than 1 whose camera is rolled within :data:`TURN_TOLERANCE_DEG` of that
  turn from the others' mean "down" is named (the poses stay consistent with the turned image, so the
  scene still trains; the photo shows sideways and gets a camera of its own).
- **Another scene**: after mapping, a second model of :data:`SEPARATE_MODEL_MIN` photos or more that
  shares none with the kept one: a folder mixing two scenes, or a part of one that no photo links.
  Its photos are named in the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gsworkbench.sfm.photos import Photo

THUMB = 24  # thumbnail side (pixels) on which duplicates are compared
DUPLICATE_DIFF = 1.5 / 255  # mean absolute difference of two thumbnails (in [0, 1]) under which they repeat
PANORAMA_ASPECT = 2.5  # long side over short side from which a photo counts as a panorama
SEPARATE_MODEL_MIN = 3
TURN_TOLERANCE_DEG = 30.0  # a roll this close to an EXIF tag's turn counts as that turn
DOWN_AGREEMENT = 0.7  # the length of the cameras' mean unit "down" axis from which they agree on it
# EXIF orientation -> the turn (degrees) it applies: 1 upright, 2 mirrored; 3/4 half a turn; 5 to 8 a quarter
TAG_TURN_DEG = {1: 0.0, 2: 0.0, 3: 180.0, 4: 180.0, 5: 90.0, 6: 90.0, 7: 90.0, 8: 90.0}


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


def turned_by_tag(rec: Any, tags: dict[str, int]) -> dict[str, str]:
    """:func:`rolled_by_tag` of the registered photos of ``rec`` (a ``pycolmap.Reconstruction``)."""
    images = sorted((im for im in rec.images.values() if im.has_pose), key=lambda im: im.name)
    downs = {im.name: np.asarray(im.cam_from_world().rotation.matrix())[1] for im in images}  # camera y, world
    return rolled_by_tag(downs, tags)


def rolled_by_tag(downs: dict[str, np.ndarray], tags: dict[str, int]) -> dict[str, str]:
    """The photos whose EXIF orientation tag (``tags``: name -> tag, 1 where absent) turned them and
    whose camera's "down" axis (``downs``: name -> the camera's y axis in world coordinates [3]) is
    rolled by that turn, within :data:`TURN_TOLERANCE_DEG`, from the mean of the other cameras':
    name -> a short phrase (tag, roll in degrees). Only where the others agree on "down" (their mean
    unit axis at least :data:`DOWN_AGREEMENT` long: not a capture looking straight down, whose photos
    may be held any way round) and there are three or more."""
    names = sorted(downs)
    if len(names) < 3:
        return {}
    down = np.array([downs[n] / np.linalg.norm(downs[n]) for n in names])
    out = {}
    for k, name in enumerate(names):
        turn = TAG_TURN_DEG.get(tags.get(name, 1), 0.0)
        if turn == 0.0:
            continue
        others = np.delete(down, k, axis=0).mean(0)
        if np.linalg.norm(others) < DOWN_AGREEMENT:
            continue
        roll = float(np.degrees(np.arccos(np.clip(down[k] @ others / np.linalg.norm(others), -1.0, 1.0))))
        if abs(roll - turn) <= TURN_TOLERANCE_DEG:
            out[name] = f"EXIF orientation {tags[name]} turns it {turn:.0f} deg; it registered rolled {roll:.0f} deg"
    return out
