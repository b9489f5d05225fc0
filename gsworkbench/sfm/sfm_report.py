"""How good are a reconstruction's poses? The report :func:`~gsworkbench.sfm.pipeline.reconstruct`
writes (``report.json``), its table, and a figure of the cameras and the sparse points.

The report's fields: ``images_given``, ``images_registered``, ``registered_fraction``,
``mean_reprojection_error_px``, ``mean_track_length``, ``num_points3D``, ``cameras`` (per camera: its
model, size, focal length(s) in pixels, principal point and distortion parameters, and how many
registered images use it), ``unmatched`` (photos with no verified pair) and ``seconds`` per stage.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

# the parameter names of COLMAP's camera models, in their order (COLMAP's documentation)
PARAM_NAMES = {
    "SIMPLE_PINHOLE": ("f", "cx", "cy"),
    "PINHOLE": ("fx", "fy", "cx", "cy"),
    "SIMPLE_RADIAL": ("f", "cx", "cy", "k"),
    "RADIAL": ("f", "cx", "cy", "k1", "k2"),
    "OPENCV": ("fx", "fy", "cx", "cy", "k1", "k2", "p1", "p2"),
    "OPENCV_FISHEYE": ("fx", "fy", "cx", "cy", "k1", "k2", "k3", "k4"),
    "SIMPLE_RADIAL_FISHEYE": ("f", "cx", "cy", "k"),
    "RADIAL_FISHEYE": ("f", "cx", "cy", "k1", "k2"),
}


def camera_entry(cam: Any, num_images: int) -> dict[str, Any]:
    """One camera of a ``pycolmap.Reconstruction`` as the report lists it."""
    names = PARAM_NAMES.get(cam.model.name, tuple(f"p{i}" for i in range(len(cam.params))))
    params = {n: float(v) for n, v in zip(names, cam.params)}
    focal = [params[k] for k in ("f", "fx", "fy") if k in params]
    lens = {k: v for k, v in params.items() if k not in ("f", "fx", "fy", "cx", "cy")}
    return {
        "camera_id": int(cam.camera_id), "model": cam.model.name, "width": int(cam.width),
        "height": int(cam.height), "focal_px": focal, "principal_point_px": [params.get("cx"), params.get("cy")],
        "distortion": lens, "num_images": num_images,
    }  # fmt: skip


def sfm_report(
    rec: Any,
    images_given: int,
    seconds: Mapping[str, float],
    *,
    unmatched: Sequence[str] = (),
    cameras: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The report of the (distorted) model ``rec`` (a ``pycolmap.Reconstruction``) of ``images_given``
    photos; ``seconds`` per stage; ``cameras``: the reconstruction's notes (camera mode, matcher...)."""
    reg = [im for im in rec.images.values() if im.has_pose]
    per_cam: dict[int, int] = {}
    for im in reg:
        per_cam[im.camera_id] = per_cam.get(im.camera_id, 0) + 1
    cams = [camera_entry(rec.cameras[c], n) for c, n in sorted(per_cam.items())]
    notes = dict(cameras or {})
    return {
        "images_given": int(images_given),
        "images_registered": len(reg),
        "registered_fraction": len(reg) / max(images_given, 1),
        "mean_reprojection_error_px": float(rec.compute_mean_reprojection_error()),
        "mean_track_length": float(rec.compute_mean_track_length()) if rec.num_points3D() else 0.0,
        "num_points3D": int(rec.num_points3D()),
        "num_cameras": len(cams),
        "cameras": cams[:50],
        "camera_mode": notes.get("cameras", {}).get("camera_mode"),
        "matcher": notes.get("matcher"),
        "pairs_matched": notes.get("pairs_matched"),
        "mapper_thresholds": notes.get("mapper_thresholds"),
        "video": notes.get("video"),
        "unmatched": list(unmatched),
        "seconds": {k: round(float(v), 2) for k, v in seconds.items()},
    }


def read_report(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``report.json`` of a reconstructed folder."""
    import json

    path = Path(folder) / "report.json"
    if not path.is_file():
        raise FileNotFoundError(f"no reconstruction report in {folder} (report.json): run reconstruct first")
    return json.loads(path.read_text())


def format_report(report: Mapping[str, Any]) -> str:
    """The report as a short table of text lines."""
    rows = []
    if report.get("video"):
        v = report["video"]
        smeared = f", {v['motion_blurred']} of the kept motion-blurred" if v.get("motion_blurred") else ""
        rows.append(("video frames", f"{v['kept']} kept of {v['decoded']} decoded, {v['blurry']} dropped as blurry"
                                     + smeared))  # fmt: skip
        if v.get("warning"):
            rows.append(("video warning", v["warning"]))
    rows += [
        ("images registered", f"{report['images_registered']} of {report['images_given']} "
                              f"({100 * report['registered_fraction']:.0f} %)"),
        ("mean reprojection error", f"{report['mean_reprojection_error_px']:.3f} px"),
        ("mean track length", f"{report['mean_track_length']:.2f} images"),
        ("3D points", f"{report['num_points3D']:,}"),
    ]  # fmt: skip
    cams = report["cameras"]
    if cams:
        c = cams[0]
        focal = " / ".join(f"{f:.1f}" for f in c["focal_px"])
        dist = ", ".join(f"{k} {v:+.4f}" for k, v in c["distortion"].items()) or "none"
        more = (
            f" (camera 1 of {report['num_cameras']}, {c['width']}x{c['height']})" if report["num_cameras"] > 1 else ""
        )
        rows.append(("focal length", f"{focal} px{more}"))
        rows.append((f"distortion ({c['model']})", dist))
    if report.get("pairs_matched") is not None:
        rows.append(("photo pairs matched", f"{report['pairs_matched']:,} ({report.get('matcher')})"))
    tries = report.get("attempts", [])
    if len(tries) > 1:
        rows.append(("strategies tried", ", ".join(
            f"{a['strategy']} {a['registered']}" + (" (implausible)" if a.get("problems") else "")
            + (" (kept)" if a.get("kept") else "") for a in tries)))  # fmt: skip
    if report.get("model_problems"):
        rows.append(("kept model implausible", "; ".join(report["model_problems"])))
    lost = report.get("not_registered") or {}
    if lost:
        rows.append(("not registered", "; ".join(f"{n} ({why})" for n, why in list(lost.items())[:5])
                                       + (" ..." if len(lost) > 5 else "")))  # fmt: skip
    left = report.get("left_out") or {}
    if left.get("duplicates"):
        rows.append(("left out: duplicates", ", ".join(f"{a} (= {b})" for a, b in left["duplicates"].items())))
    if left.get("panoramas"):
        rows.append(("left out: panoramas", ", ".join(left["panoramas"])))
    if report.get("fisheye"):
        fish = list(report["fisheye"])
        rows.append(("fisheye photos", f"{len(fish)}, a fisheye camera of their own: " + ", ".join(fish[:5])
                                       + (" ..." if len(fish) > 5 else "")))  # fmt: skip
    for name, twin in (report.get("untagged") or {}).items():
        rows.append(("EXIF tag ignored", f"{name}: registered only without its orientation tag, as {twin}"))
    for name, how in (report.get("turned_by_exif") or {}).items():
        rows.append(("EXIF tag wrong?", f"{name}: {how}"))
    for group in report.get("separate_models") or []:
        rows.append(("a separate model", f"{len(group)} photos that share none with the kept one (another scene?): "
                                         + ", ".join(group[:5]) + (" ..." if len(group) > 5 else "")))  # fmt: skip
    if report.get("unmatched"):
        rows.append(
            ("match nothing", ", ".join(report["unmatched"][:5]) + (" ..." if len(report["unmatched"]) > 5 else ""))
        )
    order = ("photos", "features", "matching", "mapping", "undistort")
    secs = dict(sorted(report["seconds"].items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else 99))
    rows.append(("seconds per stage", ", ".join(f"{k} {v:.1f}" for k, v in secs.items())
                                      + f" (total {sum(secs.values()):.1f})"))  # fmt: skip
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"  {k.ljust(width)}  {v}" for k, v in rows)


def camera_geometry(rec: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Camera centres [V,3], their viewing directions [V,3] (unit, world) and the sparse points [P,3]
    of a ``pycolmap.Reconstruction`` (registered images only)."""
    centres, dirs = [], []
    for im in sorted((i for i in rec.images.values() if i.has_pose), key=lambda i: i.name):
        m = np.asarray(im.cam_from_world().matrix(), dtype=np.float64)
        R, t = m[:, :3], m[:, 3]
        centres.append(-R.T @ t)
        dirs.append(R[2])  # the camera's +z axis in world coordinates
    pts = np.array([p.xyz for p in rec.points3D.values()], dtype=np.float64).reshape(-1, 3)
    return np.array(centres).reshape(-1, 3), np.array(dirs).reshape(-1, 3), pts


def plot_cameras(rec: Any, title: str = "") -> Any:
    """A figure of the registered cameras (centres and viewing directions) and the sparse points, seen
    from above (the two axes of largest camera spread) and from the side; returns it."""
    import matplotlib.pyplot as plt

    centres, dirs, pts = camera_geometry(rec)
    # the "up" axis: the direction in which the cameras vary least (a handheld orbit is roughly planar)
    mean = centres.mean(0) if len(centres) else np.zeros(3)
    _, _, vt = np.linalg.svd(centres - mean) if len(centres) >= 3 else (None, None, np.eye(3))
    axes = vt  # rows: largest spread, second, least (the up axis)
    C, D = (centres - mean) @ axes.T, dirs @ axes.T
    P = (pts - mean) @ axes.T
    if len(P):  # keep the plot on the bulk of the points (far outliers squeeze everything else)
        lo, hi = np.percentile(P, 1, axis=0), np.percentile(P, 99, axis=0)
        P = P[np.all((P >= lo) & (P <= hi), axis=1)]
    span = float(np.ptp(C, axis=0).max()) if len(C) > 1 else 1.0
    arrow = 0.08 * span
    fig, panels = plt.subplots(1, 2, figsize=(11, 4.8))
    for ax, (i, j), name in zip(panels, ((0, 1), (0, 2)), ("from above", "from the side")):
        ax.scatter(P[:, i], P[:, j], s=1, c="0.55", alpha=0.5, label=f"sparse points ({len(pts):,})", rasterized=True)
        ax.quiver(C[:, i], C[:, j], D[:, i] * arrow, D[:, j] * arrow, angles="xy", scale_units="xy", scale=1,
                  color="tab:red", width=0.004, headwidth=3, headlength=3, headaxislength=2.5,
                  label=f"cameras ({len(C)}), viewing direction")  # fmt: skip
        ax.scatter(C[:, i], C[:, j], s=10, c="tab:red")
        ax.set_aspect("equal", adjustable="datalim")
        ax.set_title(name)
        ax.set_xlabel("first spread axis (scene units)")
        ax.set_ylabel(("second spread axis" if j == 1 else "up axis") + " (scene units)")
    handles, labels = panels[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=2, frameon=False, bbox_to_anchor=(0.5, 0.93))
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.03, 1, 0.88))
    return fig
