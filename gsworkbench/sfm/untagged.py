"""Photos retried with their EXIF orientation tag ignored: the registration ladder's last strategy.

A wrong tag (an editor that turned the pixels upright and kept the tag, or wrote a mirroring one)
makes the prepared photo turned or mirrored. Turned, it still registers, as a rolled camera
(:func:`~gsworkbench.sfm.screening.turned_by_tag` names it). Mirrored (tags 2, 4, 5 and 7), its SIFT
descriptors match nothing and it stays out. So after the other strategies, each photo that carries a
tag other than 1 and is not in the best model is prepared again from its pixels as stored
(``<stem>.untagged<suffix>``, :func:`untagged_name`), with the camera of the best model's photos of its
size where there is one; its features are extracted and matched with the model's photos, and the best
model is continued with it (strategy ``untagged``, recorded like the others). The tagged copy's
verified pairs are dropped from the database, so that it cannot register beside its untagged twin.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gsworkbench.sfm.colmap_run import cancellable
from gsworkbench.sfm.photos import Photo, prepare_photo
from gsworkbench.sfm.registration import Mapping, attempt, best_model, describe, has_image, incremental

STRATEGY = "untagged"


def untagged_name(name: str) -> str:
    """The prepared name of a photo's copy with its EXIF orientation ignored: ``a/b.jpg`` -> ``a/b.untagged.jpg``."""
    p = Path(name)
    return p.with_name(f"{p.stem}.untagged{p.suffix}").as_posix()


def _shared_camera(model: Path, size: tuple[int, int]) -> int | None:
    """The id of the camera of ``size`` (W, H) that most registered photos of ``model`` use, or None."""
    import pycolmap

    rec = pycolmap.Reconstruction(str(model))
    uses: dict[int, int] = {}
    for im in rec.images.values():
        cam = rec.cameras[im.camera_id]
        if im.has_pose and (int(cam.width), int(cam.height)) == size:
            uses[im.camera_id] = uses.get(im.camera_id, 0) + 1
    return max(uses, key=lambda c: uses[c]) if uses else None


def _drop_verified_pairs(db: Path, name: str) -> None:
    """Deletes every verified pair of photo ``name`` from ``db`` (its features stay)."""
    import pycolmap

    with pycolmap.Database.open(str(db)) as d:
        image_id = d.read_image_with_name(name).image_id
        pair_ids, _ = d.read_two_view_geometries()
        for pair_id in pair_ids:
            a, b = (int(i) for i in pycolmap.pair_id_to_image_pair(int(pair_id)))
            if image_id in (a, b):
                d.delete_two_view_geometry(a, b)


def retry_untagged(
    m: Mapping, candidates: Sequence[Photo], max_size: int | None, inliers: tuple[int, int],
    log: Callable[[str], object],
) -> tuple[dict[str, Any] | None, dict[str, str]]:  # fmt: skip
    """Tries the ``candidates`` (photos with a turning or mirroring EXIF tag) that the best model under
    ``m.sparse`` lacks with their tag ignored (see the module docstring), continuing it with the
    (initial pair, registered image) inlier minimums ``inliers``. Returns the try's record (None
    when there was nothing to try) and, by original name, the untagged copy's name of each photo the
    best model holds afterwards."""
    import pycolmap

    best, names = best_model(m.sparse)
    done = {p.name: untagged_name(p.name) for p in candidates if untagged_name(p.name) in names}  # a resumed run
    todo = [p for p in candidates if p.name not in names and p.name not in done]
    if best is None or not todo:
        return None, done
    t = time.perf_counter()
    extraction = pycolmap.FeatureExtractionOptions()
    extraction.num_threads = m.num_threads
    copies = {}
    for p in todo:
        new = untagged_name(p.name)
        _, size = prepare_photo(p.source, m.photo_dir / new, max_size, orientation=False)
        with pycolmap.Database.open(str(m.db)) as d:
            extracted = has_image(d, new)  # by an interrupted run
        if not extracted:
            reader = pycolmap.ImageReaderOptions()
            camera = _shared_camera(best, size)
            if camera is not None:
                reader.existing_camera_id = camera
            else:
                reader.camera_model = "SIMPLE_RADIAL"
            cancellable(pycolmap.extract_features, str(m.db), str(m.photo_dir), image_names=[new],
                        camera_mode=pycolmap.CameraMode.SINGLE, reader_options=reader,
                        extraction_options=extraction, device=pycolmap.Device.cpu)  # fmt: skip
        _drop_verified_pairs(m.db, p.name)
        copies[p.name] = new
    listing = m.db.parent / "pairs_untagged.txt"
    listing.write_text("".join(f"{new} {other}\n" for new in copies.values() for other in sorted(names)))
    pairing = pycolmap.ImportedPairingOptions()
    pairing.match_list_path = listing
    matching = pycolmap.FeatureMatchingOptions()
    matching.num_threads = m.num_threads
    cancellable(pycolmap.match_image_pairs, str(m.db), matching_options=matching, pairing_options=pairing,
                device=pycolmap.Device.cpu)  # fmt: skip
    incremental(m, STRATEGY, inliers, input_model=best)
    record = attempt(m.sparse, STRATEGY, best, time.perf_counter() - t)
    log(describe(record, m.num_photos))
    now = best_model(m.sparse)[1]
    return record, {old: new for old, new in {**done, **copies}.items() if new in now}

