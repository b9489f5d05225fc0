"""The imported extension is the build the run asked for.

``make test`` runs the ext tests twice: against the default build (``GSW_MARCH=native``) and against a
``GSW_MARCH=x86-64-v3`` build in build/generic (no AVX-512, so the generic twins of the AVX-512 loops
run), with ``GSW_EXPECT_MARCH`` naming the target that second run must import. ``gsworkbench._C``
carries its target (``march``, from setup.py) and whether its AVX-512 loops are compiled in
(``avx512``, from the compiler's ``__AVX512F__``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import requires_ext

pytestmark = requires_ext


def _ext():
    import gsworkbench._C as ext

    print(f"gsworkbench._C: {ext.__file__} (march={ext.march}, avx512={ext.avx512})")
    return ext


def test_extension_target_matches_its_build_record():
    """The .so's compiled-in target is the one its build record (written beside it) names, and the
    one the run expects (``GSW_EXPECT_MARCH``), so the run tests the build it means to."""
    ext = _ext()
    record = Path(ext.__file__).with_name("_build_info.json")
    assert json.loads(record.read_text())["march"] == ext.march, f"{record} describes another build"
    expected = os.environ.get("GSW_EXPECT_MARCH")
    if expected is not None:
        assert ext.march == expected, f"imported {ext.__file__}, built for {ext.march}, expected {expected}"


def _target_macros(march: str) -> str:
    """The C++ compiler's predefined macros for ``-march=march`` (skips the test without a compiler)."""
    cxx = shutil.which(os.environ.get("CXX", "c++"))
    if cxx is None:
        pytest.skip("no C++ compiler to ask")
    out = subprocess.run([cxx, f"-march={march}", "-dM", "-E", "-x", "c++", os.devnull],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_avx512_flag_is_the_compilers():
    """``avx512`` is 1 exactly when the compiler defines ``__AVX512F__`` for the extension's target
    (so under x86-64-v3 the generic loops are the ones compiled in)."""
    ext = _ext()
    macros = _target_macros(ext.march)
    assert ext.avx512 == int("#define __AVX512F__ " in macros)
    if ext.march == "x86-64-v3":
        assert ext.avx512 == 0


def test_raster_lanes_are_the_builds():
    """``raster_lanes`` is 8 where the target has AVX2 and FMA and the build did not ask for the AVX-512
    twin (``GSW_RASTER_LANES=16``, recorded in the build record), 16 otherwise; the run that means to
    test the AVX-512 twin (``GSW_EXPECT_RASTER_LANES``) imports it."""
    ext = _ext()
    record = json.loads(Path(ext.__file__).with_name("_build_info.json").read_text())
    macros = _target_macros(ext.march)
    avx2 = "#define __AVX2__ " in macros and "#define __FMA__ " in macros
    avx512 = "#define __AVX512F__ " in macros
    wide = avx512 and record.get("raster_lanes_asked") == "16"
    assert ext.raster_lanes == (16 if wide or not avx2 else 8), record
    expected = os.environ.get("GSW_EXPECT_RASTER_LANES")
    if expected is not None:
        assert ext.raster_lanes == int(expected), f"imported {ext.__file__} with {ext.raster_lanes} lanes"
