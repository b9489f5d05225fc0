"""Shared test helpers: fresh random seeds (reported on failure), relative errors, the ``device``
fixture (every device the ext kernels run on) and the one way of saying "requires the extension"."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import torch

from gsworkbench._ext import ExtensionMissingError, has_cuda_kernels, has_ext, require_ext

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

REQUIRE_EXT = os.environ.get("GSW_REQUIRE_EXT", "0") not in ("", "0")
"""``GSW_REQUIRE_EXT=1`` (set by ``make test``, which builds the extension): a missing extension fails
every test that needs it, with the build hint, instead of skipping it."""

requires_ext = pytest.mark.requires_ext
"""The one marker for tests (or parameters) that need the compiled extension: they skip when it is not
built, and fail with the build hint when :data:`REQUIRE_EXT` is set (see :func:`pytest_runtest_setup`)."""


def _missing_ext_message() -> str:
    """The build hint and the import error, as :func:`gsworkbench._ext.require_ext` words them."""
    try:
        require_ext()
    except ExtensionMissingError as err:
        return str(err)
    return "the extension is loaded"


def ext_built() -> bool:
    """Whether a test can use the extension, for tests that use it when built and something else when
    not (``"ext" if ext_built() else "torch"``). False when it is not built, unless :data:`REQUIRE_EXT`
    is set: then the calling test fails with the build hint."""
    if has_ext():
        return True
    if REQUIRE_EXT:
        pytest.fail(f"GSW_REQUIRE_EXT is set but the extension did not load: {_missing_ext_message()}")
    return False


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "requires_ext: needs gsworkbench._C (skips without it, fails with "
                            "GSW_REQUIRE_EXT=1)")  # fmt: skip


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("requires_ext") is not None and not ext_built():
        pytest.skip("gsworkbench._C not built")


def pytest_report_header(config: pytest.Config) -> str:
    if has_ext():
        return f"gsworkbench._C: loaded (CUDA kernels: {has_cuda_kernels()}); devices: {', '.join(DEVICES)}"
    return (f"gsworkbench._C: NOT loaded; ext tests {'FAIL (GSW_REQUIRE_EXT)' if REQUIRE_EXT else 'skip'} "
            f"({_missing_ext_message()})")  # fmt: skip


def backend_params(backends: Iterable[str]) -> list[Any]:
    """``backends`` for ``pytest.mark.parametrize``, with ``ext`` marked :data:`requires_ext`."""
    return [pytest.param(b, marks=requires_ext) if b == "ext" else b for b in backends]


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
"""Devices present here: the CPU, and CUDA when a GPU is."""


def _cuda_param() -> Any:
    """The ``cuda`` parameter of :func:`device`: skipped (saying so) only where no GPU is present."""
    return pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"))


@pytest.fixture(params=["cpu", _cuda_param()])
def device(request: pytest.FixtureRequest) -> str:
    """Each device in turn ("cpu", "cuda"): every test taking it runs on every device present. On a GPU
    machine whose extension lacks its CUDA kernels, the CUDA run fails with ``GSW_REQUIRE_EXT=1`` and
    skips (saying why) otherwise."""
    if request.param == "cuda" and has_ext() and not has_cuda_kernels():
        message = "a CUDA device is present but gsworkbench._C was built without its CUDA kernels"
        if REQUIRE_EXT:
            pytest.fail(message)
        pytest.skip(message)
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


# ---- checkpoints -------------------------------------------------------------------------------


class _TouchOnUnpickle:
    """Unpickling this calls ``Path.touch(marker)``: a stand-in for code a malicious checkpoint runs."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


def write_code_running_checkpoint(path: Path, state: dict[str, Any]) -> Path:
    """Saves ``state`` plus an object whose unpickling would create ``<path>.ran``; returns that marker.
    A loader using ``torch.load(weights_only=True)`` refuses the file and never creates the marker."""
    marker = path.with_suffix(".ran")
    torch.save({**state, "payload": _TouchOnUnpickle(marker)}, path)
    return marker
