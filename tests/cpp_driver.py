"""Builds a C++ test driver (tests/cpp/) with the compiler flags of the extension build that was
imported (its ``_build_info.json``: ``make test-generic``'s and ``make test-raster16``'s builds too),
so a driver sees the same SIMD paths as the kernels it checks."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import gsworkbench

ROOT = Path(__file__).resolve().parent.parent
BUILD_INFO = Path(gsworkbench.__file__).parent / "_build_info.json"
CXX = shutil.which("c++") or shutil.which("g++")
MISSING = CXX is None or not BUILD_INFO.exists()  # no compiler or no build: the driver tests skip


def build_driver(source: Path, out_dir: Path) -> Path:
    """Compiles ``source`` with the build's flags (the simd pragmas as the extension sees them, without
    the OpenMP runtime) and its GSW_RASTER_LANES (setup.py gives it to the units that read it, outside
    the flags), with -Wall -Werror; returns the executable."""
    info = json.loads(BUILD_INFO.read_text())
    flags = ["-fopenmp-simd" if f == "-fopenmp" else f for f in info["cxx_flags"] if f != "-g1"]
    if info.get("raster_lanes_asked"):
        flags.append(f"-DGSW_RASTER_LANES={info['raster_lanes_asked']}")
    exe = out_dir / source.stem
    cmd = [CXX, *flags, "-Wall", "-Werror", f"-I{ROOT / 'csrc' / 'include'}", f"-I{ROOT / 'csrc' / 'cpu'}",
           str(source), "-o", str(exe)]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-4000:]
    return exe
