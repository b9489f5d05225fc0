"""Foundations that every layer shares: no capability of its own.

Atomic file writes (:mod:`~gsworkbench.core.atomic`), the camera helpers (:mod:`~gsworkbench.core.cameras`),
the Gaussian parameter math (:mod:`~gsworkbench.core.gaussians`), the splat container
(:mod:`~gsworkbench.core.splats`), memory limits (:mod:`~gsworkbench.core.limits`), argument checks
(:mod:`~gsworkbench.core.validation`), ``torch.compile`` of a step (:mod:`~gsworkbench.core.compile`),
the project folder, run folders and their provenance, figures, interruption and numba's threads.

This package's import loads none of them, so that a light module (``core.atomic``) stays free of torch.
"""
