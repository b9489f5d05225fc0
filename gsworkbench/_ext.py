"""Access to the compiled extension ``gsworkbench._C`` (the ``torch.ops.gsworkbench`` ops).

Importing the package never needs the extension; asking for an ``ext`` backend without it raises
:class:`ExtensionMissingError`, which says how to build it.
"""

from __future__ import annotations

import functools
import importlib

BUILD_HINT = (
    "The gsworkbench._C extension is not built. Build it with `make setup` (or "
    "`pip install --no-deps --no-build-isolation -e .` inside the project's environment)."
)


class ExtensionMissingError(RuntimeError):
    """The compiled extension is needed but was not built or failed to load."""


@functools.lru_cache(maxsize=1)
def _load() -> str | None:
    """Imports ``gsworkbench._C``; returns None on success, else the import error's text."""
    import torch  # noqa: F401  (loads libtorch, which _C links against)

    try:
        importlib.import_module("gsworkbench._C")
    except ImportError as err:  # not built, or built against another torch
        return str(err)
    return None


def has_ext() -> bool:
    """True when the compiled extension loaded."""
    return _load() is None


def require_ext() -> None:
    """Raises :class:`ExtensionMissingError` with build instructions when the extension is missing."""
    err = _load()
    if err is not None:
        raise ExtensionMissingError(f"{BUILD_HINT} (import error: {err})")


@functools.lru_cache(maxsize=32)
def has_kernel(op: str, device_type: str) -> bool:
    """True when op ``gsworkbench::<op>`` has a kernel for ``device_type`` ("cpu", "cuda") in this build."""
    import torch

    key = {"cpu": "CPU", "cuda": "CUDA"}.get(device_type)
    if not has_ext() or key is None:
        return False
    try:
        return torch._C._dispatch_has_kernel_for_dispatch_key(f"gsworkbench::{op}", key)
    except RuntimeError:  # no such op in this build (an extension older than the package)
        return False


def has_cuda_kernels() -> bool:
    """True when the extension was built with its CUDA kernels."""
    return has_kernel("field_forward", "cuda")
