"""Access to the compiled extension ``gsworkbench._C`` (the ``torch.ops.gsworkbench`` ops).

Importing the package never needs the extension; asking for an ``ext`` backend without it raises
:class:`ExtensionMissingError`, which says how to build it.

Whether the extension loaded, and which of its ops have CPU / CUDA kernels, is decided once, when this
module is imported: the answers are constants, so code that asks (``has_ext``, ``has_kernel``) inside a
``torch.compile``-d function traces without a graph break.
"""

from __future__ import annotations

import importlib

import torch  # loads libtorch, which _C links against

BUILD_HINT = (
    "The gsworkbench._C extension is not built. Build it with `make setup` (or "
    "`pip install --no-deps --no-build-isolation -e .` inside the project's environment)."
)

_DISPATCH_KEYS = {"cpu": "CPU", "cuda": "CUDA"}


class ExtensionMissingError(RuntimeError):
    """The compiled extension is needed but was not built or failed to load."""


def _load() -> str | None:
    """Imports ``gsworkbench._C``; returns None on success, else the import error's text."""
    try:
        importlib.import_module("gsworkbench._C")
    except ImportError as err:  # not built, or built against another torch
        return str(err)
    return None


def _kernels() -> frozenset[tuple[str, str]]:
    """(op, device type) of every ``gsworkbench::`` op with a kernel for that device in this build."""
    if _LOAD_ERROR is not None:
        return frozenset()
    ops = {name.split("::", 1)[1].split(".", 1)[0] for name in torch._C._dispatch_get_all_op_names()
           if name.startswith("gsworkbench::")}  # fmt: skip
    found = set()
    for op in ops:
        for device_type, key in _DISPATCH_KEYS.items():
            try:
                if torch._C._dispatch_has_kernel_for_dispatch_key(f"gsworkbench::{op}", key):
                    found.add((op, device_type))
            except RuntimeError:  # no such op in this build
                pass
    return frozenset(found)


_LOAD_ERROR: str | None = _load()
_KERNELS: frozenset[tuple[str, str]] = _kernels()


def has_ext() -> bool:
    """True when the compiled extension loaded."""
    return _LOAD_ERROR is None


def require_ext() -> None:
    """Raises :class:`ExtensionMissingError` with build instructions when the extension is missing."""
    if _LOAD_ERROR is not None:
        raise ExtensionMissingError(f"{BUILD_HINT} (import error: {_LOAD_ERROR})")


def has_kernel(op: str, device_type: str) -> bool:
    """True when op ``gsworkbench::<op>`` has a kernel for ``device_type`` ("cpu", "cuda") in this build."""
    return (op, device_type) in _KERNELS


def has_cuda_kernels() -> bool:
    """True when the extension was built with its CUDA kernels."""
    return has_kernel("field_forward", "cuda")


def require_kernel(op: str, device_type: str) -> None:
    """Raises unless backend ``ext`` can run ``gsworkbench::<op>`` on ``device_type`` ("cpu", "cuda"):
    :class:`ExtensionMissingError` (with build instructions) when the extension is missing, ValueError
    when this build has no kernel of the op for that device (e.g. CUDA tensors with a CPU-only build).

    The one availability check every ``ext`` backend makes before calling its op."""
    require_ext()
    if device_type in _DISPATCH_KEYS and (op, device_type) not in _KERNELS:
        hint = " (CUDA tensors need the extension built with its CUDA kernels)" if device_type == "cuda" else ""
        raise ValueError(f"backend 'ext' has no {device_type} kernel for {op} in this build{hint}; use backend='torch'")
