"""File formats of splat sets: Inria 3DGS PLY (:mod:`gsworkbench.io.ply`), antimatter15's ``.splat``
(:mod:`gsworkbench.io.dotsplat`) and Niantic's ``.spz`` (:mod:`gsworkbench.io.spz`), all three read by
:func:`~gsworkbench.io.read.read_splats` (by suffix, or a run folder's ``splats.ply``). Their writes are
atomic (:mod:`gsworkbench.core.atomic`).
"""

from gsworkbench.io.dotsplat import write_splat
from gsworkbench.io.ply import read_ply, write_ply
from gsworkbench.io.read import read_splats
from gsworkbench.io.spz import write_spz

__all__ = ["read_ply", "read_splats", "write_ply", "write_splat", "write_spz"]
