"""Builds the gsworkbench._C extension.

The op schema (csrc/gsworkbench.cpp), the C++ autograd (csrc/autograd/), the device-agnostic ATen-op
kernels (csrc/composite/) and the CPU kernels and bindings (csrc/cpu/) are always built. The CUDA kernels
and bindings (csrc/cuda/*.cu + csrc/cuda/*.cpp) are added when torch was built with CUDA and nvcc is found.
Environment knobs: GSW_MARCH (the -march target, default "native"; `make test` also builds and tests
x86-64-v3, which has no AVX-512), GSW_RASTER_LANES (16: the rasterizer's AVX-512 twin, 16 lanes a chunk,
where the target has AVX-512; by default it runs its AVX2 twin, 8 lanes, wherever AVX2 is: see
csrc/cpu/splat_simd.h), GSW_NO_CUDA=1, GSW_BUILD_INFO (where the build record is written, default
gsworkbench/_build_info.json), MAX_JOBS.

The objects are kept in build/ext-objects (build_ext --build-temp changes it), where ninja recompiles
only the translation units whose inputs or command line changed. GSW_RASTER_LANES reaches only the
units that include a file reading it (through generated wrappers, with the command line every unit
shares unchanged), so a GSW_RASTER_LANES=16 build into the same --build-temp recompiles those and
links the others as the default build left them.
"""

import glob
import os
import re
import shutil

import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

here = os.path.dirname(os.path.abspath(__file__))
march = os.environ.get("GSW_MARCH", "native")
# -g1 overrides the -g in Python's own compiler flags: the line tables that name our C++ files in py-spy's
# native frames stay, and the full debug info of every torch header the kernels include (types, locals),
# which costs compile time and size, goes.
cxx_flags = ["-O3", "-g1", "-std=c++20", "-fopenmp", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=fast"]
cxx_flags.append(f"-march={march}")
# GSW_MARCH is also compiled in (gsworkbench._C.march), so a test can tell which build it imported.
define_macros = [("GSW_MARCH", march)]
raster_lanes = os.environ.get("GSW_RASTER_LANES")
if raster_lanes not in (None, "", "8", "16"):
    raise SystemExit(f"GSW_RASTER_LANES must be 8 or 16, got {raster_lanes!r}")
sources = ["csrc/gsworkbench.cpp"] + [
    f for folder in ("autograd", "composite", "cpu") for f in sorted(glob.glob(f"csrc/{folder}/*.cpp"))
]
include_dirs = [os.path.join(here, "csrc", "include")]
BUILD_TEMP = os.path.join("build", "ext-objects")

with_cuda = (
    torch.version.cuda is not None
    and shutil.which("nvcc") is not None
    and os.environ.get("GSW_NO_CUDA", "0") != "1"
)
if with_cuda:
    sources += sorted(glob.glob("csrc/cuda/*.cu")) + sorted(glob.glob("csrc/cuda/*.cpp"))
    ext = CUDAExtension(
        "gsworkbench._C",
        sources,
        include_dirs=include_dirs,
        define_macros=define_macros + [("GSW_WITH_CUDA", "1")],
        extra_compile_args={"cxx": cxx_flags, "nvcc": ["-O3", "--use_fast_math", "-std=c++17"]},
        extra_link_args=["-fopenmp"],
    )
else:
    ext = CppExtension(
        "gsworkbench._C",
        sources,
        include_dirs=include_dirs,
        define_macros=define_macros,
        extra_compile_args={"cxx": cxx_flags},
        extra_link_args=["-fopenmp"],
    )


def _compiler_info() -> dict:
    """Records the C++ compiler (as torch's BuildExtension calls it), its version and flags for every run."""
    import json
    import subprocess

    cxx = os.environ.get("CXX", "c++")

    def first_line(*args: str) -> str | None:
        try:
            out = subprocess.run([cxx, *args], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            return None
        return out.splitlines()[0].strip() if out.strip() else None

    try:
        cmd = [cxx, f"-march={march}", "-Q", "--help=target"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        resolved = next((ln.split()[-1] for ln in out.stdout.splitlines() if ln.strip().startswith("-march=")), None)
    except (OSError, subprocess.SubprocessError):
        resolved = None
    info = {
        "cxx": cxx,
        "cxx_version": first_line("--version"),
        "cxx_flags": cxx_flags,
        "march": march,
        "march_resolved": resolved,
        "raster_lanes_asked": raster_lanes or None,
        "cuda": with_cuda,
        "nvcc_flags": ext.extra_compile_args.get("nvcc") if with_cuda else None,
    }
    path = os.environ.get("GSW_BUILD_INFO") or os.path.join(here, "gsworkbench", "_build_info.json")
    with open(path, "w") as f:
        json.dump(info, f, indent=2)


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', re.M)


def reading(macro: str, files: list[str], dirs: list[str]) -> list[str]:
    """The ``files`` that name ``macro`` themselves or through their ``#include``s of project headers,
    followed transitively (looked up beside the including file, then in ``dirs``; headers found in
    neither, the system's and torch's, are not read): the translation units whose preprocessing a
    ``-D<macro>`` can change. A comment naming it counts too, which can only add a unit. Every unit that
    sees a header's definitions must see the same macro, or an inline function of that header would
    differ between units."""
    verdict: dict[str, bool] = {}

    def reads(path: str) -> bool:
        path = os.path.realpath(path)
        if path not in verdict:
            verdict[path] = False  # an include cycle (stopped by #pragma once) adds nothing
            with open(path, encoding="utf-8") as f:
                text = f.read()
            found = re.search(rf"\b{macro}\b", text) is not None
            for name in _INCLUDE.findall(text):
                where = [os.path.join(d, name) for d in (os.path.dirname(path), *dirs)]
                header = next((w for w in where if os.path.isfile(w)), None)
                found = (header is not None and reads(header)) or found
            verdict[path] = found
        return verdict[path]

    return [f for f in files if reads(f)]


class BuildExt(BuildExtension):
    """torch's ninja build with GSW_RASTER_LANES given to only the units that read it: each such source
    is compiled through a wrapper in the build folder (``#define`` + ``#include`` of the source), written
    only when its text changes, so that ninja sees it unchanged on the next build. The objects go to
    ``BUILD_TEMP`` unless ``--build-temp`` says otherwise (pip's editable build would use a new
    temporary folder each time, and so recompile every unit)."""

    def finalize_options(self) -> None:
        if self.build_temp is None:
            self.build_temp = BUILD_TEMP
        super().finalize_options()

    def build_extensions(self) -> None:
        if raster_lanes:
            for e in self.extensions:
                lanes = set(reading("GSW_RASTER_LANES", e.sources, include_dirs))  # ours, not torch's
                e.sources = [self._with_lanes(src) if src in lanes else src for src in e.sources]
        super().build_extensions()

    def _with_lanes(self, src: str) -> str:
        wrapper = os.path.join(self.build_temp, f"raster_lanes_{raster_lanes}", os.path.relpath(src, here))
        text = (
            f"// {src} with GSW_RASTER_LANES={raster_lanes} (setup.py: only the units that read it get it)\n"
            f"#define GSW_RASTER_LANES {raster_lanes}\n"
            f'#include "{os.path.abspath(src)}"\n'
        )
        old = None
        if os.path.isfile(wrapper):
            with open(wrapper, encoding="utf-8") as f:
                old = f.read()
        if old != text:
            os.makedirs(os.path.dirname(wrapper), exist_ok=True)
            with open(wrapper, "w", encoding="utf-8") as f:
                f.write(text)
        return wrapper


_compiler_info()
setup(ext_modules=[ext], cmdclass={"build_ext": BuildExt})
