"""Experiments: runs whose result is what they find, not how long they took.

:mod:`gsworkbench.experiments.sweep` runs a parameter grid of notebook runs or benchmark cases on Dask;
:mod:`gsworkbench.experiments.quality` gathers training runs' quality (PSNR, SSIM, time, Gaussians)
into one table; :mod:`gsworkbench.experiments.converge` trains until the held-out PSNR reaches a target
(the ``converge`` benchmark suite runs it, interleaving the runs it compares). Timing suites stay in
:mod:`gsworkbench.bench`.
"""
