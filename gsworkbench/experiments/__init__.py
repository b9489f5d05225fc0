"""Experiments: runs whose result is what they find, not how long they took.

:mod:`gsworkbench.experiments.sweep` runs a parameter grid of notebook runs or benchmark cases on Dask;
:mod:`gsworkbench.experiments.quality` gathers training runs' quality (PSNR, SSIM, time, Gaussians)
into one table. Timing suites stay in :mod:`gsworkbench.bench`.
"""
