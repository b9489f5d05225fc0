"""Splat transforms: move, rotate and scale 3DGS scenes, spherical harmonics included.

``transform(splats, rotation=..., translation=..., scale=..., center=..., backend=...)`` applies
``x -> s R (x - c) + c + t`` (F of them in one call for batched arguments). Backends: ``numpy``
(vectorized reference), ``numba`` (fused parallel loop), ``torch`` (differentiable, CPU/GPU),
``ext`` (C++ OpenMP + SIMD kernel, csrc/cpu/transforms.cpp). ``inverse`` and ``compose`` build
:class:`Frames` to undo or chain transforms. See :func:`transform` for the exact rule (non-uniform
scale, SH rotation).
"""

from gsworkbench.transforms.api import BACKENDS, compose, inverse, resolve_backend, transform
from gsworkbench.transforms.frames import Frames, make_frames

__all__ = ["BACKENDS", "Frames", "compose", "inverse", "make_frames", "resolve_backend", "transform"]
