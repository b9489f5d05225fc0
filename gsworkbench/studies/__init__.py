"""Studies: what the workbench measures and finds, on top of the benchmark engine (:mod:`gsworkbench.bench`).

- :mod:`gsworkbench.studies.suites`: the benchmark suites (importing the package registers them all);
- :mod:`gsworkbench.studies.scene_splats`, :mod:`~gsworkbench.studies.photo_set` and
  :mod:`~gsworkbench.studies.lineup`: the splats, photo sets and rasterizer line-up the suites run on;
- :mod:`gsworkbench.studies.quality`: training runs' quality (PSNR, SSIM, time, Gaussians) in one table;
- :mod:`gsworkbench.studies.converge`: training until the held-out PSNR reaches a target (the
  ``converge`` suite runs it, interleaving the runs it compares);
- the ``python -m`` table scripts behind docs/tables: :mod:`~gsworkbench.studies.roofline_table`,
  :mod:`~gsworkbench.studies.rasterize_lanes`, :mod:`~gsworkbench.studies.rasterize_memory`,
  :mod:`~gsworkbench.studies.tile_cover_table`.

Sweeps of notebooks are :mod:`gsworkbench.jupyter.sweep`.
"""
