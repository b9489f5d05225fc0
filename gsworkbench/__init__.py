"""gsworkbench: a CPU-first research workbench for Gaussian-splatting performance work.

Capabilities live in sub-packages (``field``, ``bench``, ...). The shared Gaussian parameter math
(quaternions, covariances, activations, SH) lives in :mod:`gsworkbench.gaussians`.
"""

import os as _os

# OpenMP spin-waiting distorts timings on small VMs; the runtime reads this once, when torch loads.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# Load the system libz before pycolmap can rebind it (a PNG write would abort): see gsworkbench/_libz.py.
from gsworkbench import _libz  # noqa: E402

_libz.preload_libz()
if _libz.libz_bound_to_pycolmap():
    import warnings as _warnings

    _warnings.warn(_libz.IMPORT_ORDER_HINT, RuntimeWarning, stacklevel=2)

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """``gsworkbench.compile_step`` without importing torch at package import."""
    if name == "compile_step":
        from gsworkbench.compile import compile_step

        return compile_step
    raise AttributeError(f"module 'gsworkbench' has no attribute {name!r}")
