"""``reconstruct``: photos to poses with pycolmap on the CPU, against the true poses: registration, errors, minutes.

Each case writes a photo set whose poses are known, runs :func:`gsworkbench.sfm.reconstruct` on the
photos alone (defaults: one camera per lens, OPENCV, exhaustive matching up to 25 photos, retrieval beyond) and
compares the recovered model with the truth (:mod:`gsworkbench.sfm.pose_accuracy`): images
registered, the median and largest rotation error (degrees) and camera-centre error (percent of the
cameras' extent) after a similarity alignment, the focal length's error (percent, against the mean of
the true focal lengths), the mean reprojection error and the point count; and the seconds of each
stage. Cases:

- ``capture``: the built-in capture scene's JPEG photos (the cluttered room rendered by Mitsuba through a
  distorted OPENCV lens whose focal length and k1 vary a little from photo to photo), 40 + 8 at 256x192;
- ``splats``: 50 photos of a textured splat scene (a cube on a floor, rendered by our rasterizer) at
  1280x800, about one megapixel: the size of a phone capture, for the time per stage.

Each case is one reconstruction (minutes): the runner times nothing, the row is the case's own report.
quick=True: the splat scene, 12 photos at 256x192.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from gsworkbench.bench.registry import Case, Prepared, register_suite


def capture_truth(width: int, height: int, n_train: int, n_test: int) -> tuple[Path, dict[str, np.ndarray], float]:
    """The capture scene's photo folder, its true poses by name and its mean true focal length (pixels)."""
    import pycolmap

    from gsworkbench.sfm.pose_accuracy import model_poses
    from gsworkbench.synthetic import generate_scene

    folder = generate_scene("capture", width=width, height=height, n_train=n_train, n_test=n_test)
    rec = pycolmap.Reconstruction(str(folder / "sparse" / "0"))
    focal = float(np.mean([np.mean([c.focal_length_x, c.focal_length_y]) for c in rec.cameras.values()]))
    present = {p.name for p in (folder / "images").iterdir()}
    truth = {n: m for n, m in model_poses(rec).items() if n in present}
    return folder / "images", truth, focal


def splat_truth(n: int, width: int, height: int, folder: Path) -> tuple[Path, dict[str, np.ndarray], float]:
    """Writes the splat scene's photos into ``folder``; the folder, true poses by name, true focal length."""
    from gsworkbench.studies.photo_set import true_focal, write_photos

    step = 150.0 / max(n - 1, 1)  # the photos span 150 degrees of an arc around the scene
    truth = write_photos(folder, n, width, height, step_deg=step, num_splats=200_000 if width > 512 else 60_000)
    return folder, truth, true_focal(width, height)


def accuracy_row(out: Path, truth: dict[str, np.ndarray], true_focal_px: float) -> dict[str, Any]:
    """The accuracy and time columns of a reconstructed folder ``out`` against ``truth``."""
    import pycolmap

    from gsworkbench.sfm.pose_accuracy import model_poses, pose_errors
    from gsworkbench.sfm.sfm_report import read_report

    report = read_report(out)
    rec = pycolmap.Reconstruction(str(out / "sparse" / "0"))
    errors = pose_errors(model_poses(rec), truth).summary()
    cam = report["cameras"][0]
    focal = float(np.mean(cam["focal_px"]))
    row = {
        "images": report["images_given"], "registered": report["images_registered"],
        **{k: round(v, 4) for k, v in errors.items() if k != "images_compared"},
        "focal_error_pct": round(100.0 * (focal - true_focal_px) / true_focal_px, 3),
        "reprojection_px": round(report["mean_reprojection_error_px"], 3), "points": report["num_points3D"],
        "cameras": report["num_cameras"],
    }  # fmt: skip
    for stage, s in report["seconds"].items():
        row[f"s_{stage}"] = s
    row["minutes_total"] = round(sum(report["seconds"].values()) / 60.0, 2)
    return row


def _setup(params: dict[str, Any]):  # noqa: ANN202 (a Case's setup)
    def setup() -> Prepared:
        from gsworkbench.sfm import reconstruct

        tmp = Path(tempfile.mkdtemp(prefix="gsw-bench-reconstruct-"))
        if params["photos"] == "capture":
            photos, truth, focal = capture_truth(params["width"], params["height"], params["n"] - 8, 8)
        else:
            photos, truth, focal = splat_truth(params["n"], params["width"], params["height"], tmp / "photos")
        extras: dict[str, Any] = {}

        def run() -> bool:
            try:
                out = reconstruct(photos, tmp / "scene", progress=False, log=None)
                extras.update(accuracy_row(out, truth, focal))
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            return True

        return Prepared(run, lambda: extras)

    return setup


def cases(quick: bool) -> list[Case]:
    grid = [("splats", 256, 192, 12)] if quick else [("capture", 256, 192, 48), ("splats", 1280, 800, 50)]
    out = []
    for photos, w, h, n in grid:
        params = {"photos": photos, "width": w, "height": h, "n": n}
        out.append(Case(f"reconstruct/{photos}/{w}x{h}/{n}", params, _setup(params), measured=True))
    return out


register_suite("reconstruct", __doc__.split("\n\n")[0])(cases)
