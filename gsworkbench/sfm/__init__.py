"""Photos to poses: a folder of photos or a video to a posed scene with pycolmap, on the CPU.

- :mod:`gsworkbench.sfm.reconstruct`: the whole path (photos, features, matching, mapping, undistortion);
- :mod:`gsworkbench.sfm.photos` and :mod:`gsworkbench.sfm.video`: the photos prepared, a video's frames picked;
- :mod:`gsworkbench.sfm.colmap_run`: pycolmap's calls with their output kept out of the notebook;
- :mod:`gsworkbench.sfm.sfm_report`: what the reconstruction found, as numbers and a camera plot;
- :mod:`gsworkbench.sfm.triangulate`: points from posed views (the ``sfm`` training init);
- :mod:`gsworkbench.sfm.pose_accuracy`: recovered poses against known ones.

The modules import pycolmap where they need it; this package's import loads none of them.
"""
