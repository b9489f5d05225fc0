"""Differentiable 3D Gaussian splat rendering: a tiled, multi-threaded CPU rasterizer (``ext``) with a
pure-torch reference (``torch``) beside it, drop-in for gsplat's ``rasterization``.

- :func:`rasterize`: the public entry point (input checks, backend dispatch, render modes);
- :mod:`gsworkbench.core.cameras`: look-at / orbit viewmats and intrinsics;
- :mod:`gsworkbench.splat._torch_impl` and :mod:`gsworkbench.splat.ops`: the four stages of each
  backend (project_gaussians, sh_to_color, isect_tiles, rasterize_to_pixels).
"""

from gsworkbench.core.cameras import intrinsics_from_fov, look_at, orbit_cameras, orbit_eye
from gsworkbench.splat.rasterize import BACKENDS, RASTERIZE_MODES, RENDER_MODES, backend_module, rasterize

__all__ = [
    "BACKENDS",
    "RASTERIZE_MODES",
    "RENDER_MODES",
    "backend_module",
    "intrinsics_from_fov",
    "look_at",
    "orbit_cameras",
    "orbit_eye",
    "rasterize",
]
