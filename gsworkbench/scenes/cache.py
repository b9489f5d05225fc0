"""Where generated scenes and derived data (undistorted views, triangulated points) are cached: one
place that loaders, generators and derivations all import, so that none imports another for it."""

from __future__ import annotations

import os
from pathlib import Path


def scene_cache_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """``cache_dir``, else ``$GSW_SCENE_CACHE``, else ``~/.cache/gsworkbench/scenes``."""
    if cache_dir is not None:
        return Path(cache_dir)
    env = os.environ.get("GSW_SCENE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "gsworkbench" / "scenes"
