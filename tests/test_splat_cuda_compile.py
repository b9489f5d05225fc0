"""The CUDA kernels of the rasterizer compile with nvcc (no GPU needed); skipped without nvcc."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_splat_cu_compiles(tmp_path: Path) -> None:
    cmd = [
        "nvcc", "-c", "-std=c++17", "-I", str(ROOT / "csrc" / "include"),
        "-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90", "-Xptxas", "-v",
        str(ROOT / "csrc" / "cuda" / "splat.cu"), "-o", str(tmp_path / "splat.o"),
    ]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
