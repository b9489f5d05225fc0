"""One entry point for a scene folder of either layout."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gsworkbench.scenes.blender import load_blender
from gsworkbench.scenes.colmap import find_sparse_dir, load_colmap
from gsworkbench.scenes.scene import Scene


def detect_layout(path: str | os.PathLike[str]) -> str:
    """ "blender" for a folder with transforms_train.json or transforms.json (NeRF-synthetic,
    instant-ngp, nerfstudio), "colmap" for one with a sparse model; FileNotFoundError naming the folder
    otherwise."""
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"scene folder not found: {folder}")
    if (folder / "transforms_train.json").is_file() or (folder / "transforms.json").is_file():
        return "blender"
    try:
        find_sparse_dir(folder)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{folder} is neither a NeRF-synthetic folder (transforms_train.json) nor a COLMAP one (sparse/0)"
        ) from None
    return "colmap"


def load_scene(path: str | os.PathLike[str], **kwargs: Any) -> Scene:
    """Loads a folder with :func:`load_blender` or :func:`load_colmap`, whichever its layout is (the
    NeRF-synthetic layout wins where both are present); ``kwargs`` go to that loader."""
    loader = load_blender if detect_layout(path) == "blender" else load_colmap
    return loader(path, **kwargs)
