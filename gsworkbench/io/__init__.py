"""File formats: Inria 3DGS PLY (:mod:`gsworkbench.io.ply`)."""

from gsworkbench.io.ply import read_ply, write_ply

__all__ = ["read_ply", "write_ply"]
