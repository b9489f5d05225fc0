"""The built-in synthetic scenes: Mitsuba 3 scene descriptions, rendered, written in both loader layouts
(NeRF-synthetic and COLMAP), cached, then loaded through :mod:`gsworkbench.scenes`.

- :func:`builtin_scene`: a built-in scene by name, generated on first use and cached;
- :mod:`gsworkbench.synthetic.mitsuba_scenes`: the scenes' Mitsuba descriptions and cameras;
- :mod:`gsworkbench.synthetic.simulated_capture`: the "capture" scene as a photo capture reaches a
  researcher after COLMAP (JPEG photos through a distorting lens, one camera per image).
"""

from gsworkbench.synthetic.generate import GENERATOR_VERSION, builtin_scene, generate_scene
from gsworkbench.synthetic.mitsuba_scenes import SYNTHETIC_SCENES

__all__ = ["GENERATOR_VERSION", "SYNTHETIC_SCENES", "builtin_scene", "generate_scene"]
