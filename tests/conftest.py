"""Shared test helpers: fresh random seeds (reported on failure) and relative errors."""

from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """Norm-wise relative error |a - b| / |b| of ``a`` against the reference ``b``, in float64."""
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def fresh_seed() -> int:
    """A new random seed per call, or ``$GSW_TEST_SEED`` to replay a failure (tests print it)."""
    return int(os.environ.get("GSW_TEST_SEED", int.from_bytes(os.urandom(4), "little")))


@pytest.fixture
def seed(request: pytest.FixtureRequest) -> int:
    """A fresh seed per test run (set GSW_TEST_SEED to replay one); shown in failure reports."""
    s = fresh_seed()
    request.node.user_properties.append(("seed", s))
    torch.manual_seed(s)
    return s


def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> None:
    if call.when == "call" and call.excinfo is not None:
        for name, value in item.user_properties:
            if name == "seed":
                item.add_report_section("call", "seed", f"GSW_TEST_SEED={value}")


requires_ext = pytest.mark.skipif(
    not __import__("gsworkbench._ext", fromlist=["has_ext"]).has_ext(), reason="extension not built"
)
requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
