"""How :func:`~gsworkbench.sfm.pipeline.reconstruct` gets every photo registered: the camera each
photo gets, and the strategies it tries in turn when the first mapping leaves photos out.

Cameras (``camera="per_lens"``, the default): photos from one lens share a camera. A lens is the
photos' EXIF make, model and focal length where they carry them, and sizes within
:data:`SIZE_TOLERANCE` of each other are the same lens cropped differently (undistorted exports,
crops of a few pixels): those photos are centre-cropped to the group's smallest size so that COLMAP,
which needs one size per camera, can share the camera. Each camera's model follows its evidence
(``camera_model="auto"``): OPENCV's four distortion terms only where :data:`DISTORTION_MIN_PHOTOS`
photos or more constrain them, SIMPLE_RADIAL's one term below that. Fisheye photos
(:func:`exif_fisheye`: an EXIF lens model that says so, or a 35 mm equivalent focal length under
:data:`FISHEYE_35MM`, wider than rectilinear lenses go) are a lens of their own among normal photos,
with COLMAP's fisheye models: OPENCV_FISHEYE from :data:`DISTORTION_MIN_PHOTOS` photos, else
SIMPLE_RADIAL_FISHEYE (equidistant, one term). A pinhole model cannot bend to a fisheye's 110
degrees and more, and would drag the photos sharing it along.

Strategies (:data:`STRATEGIES`), each tried only while fewer than ``target_registered`` of the photos
are in the best model so far or that model is implausible, each mapping into its own folder. The best
model is the plausible one with the most registered photos; a model is implausible when the model
itself shows its poses are off (:func:`model_problems`): a camera whose fitted pixels are far from
square (a focal length in x and y that differ by over :data:`MAX_PIXEL_ASPECT`: real sensors' differ by
well under 1 %, and a lens fit that wandered there, as OPENCV's can on a dozen smeared frames, turns
every pose by degrees while the reprojection error stays low), or a mean reprojection error over
:data:`MAX_REPROJECTION_PX`. An implausible model is kept only when no plausible one registers more
than :data:`MIN_PLAUSIBLE` photos.

1. ``simpler_lens``: every camera with more than one distortion term becomes SIMPLE_RADIAL;
2. ``relaxed_inliers``: the mapper's inlier minimums lowered to :data:`RELAXED_INLIERS`;
3. ``leftovers``: the best model so far continued, with the relaxed minimums, so that the photos it
   left out can register against its points;
4. ``global``: COLMAP's global mapper (GLOMAP), which solves all rotations and positions at once
   instead of growing one model photo by photo.

After them the pipeline tries ``untagged`` (:mod:`gsworkbench.sfm.untagged`): photos with an EXIF
orientation tag still out of the best model, with the tag ignored.

Each try is recorded (strategy, photos registered, seconds, whether its model was kept, what makes
its best model implausible) in ``reconstruct.json`` and the report.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gsworkbench.sfm.colmap_run import cancellable
from gsworkbench.sfm.photos import Photo

SIZE_TOLERANCE = 0.02  # sizes within 2% (at least 8 px) in each dimension: one lens, cropped differently
SIZE_TOLERANCE_PX = 8
DISTORTION_MIN_PHOTOS = 10  # fewer photos than this get SIMPLE_RADIAL (one distortion term), not OPENCV (four)
RELAXED_INLIERS = (15, 10)  # the mapper's (initial pair, registered image) inlier minimums when relaxed
STRATEGIES = ("simpler_lens", "relaxed_inliers", "leftovers", "global")
MAX_PIXEL_ASPECT = 1.1  # fx / fy (or fy / fx) over which a camera's fit is implausible
MAX_REPROJECTION_PX = 2.0  # a model's mean reprojection error over which its poses are implausible
MIN_PLAUSIBLE = 2  # a plausible model of more photos than this beats any implausible one
MANY_PARAMETER_MODELS = ("OPENCV", "FULL_OPENCV", "RADIAL", "OPENCV_FISHEYE", "RADIAL_FISHEYE", "THIN_PRISM_FISHEYE")

FISHEYE_35MM = 12.0  # a 35 mm equivalent focal length (mm) under which a lens is a fisheye
FISHEYE_MODELS = ("OPENCV_FISHEYE", "RADIAL_FISHEYE", "SIMPLE_RADIAL_FISHEYE", "THIN_PRISM_FISHEYE", "FISHEYE",
                  "SIMPLE_FISHEYE", "RAD_TAN_THIN_PRISM_FISHEYE")  # fmt: skip

# EXIF tags: Make and Model (IFD0); FocalLength, FocalLengthIn35mmFilm and LensModel (the Exif IFD)
_MAKE, _MODEL, _EXIF_IFD, _FOCAL = 0x010F, 0x0110, 0x8769, 0x920A
_FOCAL_35MM, _LENS_MODEL = 0xA405, 0xA434


# ---- cameras ------------------------------------------------------------------------------------------


def exif_lens(path: Path) -> tuple[str, str, float] | None:
    """(make, model, focal length in mm) from a photo's EXIF, or None where it carries none of them."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            exif = im.getexif()
            focal = exif.get_ifd(_EXIF_IFD).get(_FOCAL)
    except (OSError, ValueError, SyntaxError):
        return None
    make, model = str(exif.get(_MAKE, "")).strip("\0 "), str(exif.get(_MODEL, "")).strip("\0 ")
    try:
        mm = round(float(focal), 2) if focal is not None else 0.0
    except (TypeError, ValueError, ZeroDivisionError):
        mm = 0.0
    return (make, model, mm) if (make or model or mm) else None


def exif_fisheye(path: Path) -> str | None:
    """Why a photo's EXIF says it is a fisheye photo (its lens model names one, or its 35 mm equivalent
    focal length is under :data:`FISHEYE_35MM`), or None."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            ifd = im.getexif().get_ifd(_EXIF_IFD)
    except (OSError, ValueError, SyntaxError):
        return None
    lens = str(ifd.get(_LENS_MODEL, "")).strip("\0 ")
    if "fisheye" in lens.lower() or "fish-eye" in lens.lower():
        return f"lens {lens!r}"
    try:
        mm35 = float(ifd.get(_FOCAL_35MM, 0) or 0)
    except (TypeError, ValueError, ZeroDivisionError):
        mm35 = 0.0
    return f"{mm35:g} mm (35 mm equivalent)" if 0 < mm35 < FISHEYE_35MM else None


def same_lens_size(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether two image sizes (W, H) are one lens cropped differently: each side within
    :data:`SIZE_TOLERANCE` (at least :data:`SIZE_TOLERANCE_PX` pixels) of the other's."""
    return all(abs(x - y) <= max(SIZE_TOLERANCE * max(x, y), SIZE_TOLERANCE_PX) for x, y in zip(a, b))


def lens_groups(photos: Sequence[Photo], lens_of: Callable[[Photo], Any] | None = None) -> list[list[Photo]]:
    """The photos grouped by lens: the same EXIF lens (:func:`exif_lens`; none counts as one lens) and
    sizes that :func:`same_lens_size` joins to the group's largest size. Groups in order of their first
    photo; photos in their given order. ``lens_of``: a photo's lens key (default: its source's EXIF lens
    and whether :func:`exif_fisheye` finds it a fisheye)."""
    key = lens_of or (lambda p: (exif_lens(p.source), exif_fisheye(p.source) is not None))
    by_lens: dict[Any, list[Photo]] = {}
    for p in photos:
        by_lens.setdefault(key(p), []).append(p)
    groups: list[list[Photo]] = []
    for members in by_lens.values():
        clusters: list[tuple[tuple[int, int], list[Photo]]] = []
        for p in sorted(members, key=lambda q: (-q.size[0] * q.size[1], q.name)):
            home = next((c for c in clusters if same_lens_size(c[0], p.size)), None)
            if home is None:
                clusters.append((p.size, [p]))
            else:
                home[1].append(p)
        groups += [c[1] for c in clusters]
    order = {p.name: i for i, p in enumerate(photos)}
    return sorted(([*sorted(g, key=lambda p: order[p.name])] for g in groups), key=lambda g: order[g[0].name])


def crop_to_common_size(photo_dir: Path, group: list[Photo]) -> list[Photo]:
    """Centre-crops each prepared photo of ``group`` (files under ``photo_dir``, replaced atomically) to
    the group's smallest width and height, so that the group can share one camera; returns the photos
    with their new sizes."""
    from PIL import Image

    w, h = min(p.size[0] for p in group), min(p.size[1] for p in group)
    out = []
    for p in group:
        if p.size != (w, h):
            path = photo_dir / p.name
            with Image.open(path) as im:
                exif = im.getexif()
                left, top = (p.size[0] - w) // 2, (p.size[1] - h) // 2
                cropped = im.crop((left, top, left + w, top + h))
                cropped.load()
            tmp = path.with_name(f".{path.name}.tmp{path.suffix}")
            if path.suffix.lower() == ".png":
                cropped.save(tmp)
            else:
                cropped.save(tmp, quality=95, exif=exif.tobytes())
            tmp.replace(path)
            p = replace(p, size=(w, h))
        out.append(p)
    return out


def camera_model_for(num_photos: int, requested: str, fisheye: bool = False) -> str:
    """The COLMAP camera model of a camera shared by ``num_photos`` photos: ``requested``, or for
    "auto" OPENCV where :data:`DISTORTION_MIN_PHOTOS` or more photos constrain its four distortion
    terms, else SIMPLE_RADIAL; for a ``fisheye`` lens their fisheye kin (OPENCV_FISHEYE,
    SIMPLE_RADIAL_FISHEYE)."""
    if requested != "auto":
        return requested
    many = num_photos >= DISTORTION_MIN_PHOTOS
    if fisheye:
        return "OPENCV_FISHEYE" if many else "SIMPLE_RADIAL_FISHEYE"
    return "OPENCV" if many else "SIMPLE_RADIAL"


# ---- mapping and the strategies -------------------------------------------------------------------------


@dataclass
class Mapping:
    """What every mapping run shares: COLMAP's database, the prepared photos, the folder that holds
    one subfolder per model (``<strategy>-<k>``), the photo count, threads and seed, and ``on_tick``
    (called from this thread while the mapper runs: a progress bar's refresh)."""

    db: Path
    photo_dir: Path
    sparse: Path
    num_photos: int
    num_threads: int = -1
    seed: int = 0
    on_tick: Callable[[], object] | None = None
    on_registered: Callable[[], object] | None = None


def _collect(tmp: Path, sparse: Path, label: str) -> None:
    """Moves the models a mapper wrote into ``tmp/<k>`` to ``sparse/<label>-<k>`` (a mapper that
    continued a model writes it into ``tmp`` itself: that is ``<label>-0``)."""
    if any((tmp / f"cameras.{ext}").is_file() for ext in ("bin", "txt")):
        dest = sparse / f"{label}-0"
        shutil.rmtree(dest, ignore_errors=True)
        tmp.replace(dest)
        return
    for model in sorted(p for p in tmp.iterdir() if p.is_dir()) if tmp.is_dir() else []:
        dest = sparse / f"{label}-{model.name}"
        shutil.rmtree(dest, ignore_errors=True)
        model.replace(dest)
    shutil.rmtree(tmp, ignore_errors=True)


def incremental(m: Mapping, label: str, inliers: tuple[int, int], input_model: Path | None = None) -> None:
    """COLMAP's incremental mapper with the (initial pair, registered image) inlier minimums, from
    scratch or continuing ``input_model``; its models go to ``m.sparse/<label>-<k>``."""
    import pycolmap

    options = pycolmap.IncrementalPipelineOptions()
    options.num_threads = m.num_threads
    options.random_seed = m.seed
    options.min_model_size = min(options.min_model_size, max(3, m.num_photos // 4))
    options.mapper.init_min_num_inliers, options.mapper.abs_pose_min_num_inliers = inliers
    tmp = m.sparse / f".{label}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    callbacks: dict[str, Any] = {}
    if m.on_registered is not None:
        callbacks = {"initial_image_pair_callback": m.on_registered, "next_image_callback": m.on_registered}
    cancellable(pycolmap.incremental_mapping, str(m.db), str(m.photo_dir), str(tmp), options,
                input_path=str(input_model) if input_model is not None else "", on_tick=m.on_tick,
                **callbacks)  # fmt: skip
    _collect(tmp, m.sparse, label)


def global_mapping(m: Mapping, label: str) -> None:
    """COLMAP's global mapper (GLOMAP); its models go to ``m.sparse/<label>-<k>``."""
    import pycolmap

    options = pycolmap.GlobalPipelineOptions()
    options.num_threads = m.num_threads
    options.random_seed = m.seed
    tmp = m.sparse / f".{label}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)

    def run(cancellation_token: Any = None) -> Any:  # takes no token: a Ctrl-C waits for its end
        return pycolmap.global_mapping(str(m.db), str(m.photo_dir), str(tmp), options)

    cancellable(run, on_tick=m.on_tick)
    _collect(tmp, m.sparse, label)


def has_image(d: Any, name: str) -> bool:
    """Whether the open ``pycolmap.Database`` ``d`` holds a photo named ``name`` (pycolmap answers a
    missing name with None, older versions with an error)."""
    try:
        return d.read_image_with_name(name) is not None
    except (ValueError, RuntimeError, IndexError):
        return False


def registered_names(model: Path) -> set[str]:
    """The names of the photos with a pose in a model folder (empty for an unreadable one)."""
    import pycolmap

    try:
        rec = pycolmap.Reconstruction(str(model))
    except (ValueError, RuntimeError):
        return set()
    return {im.name for im in rec.images.values() if im.has_pose}


def model_problems(rec: Any) -> list[str]:
    """What makes a ``pycolmap.Reconstruction``'s poses implausible, one short phrase each (empty: none
    seen): a camera used by a registered photo whose focal lengths in x and y differ by more than
    :data:`MAX_PIXEL_ASPECT`, and a mean reprojection error over :data:`MAX_REPROJECTION_PX` pixels."""
    problems = []
    used = {im.camera_id for im in rec.images.values() if im.has_pose}
    for cam_id in sorted(used):
        cam = rec.cameras[cam_id]
        fx, fy = float(cam.focal_length_x), float(cam.focal_length_y)
        if min(fx, fy) <= 0 or max(fx, fy) / min(fx, fy) > MAX_PIXEL_ASPECT:
            problems.append(f"camera {cam_id}'s pixels {max(fx, fy) / max(min(fx, fy), 1e-9):.2f}:1 "
                            f"(focal {fx:.0f} x {fy:.0f} px)")  # fmt: skip
    error = float(rec.compute_mean_reprojection_error()) if rec.num_points3D() else 0.0
    if error > MAX_REPROJECTION_PX:
        problems.append(f"mean reprojection error {error:.2f} px > {MAX_REPROJECTION_PX:g} px")
    return problems


def model_problems_at(model: Path) -> list[str]:
    """:func:`model_problems` of a model folder (an unreadable one: that it cannot be read)."""
    import pycolmap

    try:
        return model_problems(pycolmap.Reconstruction(str(model)))
    except (ValueError, RuntimeError):
        return ["unreadable"]


def best_model(sparse: Path) -> tuple[Path | None, set[str]]:
    """The best model folder under ``sparse`` and its photos' names; (None, empty) when there is none.
    Best: the most registered photos among the plausible models (:func:`model_problems`) holding more
    than :data:`MIN_PLAUSIBLE`, else among all; ties: the first by name."""
    import pycolmap

    models = sorted(p for p in sparse.iterdir() if p.is_dir() and not p.name.startswith(".")) if sparse.is_dir() else []
    ranked = []
    for d in models:
        try:
            rec = pycolmap.Reconstruction(str(d))
        except (ValueError, RuntimeError):
            continue
        names = {im.name for im in rec.images.values() if im.has_pose}
        if names:
            plausible = len(names) > MIN_PLAUSIBLE and not model_problems(rec)
            ranked.append(((plausible, len(names)), d, names))
    if not ranked:
        return None, set()
    top = max(key for key, _, _ in ranked)
    return next((d, names) for key, d, names in ranked if key == top)


def simplify_cameras(db: Path) -> dict[int, Any]:
    """Turns every camera in ``db`` with more than one distortion term into SIMPLE_RADIAL, a fisheye
    one into SIMPLE_RADIAL_FISHEYE (its focal length the mean of fx and fy, the same principal point,
    no distortion yet); returns the cameras as they were, by id (empty when none needed it)."""
    import pycolmap

    old = {}
    with pycolmap.Database.open(str(db)) as d:
        for cam in d.read_all_cameras():
            if cam.model.name in MANY_PARAMETER_MODELS:
                old[cam.camera_id] = cam
                f = 0.5 * (cam.focal_length_x + cam.focal_length_y)
                model = "SIMPLE_RADIAL_FISHEYE" if cam.model.name in FISHEYE_MODELS else "SIMPLE_RADIAL"
                new = pycolmap.Camera(model=model, width=cam.width, height=cam.height,
                                      params=[f, cam.principal_point_x, cam.principal_point_y, 0.0],
                                      camera_id=cam.camera_id)  # fmt: skip
                d.update_camera(new)
    return old


def restore_cameras(db: Path, cameras: dict[int, Any]) -> None:
    """Writes back cameras that :func:`simplify_cameras` replaced."""
    import pycolmap

    with pycolmap.Database.open(str(db)) as d:
        for cam in cameras.values():
            d.update_camera(cam)


def relaxed_minimums(inliers: tuple[int, int]) -> tuple[int, int]:
    """The (initial pair, registered image) inlier minimums ``inliers`` lowered to :data:`RELAXED_INLIERS`."""
    return min(inliers[0], RELAXED_INLIERS[0]), min(inliers[1], RELAXED_INLIERS[1])


def recover(m: Mapping, target: float, inliers: tuple[int, int], log: Callable[[str], object]) -> list[dict[str, Any]]:
    """Tries :data:`STRATEGIES` in turn while the best model under ``m.sparse`` holds fewer than
    ``target`` of the photos or is implausible; ``inliers``: the first mapping's minimums. Returns one
    record per try (:func:`attempt`): ``strategy``, ``registered`` (its largest model's photos),
    ``seconds``, ``kept`` (whether it holds the best model afterwards), ``problems`` (what makes its
    largest model implausible)."""
    attempts: list[dict[str, Any]] = []
    relaxed = relaxed_minimums(inliers)
    for strategy in STRATEGIES:
        best, names = best_model(m.sparse)
        if len(names) >= target * m.num_photos and not model_problems_at(best):
            break
        t = time.perf_counter()
        if strategy == "simpler_lens":
            old = simplify_cameras(m.db)
            if not old:
                continue  # every camera has one distortion term already
            incremental(m, strategy, inliers)
            if best_model(m.sparse)[0] == best:
                restore_cameras(m.db, old)  # no better: later tries keep the richer lens
        elif strategy == "relaxed_inliers":
            if relaxed == inliers:
                continue
            incremental(m, strategy, relaxed)
        elif strategy == "leftovers":
            if best is None:
                continue
            incremental(m, strategy, relaxed, input_model=best)
        else:
            global_mapping(m, strategy)
        attempts.append(attempt(m.sparse, strategy, best, time.perf_counter() - t))
        log(describe(attempts[-1], m.num_photos))
    return attempts


def attempt(sparse: Path, strategy: str, before: Path | None, seconds: float) -> dict[str, Any]:
    """The record of one try: its largest model's photos, the seconds, whether one of its models is
    now the best (it was not ``before``), and what makes its largest model implausible."""
    ran = sorted(d for d in sparse.iterdir() if d.is_dir() and d.name.startswith(f"{strategy}-"))
    largest = max(ran, key=lambda d: len(registered_names(d)), default=None)
    new_best, _ = best_model(sparse)
    kept = new_best is not None and new_best != before and new_best.name.startswith(f"{strategy}-")
    return {"strategy": strategy, "registered": len(registered_names(largest)) if largest else 0,
            "seconds": round(seconds, 2), "kept": kept,
            "problems": model_problems_at(largest) if largest else []}  # fmt: skip


def describe(record: dict[str, Any], num_photos: int) -> str:
    """One log line of a try's record."""
    problems = record.get("problems") or []
    return (
        f"{record['strategy']}: {record['registered']} of {num_photos} photos registered"
        + (f" (implausible: {'; '.join(problems)})" if problems else "")
        + (" (kept)" if record["kept"] else "")
    )


def why_unregistered(
    names: Sequence[str], unmatched: Sequence[str], tags: dict[str, int] | None = None
) -> dict[str, str]:
    """For each photo that never registered, why: "no matches" (no geometrically verified pair with any
    photo) or "matches but no pose" (it matched others, but no model could place it), and its EXIF
    orientation tag where ``tags`` (name -> tag) gives one other than 1 (a wrong tag turns a photo)."""
    lost = set(unmatched)
    tags = tags or {}
    return {
        n: ("no matches" if n in lost else "matches but no pose")
        + (f"; EXIF orientation {tags[n]}: is the tag wrong?" if tags.get(n, 1) != 1 else "")
        for n in names
    }
