"""A scene's fingerprint: what a training run records so that its PSNR names its data.

:func:`scene_fingerprint` hashes what training reads (the decoded images, poses, intrinsics, split,
background, alphas and point cloud: ``content_sha256``) and, where the scene names its folder
(``scene.source["folder"]``, set by the loaders and :func:`gsworkbench.synthetic.builtin_scene`), the files themselves:
the images' names, sizes and SHA-256 as one hash, and each metadata file (``transforms*.json``,
``points3D.ply``, the COLMAP model) by name, size and SHA-256. Built-in scenes add the generator's
cache key. ``sha256`` is one hash of all of it: two runs with the same ``sha256`` saw the same data.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch

METADATA_GLOBS = ("transforms*.json", "*.ply", "sparse/**/*.bin", "sparse/**/*.txt")  # not scene.json: it holds timings
CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    """SHA-256 (hex) of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def _tensor_update(h: Any, t: torch.Tensor | None) -> None:
    if t is None:
        h.update(b"none")
        return
    t = t.detach().cpu().contiguous()
    h.update(f"{t.dtype}{list(t.shape)}".encode())
    h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")


def content_sha256(scene: Any) -> str:
    """SHA-256 of what training reads from ``scene`` (images [V,H,W,3], viewmats, Ks, split, alphas,
    points and colours, background) as float bytes: independent of where the files lie."""
    h = hashlib.sha256()
    for name in ("images", "viewmats", "Ks", "train_ids", "test_ids", "alphas", "points", "point_colors"):
        h.update(name.encode())
        _tensor_update(h, getattr(scene, name))
    h.update(json.dumps([list(scene.background), scene.width, scene.height]).encode())
    return h.hexdigest()


def folder_files(folder: Path, image_names: list[str]) -> dict[str, Any]:
    """The files of a dataset folder that a scene was loaded from: its images (count, bytes, one
    SHA-256 over their names, sizes and hashes) and each metadata file by name with size and SHA-256."""
    h = hashlib.sha256()
    total = 0
    for name in image_names:
        path = folder / name
        size = path.stat().st_size if path.is_file() else -1
        total += max(size, 0)
        h.update(f"{name}\0{size}\0{file_sha256(path) if size >= 0 else 'missing'}\n".encode())
    meta = {}
    for pattern in METADATA_GLOBS:
        for path in sorted(folder.glob(pattern)):
            if path.is_file():
                rel = path.relative_to(folder).as_posix()
                meta[rel] = {"bytes": path.stat().st_size, "sha256": file_sha256(path)}
    return {
        "images": {"count": len(image_names), "bytes": total, "sha256": h.hexdigest()},
        "metadata": dict(sorted(meta.items())),
    }


def scene_fingerprint(scene: Any) -> dict[str, Any]:
    """The fingerprint of ``scene`` (a :class:`gsworkbench.scenes.Scene`): name, views, split and
    size, ``content_sha256``, the files where the folder is known, the built-in generator's key, and
    ``sha256`` over all of it."""
    fp: dict[str, Any] = {
        "name": str(scene.name),
        "views": len(scene.images),
        "train_views": len(scene.train_ids),
        "test_views": len(scene.test_ids),
        "width": int(scene.width),
        "height": int(scene.height),
        "point_cloud": 0 if scene.points is None else len(scene.points),
        "content_sha256": content_sha256(scene),
    }
    source = dict(getattr(scene, "source", None) or {})
    for key in ("builtin", "generator_key", "generator_version"):
        if key in source:
            fp[key] = source[key]
    folder = source.get("folder")
    if folder is not None and Path(folder).is_dir() and scene.image_names:
        fp["folder"] = str(folder)
        fp["files"] = folder_files(Path(folder), list(scene.image_names))
    blob = json.dumps({k: v for k, v in fp.items() if k != "folder"}, sort_keys=True)
    fp["sha256"] = hashlib.sha256(blob.encode()).hexdigest()
    return fp
