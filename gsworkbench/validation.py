"""Input checks shared by every capability: each failure is a ValueError that names the problem."""

from __future__ import annotations

from collections.abc import Sequence

import torch

FLOAT_DTYPES = (torch.float32, torch.float64)


def check_tensor(
    name: str,
    x: object,
    shape: Sequence[int | str | None],
    *,
    dtypes: Sequence[torch.dtype] = FLOAT_DTYPES,
    finite: bool = True,
) -> torch.Tensor:
    """Checks that ``x`` is a tensor of the given shape and dtype, with finite values.

    ``shape`` entries: an int is an exact size, a str is a named size (only the rank is checked here;
    use :func:`check_same_size` to tie names together), None is any size.
    """
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != len(shape) or any(isinstance(s, int) and x.shape[i] != s for i, s in enumerate(shape)):
        want = "[" + ",".join("*" if s is None else str(s) for s in shape) + "]"
        raise ValueError(f"{name} must have shape {want}, got {list(x.shape)}")
    if x.dtype not in dtypes:
        allowed = ", ".join(str(d).replace("torch.", "") for d in dtypes)
        raise ValueError(f"{name} must have dtype {allowed}, got {str(x.dtype).replace('torch.', '')}")
    if finite:
        check_finite(name, x)
    return x


def check_finite(name: str, x: torch.Tensor) -> torch.Tensor:
    """ValueError when a floating-point tensor holds NaN or Inf (tensors without data pass)."""
    if x.is_floating_point() and x.numel() and x.device.type != "meta":
        d = x.detach()
        # a finite sum proves every element finite (NaN and Inf propagate) in one cheap reduction;
        # only a non-finite sum (which may also be an overflow) needs the elementwise check
        if not bool(torch.isfinite(d.sum())) and not bool(torch.isfinite(d).all()):
            raise ValueError(f"{name} contains non-finite values (NaN or Inf)")
    return x


def check_finite_all(**tensors: torch.Tensor) -> None:
    """:func:`check_finite` for several tensors at once: one reduction per tensor and one sync in all.

    Meant for hot paths (a renderer called every step); the error names the first offending tensor.
    """
    data = [t.detach() for t in tensors.values() if t.is_floating_point() and t.numel() and t.device.type != "meta"]
    if not data:
        return
    sums = torch.stack([d.sum() for d in data])
    if bool(torch.isfinite(sums).all()):
        return
    for name, t in tensors.items():  # slow path: which one (a finite tensor may only have overflowed)
        check_finite(name, t)


def check_same_size(size_name: str, *uses: tuple[str, torch.Tensor, int]) -> int:
    """Checks that dimension ``dim`` of every ``(label, tensor, dim)`` agrees; returns that size."""
    sizes = [(label, t.shape[d]) for label, t, d in uses]
    if len({s for _, s in sizes}) > 1:
        detail = ", ".join(f"{label}: {s}" for label, s in sizes)
        raise ValueError(f"inconsistent {size_name} across inputs ({detail})")
    return sizes[0][1]


def check_same_device_dtype(**tensors: torch.Tensor) -> None:
    """All tensors on one device and of one dtype."""
    devices = {str(t.device) for t in tensors.values()}
    if len(devices) > 1:
        detail = ", ".join(f"{k} on {t.device}" for k, t in tensors.items())
        raise ValueError(f"inputs are on different devices ({detail})")
    dtypes = {t.dtype for t in tensors.values()}
    if len(dtypes) > 1:
        detail = ", ".join(f"{k} {str(t.dtype).replace('torch.', '')}" for k, t in tensors.items())
        raise ValueError(f"inputs have different dtypes ({detail})")


def check_choice(name: str, value: object, choices: Sequence[str]) -> str:
    """``value`` must be one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value  # type: ignore[return-value]
