"""Scenes: posed images with a split, a scale and an initial point cloud, and the loaders that read them.

- :func:`load_blender`: the transforms.json layouts (NeRF-synthetic, instant-ngp, nerfstudio);
- :func:`load_colmap`: COLMAP sparse models (binary or text, read with pycolmap) and their images;
  both undistort distorted cameras and share the image rules of :mod:`gsworkbench.scenes.views`.

Photos to poses is :mod:`gsworkbench.sfm`; the built-in synthetic scenes are :mod:`gsworkbench.synthetic`.
"""

from gsworkbench.scenes.blender import load_blender
from gsworkbench.scenes.cache import scene_cache_dir
from gsworkbench.scenes.colmap import load_colmap
from gsworkbench.scenes.load import detect_layout, load_scene
from gsworkbench.scenes.scene import Scene, camera_centers, camera_extent
from gsworkbench.scenes.views import MissingImagesWarning

__all__ = [
    "MissingImagesWarning",
    "Scene",
    "camera_centers",
    "camera_extent",
    "detect_layout",
    "load_blender",
    "load_colmap",
    "load_scene",
    "scene_cache_dir",
]
