"""``read_splats``: one reader for every splat file the workbench writes (Inria PLY, ``.spz``,
``.splat``), chosen by the file's suffix, and for a run's folder (its ``splats.ply``)."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from gsworkbench.core.splats import SplatSet
from gsworkbench.io.dotsplat import read_splat
from gsworkbench.io.ply import read_ply
from gsworkbench.io.spz import read_spz

READERS = {".ply": read_ply, ".spz": read_spz, ".splat": read_splat}
RUN_SPLATS = "splats.ply"  # what a training run's folder holds (gsworkbench.train.output)


def splat_file(path: str | os.PathLike[str]) -> Path:
    """The splat file ``path`` names: the path itself, or a folder's ``splats.ply``. FileNotFoundError
    for nothing there or a folder without one; ValueError for a suffix no reader takes."""
    path = Path(path)
    if path.is_dir():
        inside = path / RUN_SPLATS
        if not inside.is_file():
            raise FileNotFoundError(f"{path}: is a folder with no {RUN_SPLATS} in it (give a splat file: "
                                    f"{', '.join(READERS)})")  # fmt: skip
        return inside
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    if path.suffix.lower() not in READERS:
        raise ValueError(f"{path}: not a splat file the workbench reads (suffixes {', '.join(READERS)})")
    return path


def read_splats(path: str | os.PathLike[str], dtype: torch.dtype = torch.float32) -> SplatSet:
    """The splats of a ``.ply`` (Inria 3DGS), ``.spz`` or ``.splat`` file, or of a run folder's
    ``splats.ply``, as a SplatSet of ``dtype``. Errors name the file: FileNotFoundError (nothing there),
    ValueError (an unknown suffix, or a file its reader cannot read)."""
    file = splat_file(path)
    return READERS[file.suffix.lower()](file, dtype=dtype)
