"""gsworkbench: a CPU-first research workbench for Gaussian-splatting performance work.

Sub-packages, one per layer, each importing only those below it (docs/design.md has the table):
``core`` (foundations), ``transforms``, ``splat``, ``field``, ``io``, ``scenes``, ``sfm``, ``synthetic``,
``train``, ``viewer``, ``bench``, ``profiling``, ``studies``, ``jupyter``, ``cli``. The root holds only
this file, the extension's loader (``_ext``) and the libz preload (``_libz``).
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
