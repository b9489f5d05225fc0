"""Scenes: posed images with a split, a scale and an initial point cloud, from three sources.

- :func:`load_blender`: the transforms.json layouts (NeRF-synthetic, instant-ngp, nerfstudio);
- :func:`load_colmap`: COLMAP sparse models (binary or text, read with pycolmap) and their images;
  both undistort distorted cameras and share the image rules of :mod:`gsworkbench.scenes.views`;
- :func:`builtin_scene`: synthetic scenes rendered by Mitsuba 3, cached, loaded through the loaders.
"""

from gsworkbench.scenes.blender import load_blender
from gsworkbench.scenes.cache import scene_cache_dir
from gsworkbench.scenes.colmap import load_colmap
from gsworkbench.scenes.generate import GENERATOR_VERSION, builtin_scene, generate_scene
from gsworkbench.scenes.load import detect_layout, load_scene
from gsworkbench.scenes.scene import Scene, camera_centers, camera_extent
from gsworkbench.scenes.synthetic import SYNTHETIC_SCENES
from gsworkbench.scenes.views import MissingImagesWarning

__all__ = [
    "GENERATOR_VERSION",
    "MissingImagesWarning",
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
