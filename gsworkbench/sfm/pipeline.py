"""Photos (or a video) to a posed scene on the CPU with pycolmap: :func:`reconstruct`.

The stages, each with a progress bar and a time in the report:

1. **photos**: a folder's JPEG/PNG files made upright (EXIF orientation) and scaled to a working size
   (:mod:`gsworkbench.sfm.photos`); a video's sharpest frames first (:mod:`gsworkbench.sfm.video`);
2. **features**: SIFT on the CPU. Cameras: one per lens (``camera="per_lens"``, the default: the EXIF
   lens, sizes within a few pixels cropped to one; :mod:`gsworkbench.sfm.registration`), one per
   image size (``"per_size"``: COLMAP refuses one camera over images of different sizes), one for all
   (``"single"``) or one per image (``"per_image"``), with a distortion model chosen by the photos
   that constrain it (``camera_model="auto"``: OPENCV, the 3DGS repository's ``convert.py`` choice,
   for a camera of many photos; SIMPLE_RADIAL for a few; their fisheye kin for photos whose EXIF says
   fisheye) or given;
3. **matching**: exhaustive for up to ``exhaustive_max`` images; beyond, retrieval: each photo with its
   ``retrieval_k`` most similar photos by a vocabulary tree built from the set's own SIFT descriptors
   (:mod:`gsworkbench.sfm.retrieval`) and its ``retrieval_sequential`` successors in name order; a
   video's frames with their sequential neighbours (``overlap``, quadratic) and the retrieval pairs for
   loop closure. Each pair geometrically verified;
4. **mapping**: COLMAP's incremental mapper; while fewer than ``target_registered`` of the photos are
   in its largest model, the strategies of :mod:`gsworkbench.sfm.registration` in turn (a simpler
   lens, relaxed inlier minimums, the leftovers against the best model, the global mapper), then the
   photos with an EXIF orientation tag still out retried without it (:mod:`gsworkbench.sfm.untagged`);
   the plausible model (square pixels, a low reprojection error) with the most registered photos is
   kept;
5. **undistort**: images resampled to pinholes, in COLMAP's undistorted layout.

The output folder holds ``images/`` and ``sparse/0/`` (PINHOLE cameras, the poses, the sparse points),
which :func:`gsworkbench.scenes.load_scene` reads as it is, ``report.json`` (:mod:`gsworkbench.sfm.sfm_report`),
``reconstruct.json`` (the options, pycolmap's version, the stages done and their seconds) and ``work/``
(the prepared photos, COLMAP's database and the mapper's models). A stage that finished is not redone:
Ctrl-C keeps the database, and running the same command again goes on from there.

COLMAP's default thresholds assume thousands of features per image. For small images (fewer than
:data:`FEW_FEATURES` per image on the median) the mapper's inlier thresholds are lowered
(``min_inliers="auto"``), as a real capture at a few hundred pixels needs.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from gsworkbench.core.atomic import write_json
from gsworkbench.sfm.colmap_run import Cancelled, cancellable, colmap_log_level
from gsworkbench.sfm.photos import VIDEO_SUFFIXES, Photo, exif_orientation, is_video, list_photos, prepare_photos
from gsworkbench.sfm.registration import (
    Mapping,
    attempt,
    best_model,
    camera_model_for,
    crop_to_common_size,
    exif_fisheye,
    has_image,
    incremental,
    lens_groups,
    model_problems,
    recover,
    relaxed_minimums,
    why_unregistered,
)
from gsworkbench.sfm.retrieval import (
    TooFewDescriptors,
    build_vocab_tree,
    most_similar,
    neighbour_pairs,
    retrieval_pairs,
)
from gsworkbench.sfm.screening import PANORAMA_ASPECT, duplicates, panoramas, separate_models, turned_by_tag
from gsworkbench.sfm.sfm_report import format_report, sfm_report
from gsworkbench.sfm.untagged import retry_untagged
from gsworkbench.sfm.video import extract_frames

CAMERA_MODES = ("per_lens", "per_size", "single", "per_image")
CAMERA_MODELS = ("auto", "OPENCV", "SIMPLE_RADIAL", "RADIAL", "PINHOLE", "SIMPLE_PINHOLE", "OPENCV_FISHEYE",
                 "SIMPLE_RADIAL_FISHEYE")
MATCHERS = ("auto", "exhaustive", "sequential", "retrieval")
STATE = "reconstruct.json"
REPORT = "report.json"
FEW_FEATURES = 2000  # median keypoints per image under which the mapper's thresholds are lowered
SMALL_INIT_INLIERS = 30  # COLMAP's defaults: 100 for the initial pair
SMALL_ABS_POSE_INLIERS = 15  # and 30 for each registered image
CHUNK = 8  # images per extraction call (the bar advances by this)
MATCH_BLOCK = 64  # photo pairs per matching call
EXHAUSTIVE_MAX = 25  # "auto" matches more photos than this by retrieval (docs/capture.md has the measurements)
LOG_LEVEL = 2  # COLMAP's own log: errors only (the bars and the report say what happened)


class ReconstructionFailed(ValueError):  # noqa: N818 (a ValueError: the CLI prints it as one line)
    """A photo set did not reconstruct; ``str()`` is one line naming the cause."""


@dataclass(frozen=True)
class ReconstructOptions:
    """What :func:`reconstruct` does (every field is recorded in ``reconstruct.json``).

    camera: "per_lens" | "per_size" | "single" | "per_image" (see the module docstring). camera_model:
    "auto" (by the photos per camera) or COLMAP's name.
    max_size: the long side of the working images in pixels (None: as given). matcher: "auto" |
    "exhaustive" | "sequential" | "retrieval"; exhaustive_max: the most images "auto" matches
    exhaustively (a video's frames never); overlap: sequential neighbours; retrieval_k: the most similar
    photos each photo is matched with by retrieval; retrieval_sequential: its successors in name order
    matched too. video_frames: frames kept of a video at most. min_images: fewer photos are refused;
    min_registered: the share of them that must register; target_registered: the share under which the
    recovery strategies are tried. min_inliers: "auto", or the mapper's inlier minimum for the initial
    pair (a registered image needs half of it). num_threads: -1 for all cores. seed: the mapper's random
    seed (and the vocabulary tree's descriptor sample).
    """

    camera: str = "per_lens"
    camera_model: str = "auto"
    max_size: int | None = 1600
    matcher: str = "auto"
    exhaustive_max: int = EXHAUSTIVE_MAX
    overlap: int = 10
    retrieval_k: int = 10
    retrieval_sequential: int = 2
    video_frames: int = 100
    min_images: int = 3
    min_registered: float = 0.5
    target_registered: float = 0.95
    min_inliers: int | str = "auto"
    num_threads: int = -1
    seed: int = 0

    def __post_init__(self) -> None:
        if self.camera not in CAMERA_MODES:
            raise ValueError(f"camera must be one of {CAMERA_MODES}, got {self.camera!r}")
        if self.camera_model not in CAMERA_MODELS:
            raise ValueError(f"camera_model must be one of {CAMERA_MODELS}, got {self.camera_model!r}")
        if self.matcher not in MATCHERS:
            raise ValueError(f"matcher must be one of {MATCHERS}, got {self.matcher!r}")
        if self.max_size is not None and (not isinstance(self.max_size, int) or self.max_size < 32):
            raise ValueError(f"max_size must be an int >= 32 or None, got {self.max_size!r}")
        for name, lo in (
            ("exhaustive_max", 2),
            ("overlap", 1),
            ("retrieval_k", 1),
            ("retrieval_sequential", 0),
            ("video_frames", 2),
            ("min_images", 2),
        ):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
        for name in ("min_registered", "target_registered"):
            if not 0.0 < float(getattr(self, name)) <= 1.0:
                raise ValueError(f"{name} must be in (0, 1], got {getattr(self, name)!r}")
        if self.min_inliers != "auto" and (not isinstance(self.min_inliers, int) or self.min_inliers < 8):
            raise ValueError(f"min_inliers must be 'auto' or an int >= 8, got {self.min_inliers!r}")


def _bar(total: int | None, desc: str, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="", disable=not enabled, leave=True, dynamic_ncols=True)


class _State:
    """``reconstruct.json``: the options, the input, pycolmap's version and the finished stages."""

    def __init__(self, out: Path, options: ReconstructOptions, source: Path) -> None:
        import pycolmap

        self.path = out / STATE
        self.data: dict[str, Any] = {
            "source": str(source), "options": asdict(options), "pycolmap": pycolmap.__version__,
            "stages": {}, "notes": {},
        }  # fmt: skip
        if self.path.is_file():
            old = json.loads(self.path.read_text())
            same = {k: old.get(k) for k in ("source", "options")} == {k: self.data[k] for k in ("source", "options")}
            if not same:
                diff = [k for k, v in asdict(options).items() if old.get("options", {}).get(k) != v]
                if old.get("source") != str(source):
                    diff.insert(0, "source")
                raise ValueError(
                    f"{out} holds a reconstruction of other input or options ({', '.join(diff)} differ); "
                    "choose another --out or pass overwrite=True (--overwrite)"
                )
            self.data["stages"] = old.get("stages", {})
            self.data["notes"] = old.get("notes", {})

    def done(self, stage: str) -> bool:
        return stage in self.data["stages"]

    def finish(self, stage: str, seconds: float, **notes: Any) -> None:
        self.data["stages"][stage] = round(seconds, 3)
        self.data["notes"].update(notes)
        self.save()

    def save(self) -> None:
        write_json(self.path, self.data)


def _options(**kw: Any) -> ReconstructOptions:
    known = {f.name for f in fields(ReconstructOptions)}
    unknown = sorted(set(kw) - known)
    if unknown:
        raise ValueError(f"unknown reconstruct option(s): {', '.join(unknown)}; options: {', '.join(sorted(known))}")
    return ReconstructOptions(**kw)


def reconstruct(
    photos: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    progress: bool = True,
    overwrite: bool = False,
    log: Callable[[str], object] | None = print,
    **options: Any,
) -> Path:
    """Reconstructs ``photos`` (a folder of images or a video file) into the scene folder ``out`` and
    returns it (see the module docstring; ``options``: the fields of :class:`ReconstructOptions`).
    ``log`` receives the report's table and notes (None: silent). Raises :class:`ReconstructionFailed`
    with one line when the set does not reconstruct, FileNotFoundError / ValueError naming the file for
    missing or unreadable input, and :class:`~gsworkbench.sfm.colmap_run.Cancelled` after Ctrl-C."""
    opts = _options(**options)
    out = Path(out).resolve()
    with colmap_log_level(LOG_LEVEL):
        try:
            return _reconstruct(Path(photos).resolve(), out, opts, progress, overwrite, log)
        except Cancelled as e:
            raise Cancelled(
                f"reconstruct interrupted ({e}); the finished stages and COLMAP's database are kept in {out / 'work'}: "
                "run the same command again to go on from there"
            ) from None


def _reconstruct(
    source: Path, out: Path, opts: ReconstructOptions, progress: bool, overwrite: bool,
    log: Callable[[str], object] | None,
) -> Path:  # fmt: skip
    if not source.exists():
        raise FileNotFoundError(f"photos not found: {source} (give a folder of images or a video file)")
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a folder")
    if overwrite and out.exists():
        shutil.rmtree(out)
    work = out / "work"
    try:  # a read-only disk or a folder without permission: one line before anything runs
        work.mkdir(parents=True, exist_ok=True)
        (work / ".writable").write_bytes(b"")
        (work / ".writable").unlink()
    except OSError as e:
        why = e.strerror or e
        raise ValueError(f"{out}: cannot write the reconstruction there ({why}); choose another --out") from None
    state = _State(out, opts, source)
    state.save()
    say = log or (lambda _s: None)

    # 1. photos
    t = time.perf_counter()
    photo_dir = work / "photos"
    notes: dict[str, Any] = {}
    if is_video(source):
        frames_dir = work / "frames"
        if not state.done("photos"):
            shutil.rmtree(frames_dir, ignore_errors=True)
            frames = extract_frames(source, frames_dir, opts.video_frames)
            notes["video"] = {"decoded": frames.decoded, "kept": len(frames.names), "blurry": len(frames.blurry),
                              "motion_blurred": len(frames.smeared)}  # fmt: skip
            say(f"video {source.name}: {frames.summary()}")
            warning = frames.warning(source.name)
            if warning:
                notes["video"]["warning"] = warning
                say(warning)
        prep_src = frames_dir
    elif source.is_dir():
        prep_src = source
    else:
        raise ValueError(f"{source} is neither a folder of images nor a video ({', '.join(VIDEO_SUFFIXES)})")
    n_given = len(list_photos(prep_src))
    if n_given < opts.min_images:
        raise ReconstructionFailed(
            f"only {n_given} image(s) in {prep_src}; reconstruction needs at least {opts.min_images}"
        )
    with _bar(n_given, "photos", progress) as bar:
        prepared = prepare_photos(prep_src, photo_dir, opts.max_size, on_photo=lambda: bar.update(1))
    left_out = {"duplicates": duplicates(prepared, photo_dir), "panoramas": panoramas(prepared)}
    if left_out["duplicates"]:
        say("left out as duplicates: " + ", ".join(f"{a} (= {b})" for a, b in left_out["duplicates"].items()))
    if left_out["panoramas"]:
        say(f"left out as panoramas (aspect >= {PANORAMA_ASPECT}:1): " + ", ".join(left_out["panoramas"]))
    prepared = [p for p in prepared if p.name not in left_out["duplicates"] and p.name not in left_out["panoramas"]]
    if len(prepared) < opts.min_images:
        raise ReconstructionFailed(f"only {len(prepared)} usable photo(s) in {prep_src} once duplicates and panoramas "
                                   f"are left out; reconstruction needs at least {opts.min_images}")  # fmt: skip
    fisheye = {p.name: why for p in prepared if (why := exif_fisheye(p.source))}
    if fisheye and len(fisheye) < len(prepared):
        say(f"fisheye photos ({', '.join(sorted(set(fisheye.values())))}), given a fisheye camera of their own: "
            + ", ".join(fisheye))  # fmt: skip
    if opts.camera == "per_lens":  # a lens's photos cropped to one size, so that they share a camera
        cropped = {p.name: p for g in lens_groups(prepared) for p in crop_to_common_size(photo_dir, g)}
        prepared = [cropped[p.name] for p in prepared]
    if not state.done("photos"):
        sizes = sorted({p.size for p in prepared})
        state.finish(
            "photos", time.perf_counter() - t, num_photos=len(prepared), sizes=[list(s) for s in sizes], **notes
        )

    db = work / "database.db"
    # 2. features
    if not state.done("features"):
        t = time.perf_counter()
        cams = _extract(db, photo_dir, prepared, opts, progress, set(fisheye))
        state.finish("features", time.perf_counter() - t, cameras=cams)
    # 3. matching
    if not state.done("matching"):
        t = time.perf_counter()
        matching = _match(db, [p.name for p in prepared], opts, progress, video=is_video(source))
        state.finish("matching", time.perf_counter() - t, **matching)
    unmatched = _unmatched(db)
    if len(unmatched) == len(prepared):
        raise ReconstructionFailed(f"no two images of {prep_src} match: nothing to reconstruct from")
    # 4. mapping
    sparse = work / "sparse"
    tags = {p.name: exif_orientation(p.source) for p in prepared}
    if not state.done("mapping"):
        t = time.perf_counter()
        tagged = [p for p in prepared if tags[p.name] != 1]
        thresholds, attempts, untagged = _map(db, photo_dir, sparse, opts, len(prepared), tagged, progress, say)
        state.finish("mapping", time.perf_counter() - t, mapper_thresholds=thresholds, attempts=attempts,
                     untagged=untagged)  # fmt: skip
    untagged = state.data["notes"].get("untagged", {})  # photo -> its copy without the EXIF tag, in the model
    import pycolmap

    best, registered = best_model(sparse)
    if best is None:
        raise ReconstructionFailed(
            f"the mapper found no initial pair of images in {photo_dir}: too few matches between any two photos "
            f"(tried: {', '.join(a['strategy'] for a in state.data['notes'].get('attempts', []))}; more overlap "
            "between photos, more texture, or larger images help)"
        )
    rec = pycolmap.Reconstruction(str(best))
    problems = model_problems(rec)
    if problems:
        say(f"the kept model of {prep_src} is implausible ({'; '.join(problems)}): no strategy found a better one, "
            "so its poses are likely off")  # fmt: skip
    twin_of = {new: old for old, new in untagged.items()}
    placed = {twin_of.get(n, n) for n in registered}  # the photos in the model, by their own names
    unmatched = [n for n in unmatched if n not in untagged]
    rate = len(placed) / len(prepared)
    if rate < opts.min_registered:
        why = why_unregistered(sorted({p.name for p in prepared} - placed), unmatched, tags)
        named = "; ".join(f"{n} ({r})" for n, r in list(why.items())[:6]) + (" ..." if len(why) > 6 else "")
        attempts = state.data["notes"].get("attempts", [])
        tried = ", ".join(a["strategy"] for a in attempts)
        larger = max((a for a in attempts if a.get("problems") and a["registered"] > len(placed)),
                     key=lambda a: a["registered"], default=None)  # fmt: skip
        passed_over = (
            f" ({larger['strategy']} placed {larger['registered']}, implausibly: {'; '.join(larger['problems'])})"
            if larger else ""
        )  # fmt: skip
        raise ReconstructionFailed(
            f"only {len(placed)} of {len(prepared)} images registered ({rate:.0%} < {opts.min_registered:.0%}) "
            f"in {prep_src} after every strategy ({tried}){passed_over}; not registered: {named}"
        )
    # 5. undistort
    if not state.done("undistort"):
        t = time.perf_counter()
        _undistort(out, best, photo_dir, sorted(registered), progress)
        state.finish("undistort", time.perf_counter() - t)
    report = sfm_report(rec, len(prepared), state.data["stages"], unmatched=unmatched, cameras=state.data["notes"])
    report["attempts"] = state.data["notes"].get("attempts", [])
    report["model_problems"] = problems
    report["not_registered"] = why_unregistered(sorted({p.name for p in prepared} - placed), unmatched, tags)
    report["untagged"] = untagged
    for name, twin in untagged.items():
        say(f"photo {name} registered only with its EXIF orientation tag ({tags[name]}) ignored, as {twin}: "
            "its tag is likely wrong")  # fmt: skip
    report["left_out"] = left_out
    report["fisheye"] = fisheye
    report["turned_by_exif"] = turned_by_tag(rec, tags)
    for name, how in report["turned_by_exif"].items():
        say(f"photo {name}: {how}: its tag is likely wrong (the pixels were upright already); "
            "remove the tag and run again")  # fmt: skip
    report["separate_models"] = separate_models(sparse, best)
    write_json(out / REPORT, report)
    say(format_report(report))
    return out


def _groups(prepared: list[Photo], camera: str) -> list[list[Photo]]:
    """The photos that share a camera: by lens (then by size: a lens's sizes were cropped to one), by
    size, all together or one each."""
    if camera == "per_lens":
        return [g for lens in lens_groups(prepared) for g in _groups(lens, "per_size")]
    if camera == "per_image":
        return [[p] for p in prepared]
    if camera == "single":
        sizes = {p.size for p in prepared}
        if len(sizes) > 1:
            raise ValueError(
                f"camera='single' needs photos of one size, but they come in {len(sizes)} sizes "
                f"({', '.join(f'{w}x{h}' for w, h in sorted(sizes)[:4])}); use camera='per_size' or 'per_image'"
            )
        return [list(prepared)]
    by_size: dict[tuple[int, int], list[Photo]] = {}
    for p in prepared:
        by_size.setdefault(p.size, []).append(p)
    return list(by_size.values())


def _extract(
    db: Path, photo_dir: Path, prepared: list[Photo], opts: ReconstructOptions, progress: bool, fisheye: set[str]
) -> dict:
    """SIFT features of every prepared photo into ``db``, one camera per group (a fisheye model for a
    group of ``fisheye`` photos alone); returns the camera note."""
    import pycolmap

    groups = _groups(prepared, opts.camera)
    extraction = pycolmap.FeatureExtractionOptions()
    extraction.num_threads = opts.num_threads
    extraction.max_image_size = -1 if opts.max_size is None else max(opts.max_size, max(max(p.size) for p in prepared))
    with pycolmap.Database.open(str(db)) as d:  # photos already extracted by an interrupted run
        have = {im.name for im in d.read_all_images() if d.exists_keypoints(im.image_id)}
    models = []
    with _bar(len(prepared), "features (images)", progress) as bar:
        bar.update(sum(p.name in have for p in prepared))
        for group in groups:
            model = camera_model_for(len(group), opts.camera_model, fisheye=all(p.name in fisheye for p in group))
            models.append(model)
            todo = [p.name for p in group if p.name not in have]
            if not todo:
                continue
            reader = pycolmap.ImageReaderOptions()
            reader.camera_model = model
            mode = pycolmap.CameraMode.PER_IMAGE if opts.camera == "per_image" else pycolmap.CameraMode.SINGLE
            first, rest = todo[:1], todo[1:]
            cancellable(pycolmap.extract_features, str(db), str(photo_dir), image_names=first, camera_mode=mode,
                        reader_options=reader, extraction_options=extraction, device=pycolmap.Device.cpu)  # fmt: skip
            bar.update(1)
            if opts.camera != "per_image":  # the group's later chunks share the first photo's camera
                with pycolmap.Database.open(str(db)) as d:
                    reader.existing_camera_id = d.read_image_with_name(first[0]).camera_id
            for k in range(0, len(rest), CHUNK):
                chunk = rest[k : k + CHUNK]
                cancellable(pycolmap.extract_features, str(db), str(photo_dir), image_names=chunk, camera_mode=mode,
                            reader_options=reader, extraction_options=extraction,
                            device=pycolmap.Device.cpu)  # fmt: skip
                bar.update(len(chunk))
    with pycolmap.Database.open(str(db)) as d:
        missing = [p.name for p in prepared if not has_image(d, p.name)]
        n_cams = d.num_cameras()
    if missing:
        raise ValueError(f"COLMAP could not read {len(missing)} photo(s), e.g. {photo_dir / missing[0]}")
    return {"camera_mode": opts.camera, "camera_model": opts.camera_model, "num_cameras": n_cams,
            "camera_models": sorted(set(models))}  # fmt: skip


def match_pairs(names: list[str], kind: str, overlap: int) -> list[tuple[str, str]]:
    """The photo pairs to match: every pair (``"exhaustive"``), or each photo in name order with its
    ``overlap`` successors and those 2^k ahead for k < ``overlap`` (``"sequential"``, COLMAP's quadratic
    overlap)."""
    n = len(names)
    if kind == "exhaustive":
        return [(names[i], names[j]) for i in range(n) for j in range(i + 1, n)]
    pairs = set()
    for i in range(n):
        for k in range(1, overlap + 1):
            if i + k < n:
                pairs.add((i, i + k))
        for k in range(overlap):
            if i + 2**k < n:
                pairs.add((i, i + 2**k))
    return [(names[i], names[j]) for i, j in sorted(pairs)]


def _match(db: Path, names: list[str], opts: ReconstructOptions, progress: bool, video: bool) -> dict[str, Any]:
    """Matches the photos' features (see the module docstring) in blocks of :data:`MATCH_BLOCK` pairs
    (the bar advances by block: the database is never read while COLMAP writes it, since a second SQLite
    library in one process would break its locks); returns the notes: the matcher used, the pairs
    matched and, for retrieval, the vocabulary tree's size."""
    import pycolmap

    kind = opts.matcher
    if kind == "auto":
        kind = "retrieval" if (video or len(names) > opts.exhaustive_max) else "exhaustive"
    notes: dict[str, Any] = {}
    if kind == "retrieval":
        # a video's frames are in order: its sequential pairs, and retrieval closes the loops
        sequential = (
            match_pairs(sorted(names), "sequential", opts.overlap)
            if video
            else neighbour_pairs(names, opts.retrieval_sequential)
        )
        tree = db.parent / "vocab_tree.bin"
        try:
            with _bar(None, "matching (vocabulary tree)", progress):
                notes["vocab_tree"] = build_vocab_tree(db, tree, opts.seed)
                ranked = most_similar(db, tree, opts.retrieval_k)
        except TooFewDescriptors as e:  # a few tiny photos: matching them all costs less than a tree
            notes["retrieval_skipped"] = str(e)
            kind = "exhaustive"
        else:
            pairs = retrieval_pairs(sorted(names), ranked, opts.retrieval_k, sequential)
            kind = "sequential+retrieval" if video else "retrieval"
    if kind in ("exhaustive", "sequential"):
        pairs = match_pairs(sorted(names), kind, opts.overlap)
    matching = pycolmap.FeatureMatchingOptions()
    matching.num_threads = opts.num_threads
    listing = db.parent / "pairs.txt"
    with _bar(len(pairs), f"matching ({kind}, pairs)", progress) as bar:
        for k in range(0, len(pairs), MATCH_BLOCK):
            block = pairs[k : k + MATCH_BLOCK]
            listing.write_text("".join(f"{a} {b}\n" for a, b in block))
            pairing = pycolmap.ImportedPairingOptions()
            pairing.match_list_path = listing
            cancellable(pycolmap.match_image_pairs, str(db), matching_options=matching, pairing_options=pairing,
                        device=pycolmap.Device.cpu)  # fmt: skip
            bar.update(len(block))
    return {"matcher": kind, "pairs_matched": len(pairs), **notes}


def _unmatched(db: Path) -> list[str]:
    """The photos with no geometrically verified pair, by name."""
    import pycolmap

    with pycolmap.Database.open(str(db)) as d:
        images = {im.image_id: im.name for im in d.read_all_images()}
        pair_ids, geometries = d.read_two_view_geometries()
        seen: set[int] = set()
        for pair_id, g in zip(pair_ids, geometries):
            if len(g.inlier_matches) > 0:
                seen.update(int(i) for i in pycolmap.pair_id_to_image_pair(int(pair_id)))
    return sorted(name for i, name in images.items() if i not in seen)


def _median_keypoints(db: Path) -> float:
    import numpy as np
    import pycolmap

    with pycolmap.Database.open(str(db)) as d:
        counts = [d.num_keypoints_for_image(im.image_id) for im in d.read_all_images()]
    return float(np.median(counts)) if counts else 0.0


def _map(
    db: Path, photo_dir: Path, sparse: Path, opts: ReconstructOptions, n: int, tagged: list[Photo], progress: bool,
    say: Callable[[str], object],
) -> tuple[dict, list[dict], dict[str, str]]:  # fmt: skip
    """COLMAP's incremental mapper into ``sparse/incremental-<k>``, then the recovery strategies while
    fewer than ``opts.target_registered`` of the photos register, then the ``tagged`` photos (an EXIF
    orientation other than 1) still out retried with their tag ignored
    (:func:`~gsworkbench.sfm.untagged.retry_untagged`); returns the inlier minimums of the first
    mapping, the record of every try and the photos placed untagged (name -> the copy's name)."""
    import pycolmap

    shutil.rmtree(sparse, ignore_errors=True)
    sparse.mkdir(parents=True)
    defaults = pycolmap.IncrementalPipelineOptions().mapper
    if opts.min_inliers == "auto":
        small = _median_keypoints(db) < FEW_FEATURES
        init = SMALL_INIT_INLIERS if small else defaults.init_min_num_inliers
        absolute = SMALL_ABS_POSE_INLIERS if small else defaults.abs_pose_min_num_inliers
    else:
        init, absolute = int(opts.min_inliers), max(8, int(opts.min_inliers) // 2)
    with _bar(n, "mapping (images registered)", progress) as bar:
        count = {"n": 0}

        def registered() -> None:  # called from the mapper's thread: the bar is refreshed from ours
            count["n"] += 1

        def tick() -> None:
            if count["n"] > bar.n:
                bar.update(min(count["n"], n) - bar.n)

        m = Mapping(db, photo_dir, sparse, n, opts.num_threads, opts.seed, on_tick=tick, on_registered=registered)
        t = time.perf_counter()
        incremental(m, "incremental", (init, absolute))
        attempts = [attempt(sparse, "incremental", None, time.perf_counter() - t)]
        m.on_registered = None  # the bar shows the first mapping; the strategies report in the log
        attempts += recover(m, opts.target_registered, (init, absolute), say)
        record, untagged = retry_untagged(m, tagged, opts.max_size, relaxed_minimums((init, absolute)), say)
        attempts += [record] if record else []
        tick()
    return {"init_min_num_inliers": init, "abs_pose_min_num_inliers": absolute}, attempts, untagged


def _undistort(out: Path, model: Path, photo_dir: Path, names: list[str], progress: bool) -> None:
    """COLMAP's undistorter: ``out/images`` and ``out/sparse/0`` (PINHOLE), its scripts removed."""
    import pycolmap

    tmp = out / "work" / "undistorted"
    shutil.rmtree(tmp, ignore_errors=True)
    with _bar(len(names), "undistort (images)", progress) as bar:
        cancellable(pycolmap.undistort_images, str(tmp), str(model), str(photo_dir), image_names=names,
                    on_tick=lambda: bar.update(_count_files(tmp / "images") - bar.n))  # fmt: skip
        bar.update(len(names) - bar.n)
    for sub in ("images", "sparse"):
        shutil.rmtree(out / sub, ignore_errors=True)
    (out / "sparse").mkdir()
    os.replace(tmp / "images", out / "images")
    os.replace(tmp / "sparse", out / "sparse" / "0")
    shutil.rmtree(tmp, ignore_errors=True)


def _count_files(folder: Path) -> int:
    return sum(1 for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0


__all__ = ["Cancelled", "ReconstructOptions", "ReconstructionFailed", "reconstruct"]
