"""Two zlibs in one process: why importing pycolmap first broke every PNG write, and the fix.

pycolmap's wheel links a static zlib 1.3 (through its bundled image I/O) and exports its symbols
(``deflateInit2_``, ``deflateEnd``, ...). Its bundled libgfortran also needs the system ``libz.so.1``.
When pycolmap is the first module to bring ``libz.so.1`` into the process, the dynamic linker
relocates that libz inside pycolmap's load group, where pycolmap's own exported zlib comes first:
libz's calls to its own functions (``deflateInit_`` -> ``deflateInit2_``, ``deflate`` ->
``deflateReset``, ...) then land in pycolmap's copy, whose ``z_stream`` state has another layout. The
next Pillow (or matplotlib) PNG write starts a stream in one zlib and ends it in the other:
``free(): invalid pointer`` in ``deflateEnd``, and the process aborts.

Relocation happens once, when a library is first loaded. So the fix is to load ``libz.so.1`` before
pycolmap: the stdlib ``zlib`` module links it, and ``ctypes`` loads it by name where ``zlib`` is built
in. :func:`preload_libz` does both; ``import gsworkbench`` runs it, so any script that imports
gsworkbench (or torch, which imports ``zlib``) before pycolmap is safe. A script that imports pycolmap
before all of these cannot be repaired afterwards; :func:`libz_bound_to_pycolmap` detects that case
(the link map shows ``libz.so.1`` loaded after pycolmap's extension) so the loaders can say so. The
set-up therefore also installs a start-up hook (:data:`PTH_NAME`, :func:`install_pth`) that loads libz
when the environment's interpreter starts: there, the import order does not matter at all.
"""

from __future__ import annotations

import ctypes
import sys

_RTLD_DI_LINKMAP = 2


class _LinkMap(ctypes.Structure):
    """The public head of glibc's ``struct link_map`` (``<link.h>``): the loaded objects in load order."""


_LinkMap._fields_ = [
    ("l_addr", ctypes.c_void_p),
    ("l_name", ctypes.c_char_p),
    ("l_ld", ctypes.c_void_p),
    ("l_next", ctypes.POINTER(_LinkMap)),
    ("l_prev", ctypes.POINTER(_LinkMap)),
]


def preload_libz() -> None:
    """Loads the process's ``libz.so.1`` now (before pycolmap can): the stdlib ``zlib`` module, then
    ``libz.so.1`` by name on Linux (a no-op when it is already loaded)."""
    import zlib  # noqa: F401  (links libz.so.1 in CPython builds that do not build zlib in)

    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libz.so.1")
        except OSError:  # no system libz: nothing that pycolmap could rebind
            pass


def loaded_objects() -> list[str]:
    """File names of the shared objects in this process, in the order they were loaded (Linux/glibc;
    empty elsewhere)."""
    if not sys.platform.startswith("linux"):
        return []
    try:
        libc = ctypes.CDLL(None)
        dlinfo = libc.dlinfo
    except (OSError, AttributeError):
        return []
    dlinfo.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    handle = ctypes.CDLL(None)._handle
    head = ctypes.POINTER(_LinkMap)()
    if dlinfo(handle, _RTLD_DI_LINKMAP, ctypes.byref(head)) != 0:
        return []
    names, node = [], head
    while node:
        names.append((node.contents.l_name or b"").decode(errors="replace"))
        node = node.contents.l_next
    return names


def libz_bound_to_pycolmap() -> bool:
    """True when ``libz.so.1`` was first loaded by pycolmap's extension (after it in the link map): the
    state in which PNG writes abort. False when it was loaded first, or pycolmap is not loaded."""
    names = loaded_objects()
    core = next((i for i, n in enumerate(names) if "pycolmap" in n and "_core" in n), None)
    libz = next((i for i, n in enumerate(names) if n.rsplit("/", 1)[-1].startswith("libz.so")), None)
    return core is not None and libz is not None and libz > core


IMPORT_ORDER_HINT = (
    "pycolmap was imported before gsworkbench, torch or zlib, so its bundled zlib took over the system "
    "libz and the next PNG write (Pillow, matplotlib) would abort with 'free(): invalid pointer'. "
    "Import gsworkbench (or zlib, or torch) before pycolmap, or install the start-up hook (make setup); "
    "see gsworkbench/_libz.py"
)


def check_import_order() -> None:
    """RuntimeError with :data:`IMPORT_ORDER_HINT` when :func:`libz_bound_to_pycolmap`."""
    if libz_bound_to_pycolmap():
        raise RuntimeError(IMPORT_ORDER_HINT)


# A one-line startup hook for the environment's site-packages: every interpreter of the environment
# loads the system libz before any user code, so even `import pycolmap` as a script's first line is
# safe. `make setup` installs it (:func:`install_pth`); .pth lines that start with "import"
# are executed by the site module at start-up.
PTH_NAME = "gsworkbench-libz.pth"
PTH_LINE = (
    "import sys; exec('try:\\n import zlib, ctypes\\n ctypes.CDLL(\"libz.so.1\")\\nexcept OSError:\\n pass') "
    "if sys.platform.startswith('linux') else None\n"
)


def install_pth(site_packages: str | None = None) -> str:
    """Writes :data:`PTH_NAME` into ``site_packages`` (default: this environment's purelib); returns its path."""
    import os
    import sysconfig

    folder = site_packages or sysconfig.get_paths()["purelib"]
    path = os.path.join(folder, PTH_NAME)
    with open(path, "w") as f:
        f.write(PTH_LINE)
    return path
