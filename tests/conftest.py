"""Shared test helpers: fresh random seeds (reported on failure), relative errors, the ``device``
fixture (every device the ext kernels run on) and the one way of saying "requires the extension"."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import pytest
import torch

from gsworkbench._ext import has_cuda_kernels, has_ext

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """Norm-wise relative error |a - b| / |b| of ``a`` against the reference ``b``, in float64 on the CPU
    (``a`` and ``b`` may live on different devices)."""
    a, b = a.detach().cpu().double(), b.detach().cpu().double()
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


# ---- the extension and devices -----------------------------------------------------------------

requires_ext = pytest.mark.skipif(not has_ext(), reason="gsworkbench._C not built")
"""The one marker for tests (or parameters) that need the compiled extension."""


def backend_params(backends: Iterable[str]) -> list[Any]:
    """``backends`` for ``pytest.mark.parametrize``, with ``ext`` marked :data:`requires_ext`."""
    return [pytest.param(b, marks=requires_ext) if b == "ext" else b for b in backends]


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() and has_cuda_kernels() else [])
"""Devices every ext test runs on: the CPU, and CUDA when a GPU is present and the extension has its
CUDA kernels."""


@pytest.fixture(params=DEVICES, ids=DEVICES)
def device(request: pytest.FixtureRequest) -> str:
    """Each device of :data:`DEVICES` in turn ("cpu", "cuda")."""
    return request.param


def to_device(obj: Any, device: str | torch.device) -> Any:
    """``obj`` with every tensor (also inside dicts, lists and tuples) moved to ``device``."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {k: to_device(v, device) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device(v, device) for v in obj)
    return obj
