"""The C++ quaternion header (csrc/include/gsw/quat.h) and 3x3 SVD (gsw/svd3.h) against gaussians.py.

A small driver (tests/cpp/quat_header_driver.cpp) is compiled with the host C++ compiler and fed fresh
random float64 inputs; every function and VJP is compared by relative error with the torch twin in
:mod:`gsworkbench.core.gaussians` (VJPs with torch.autograd). The kernels that use the header (projection,
transforms) are tested through their ops elsewhere; this covers the functions no op exercises alone.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from conftest import rel_err

from gsworkbench.core import gaussians as G

ROOT = Path(__file__).resolve().parent.parent
DRIVER = ROOT / "tests" / "cpp" / "quat_header_driver.cpp"
CXX = shutil.which("c++") or shutil.which("g++")

pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler")


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    exe = tmp_path_factory.mktemp("quat") / "quat_header_driver"
    cmd = [CXX, "-O2", "-std=c++20", "-Wall", "-Werror", f"-I{ROOT / 'csrc' / 'include'}", str(DRIVER), "-o", str(exe)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-4000:]
    return exe


def run_driver(exe: Path, inputs: torch.Tensor) -> dict[str, torch.Tensor]:
    """Runs the driver on inputs [n, 39] (float64); the outputs by name, each [n, ...]."""
    text = f"{inputs.shape[0]}\n" + "\n".join(" ".join(f"{x:.17g}" for x in row) for row in inputs.tolist())
    out = subprocess.run([str(exe)], input=text, capture_output=True, text=True, timeout=60, check=True)
    values = torch.tensor([[float(x) for x in line.split()] for line in out.stdout.splitlines()], dtype=torch.float64)
    sizes = {"ab": 4, "va": 4, "vb": 4, "R": 9, "vq": 4, "q": 4, "vm": 9, "U": 9, "sigma": 3}
    return dict(zip(sizes, values.split(list(sizes.values()), dim=1), strict=True))


def random_inputs(n: int) -> torch.Tensor:
    """[n, 39]: a, b, v, G, M (rotations, every branch of rotmat_to_quat included), S."""
    a, b, v = (torch.randn(n, 4, dtype=torch.float64) * 1.5 for _ in range(3))
    Gm = torch.randn(n, 9, dtype=torch.float64)
    quats = torch.randn(n, 4, dtype=torch.float64)
    # near-half-turns about x, y and z: the trace is small, so the other three branches are taken
    quats[:3] = torch.tensor([[0.1, 1.0, 0.2, -0.1], [0.1, 0.2, 1.0, 0.1], [0.05, -0.1, 0.2, 1.0]])
    M = G.quat_to_rotmat(quats).reshape(n, 9)
    S = torch.randn(n, 9, dtype=torch.float64)
    return torch.cat([a, b, v, Gm, M, S], dim=1)


def vjp(fn, inputs: tuple[torch.Tensor, ...], grad: torch.Tensor) -> tuple[torch.Tensor, ...]:  # noqa: ANN001
    xs = tuple(x.clone().requires_grad_(True) for x in inputs)
    return torch.autograd.grad(fn(*xs), xs, grad)


def test_quat_header_matches_gaussians(driver: Path, seed: int) -> None:
    n = 300
    x = random_inputs(n)
    a, b, v, Gm, M, S = x.split([4, 4, 4, 9, 9, 9], dim=1)
    got = run_driver(driver, x)
    M3 = M.reshape(n, 3, 3)
    diag = torch.stack([M3.diagonal(dim1=-2, dim2=-1).sum(-1), M3[:, 0, 0], M3[:, 1, 1], M3[:, 2, 2]], -1)
    assert set(diag.argmax(-1).tolist()) == {0, 1, 2, 3}, "every branch of rotmat_to_quat is exercised"

    assert rel_err(got["ab"], G.quat_multiply(a, b)) < 1e-14
    va, vb = vjp(G.quat_multiply, (a, b), v)
    assert rel_err(got["va"], va) < 1e-14 and rel_err(got["vb"], vb) < 1e-14

    assert rel_err(got["R"], G.quat_to_rotmat(a).reshape(n, 9)) < 1e-14
    (vq,) = vjp(G.quat_to_rotmat, (a,), Gm.reshape(n, 3, 3))
    assert rel_err(got["vq"], vq) < 1e-13

    assert rel_err(got["q"], G.rotmat_to_quat(M3)) < 1e-14
    (vm,) = vjp(G.rotmat_to_quat, (M3,), v)
    assert rel_err(got["vm"], vm.reshape(n, 9)) < 1e-12


def test_svd3_jacobi(driver: Path, seed: int) -> None:
    n = 300
    x = random_inputs(n)
    x[:5, 30:] *= torch.tensor([1e-4, 1.0, 1e3] * 3, dtype=torch.float64)  # badly conditioned columns
    S = x[:, 30:].reshape(n, 3, 3)
    got = run_driver(driver, x)
    U, sigma = got["U"].reshape(n, 3, 3), got["sigma"]
    eye = torch.eye(3, dtype=torch.float64).expand(n, 3, 3)
    assert rel_err(U.transpose(-1, -2) @ U, eye) < 1e-14
    assert rel_err(torch.linalg.det(U), torch.ones(n, dtype=torch.float64)) < 1e-14
    assert (sigma >= 0).all()
    assert rel_err(sigma.sort(-1).values, torch.linalg.svdvals(S).sort(-1).values) < 1e-14
    # S = U diag(sigma) V^T with V orthogonal: S S^T = U diag(sigma^2) U^T
    US = U * sigma[:, None, :]
    assert rel_err(US @ US.transpose(-1, -2), S @ S.transpose(-1, -2)) < 1e-13


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_quat_header_compiles_for_cuda(tmp_path: Path) -> None:
    """Every header function instantiated in device code (float and double) compiles with nvcc."""
    src = ROOT / "tests" / "cpp" / "quat_header_device.cu"
    cmd = ["nvcc", "-c", "-std=c++17", "-O3", f"-I{ROOT / 'csrc' / 'include'}",
           "-gencode", "arch=compute_80,code=sm_80", str(src), "-o", str(tmp_path / "quat.o")]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
