"""Photos to poses: a folder of photos or a video to a posed scene with pycolmap, on the CPU.

- :func:`reconstruct` (:mod:`gsworkbench.sfm.pipeline`): the whole path (photos, features, matching,
  mapping, undistortion), with :mod:`gsworkbench.sfm.registration` choosing the cameras and the
  strategies that get every photo registered;
- :mod:`gsworkbench.sfm.photos` and :mod:`gsworkbench.sfm.video`: the photos prepared, a video's frames picked;
- :mod:`gsworkbench.sfm.colmap_run`: pycolmap's calls with their output kept out of the notebook;
- :mod:`gsworkbench.sfm.sfm_report`: what the reconstruction found, as numbers and a camera plot;
- :mod:`gsworkbench.sfm.triangulate`: points from posed views (the ``sfm`` training init);
- :mod:`gsworkbench.sfm.pose_accuracy`: recovered poses against known ones.

The modules import pycolmap where they need it; this package's import loads no pycolmap.
"""

from gsworkbench.sfm.pipeline import ReconstructionFailed, ReconstructOptions, reconstruct

__all__ = ["ReconstructOptions", "ReconstructionFailed", "reconstruct"]
