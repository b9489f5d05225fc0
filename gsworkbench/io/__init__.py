"""File formats: Inria 3DGS PLY (:mod:`gsworkbench.io.ply`), antimatter15's ``.splat``
(:mod:`gsworkbench.io.dotsplat`) and Niantic's ``.spz`` (:mod:`gsworkbench.io.spz`), all three read by
:func:`~gsworkbench.io.read.read_splats`; and the atomic
writes that every writer uses (:mod:`gsworkbench.io.atomic`).

The format functions load on first use, so that ``gsworkbench.io.atomic`` (a foundation module) does not
pull in torch and the splat container through this package's import.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "read_ply": "gsworkbench.io.ply",
    "read_splats": "gsworkbench.io.read",
    "write_ply": "gsworkbench.io.ply",
    "write_splat": "gsworkbench.io.dotsplat",
    "write_spz": "gsworkbench.io.spz",
}
__all__ = ["read_ply", "read_splats", "write_ply", "write_splat", "write_spz"]


def __getattr__(name: str) -> Any:
    """``gsworkbench.io.read_ply`` and the other format functions, imported when first asked for."""
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'gsworkbench.io' has no attribute {name!r}")
