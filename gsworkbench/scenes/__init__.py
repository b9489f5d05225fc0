"""Scenes: posed images with a split, a scale and an initial point cloud, from three sources.

- :func:`load_blender`: the NeRF-synthetic layout (transforms_*.json, RGBA images);
- :func:`load_colmap`: COLMAP sparse models (binary or text, read with pycolmap) and their images;
- :func:`builtin_scene`: synthetic scenes rendered by Mitsuba 3, cached, loaded through the loaders.
"""

from gsworkbench.scenes.blender import load_blender
from gsworkbench.scenes.colmap import load_colmap
from gsworkbench.scenes.generate import GENERATOR_VERSION, builtin_scene, generate_scene, scene_cache_dir
from gsworkbench.scenes.load import detect_layout, load_scene
from gsworkbench.scenes.scene import Scene, camera_centers, camera_extent
from gsworkbench.scenes.synthetic import SYNTHETIC_SCENES

__all__ = [
    "GENERATOR_VERSION",
    "SYNTHETIC_SCENES",
    "Scene",
    "builtin_scene",
    "camera_centers",
    "camera_extent",
    "detect_layout",
    "generate_scene",
    "load_blender",
    "load_colmap",
    "load_scene",
    "scene_cache_dir",
]
