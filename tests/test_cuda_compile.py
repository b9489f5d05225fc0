"""Every CUDA source compiles, whether or not this machine has a GPU.

- each ``csrc/cuda/*.cu`` (kernels, no ATen headers) with nvcc for sm_80 and sm_90, ``-Xptxas -v``;
- each ``csrc/cuda/*.cpp`` (the TORCH_LIBRARY_IMPL bindings) syntax-checked with the host compiler
  against torch's headers and the CUDA toolkit's; a CPU build of torch lacks one generated CMake
  header, which the test supplies empty.
Those two are skipped (saying so) where nvcc is absent. Without nvcc too: every op a CUDA binding
registers is one the schema declares and the CPU implements (a misspelt name would otherwise only
fail when the extension loads on a GPU machine).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CU_FILES = sorted((ROOT / "csrc" / "cuda").glob("*.cu"))
BINDINGS = sorted((ROOT / "csrc" / "cuda").glob("*.cpp"))
NVCC = shutil.which("nvcc")

needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not found on PATH: the CUDA sources are not compile-checked")


def cuda_home(tmp_path: Path) -> Path:
    """The toolkit folder of the nvcc on PATH (nvcc may be a wrapper script): nvcc -dryrun reports it."""
    src = tmp_path / "empty.cu"
    src.write_text("")
    out = subprocess.run([NVCC, "-dryrun", "-c", str(src)], capture_output=True, text=True)
    for line in (out.stdout + out.stderr).splitlines():
        if line.startswith("#$ TOP="):
            return Path(line.split("=", 1)[1].strip()).resolve()
    return Path(NVCC).resolve().parent.parent


def _impls(files: list[Path]) -> list[str]:
    """The op names that ``m.impl("name", ...)`` registers in ``files``."""
    return [name for f in files for name in re.findall(r'm\.impl\(\s*"(\w+)"', f.read_text())]


def _composite_impls() -> set[str]:
    """Ops with a device-agnostic kernel (``TORCH_LIBRARY_IMPL(gsworkbench, Composite...)`` blocks in
    csrc/composite/, written in ATen ops): they serve the CPU and CUDA alike."""
    block = re.compile(r"TORCH_LIBRARY_IMPL\(gsworkbench,\s*Composite\w+,\s*m\)\s*\{(.*?)\n\}", re.S)
    blocks = [b for f in sorted((ROOT / "csrc" / "composite").glob("*.cpp")) for b in block.findall(f.read_text())]
    return {name for b in blocks for name in re.findall(r'm\.impl\(\s*"(\w+)"', b)}


def test_cuda_bindings_register_ops_of_the_schema():
    schema = set(re.findall(r'm\.def\(\s*"(\w+)\(', (ROOT / "csrc" / "gsworkbench.cpp").read_text()))
    cpu = set(_impls(sorted((ROOT / "csrc" / "cpu").glob("*.cpp")))) | _composite_impls()
    cuda = _impls(BINDINGS)
    assert CU_FILES and cuda, "csrc/cuda/ holds no kernels or no bindings"
    assert len(cuda) == len(set(cuda)), f"ops registered twice for CUDA: {sorted(cuda)}"
    assert set(cuda) <= schema, f"CUDA bindings register ops the schema lacks: {set(cuda) - schema}"
    assert set(cuda) <= cpu, f"CUDA kernels without the CPU kernel beside them: {set(cuda) - cpu}"
    assert cpu == schema, f"schema ops without a CPU kernel: {schema - cpu}; CPU kernels of no op: {cpu - schema}"


@needs_nvcc
@pytest.mark.parametrize("cu", CU_FILES, ids=lambda p: p.name)
def test_nvcc_compiles(cu, tmp_path):
    cmd = [
        NVCC, "-c", "-std=c++17", "-O3", f"-I{ROOT / 'csrc' / 'include'}", f"-I{cu.parent}",
        "-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90",
        "-Xptxas", "-v", str(cu), "-o", str(tmp_path / (cu.stem + ".o")),
    ]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    print(out.stderr[-4000:])
    assert out.returncode == 0, f"nvcc failed on {cu.name}:\n{out.stderr[-4000:]}"
    assert "ptxas info" in out.stderr  # -Xptxas -v reported the kernels' resources


@needs_nvcc
@pytest.mark.parametrize("cpp", BINDINGS, ids=lambda p: p.name)
def test_cuda_bindings_syntax(cpp, tmp_path):
    from torch.utils.cpp_extension import include_paths

    stub = tmp_path / "c10" / "cuda" / "impl"
    stub.mkdir(parents=True)
    (stub / "cuda_cmake_macros.h").write_text("#pragma once\n")
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    cmd = [cxx, "-std=c++20", "-fsyntax-only", "-DGSW_WITH_CUDA=1", f"-I{tmp_path}", f"-I{ROOT / 'csrc' / 'include'}"]
    cmd += [f"-I{p}" for p in include_paths()] + [f"-I{sysconfig.get_paths()['include']}"]
    cmd += [f"-I{cuda_home(tmp_path) / 'include'}", str(cpp)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, f"{cpp.name} does not compile:\n{out.stderr[-4000:]}"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"]))
