"""Input checks shared by every capability: each failure is a ValueError that names the problem.

Under ``torch.compile``: checks of shapes, dtypes, devices and options are Python over static metadata
and trace into the graph (they run when the graph is built). Checks that read tensor *values* (finite
scans, value ranges) run in eager mode only (:func:`checking_values`): inside a graph they would need a
device sync and a Python bool of tensor data, i.e. a graph break, or a traced assert paid on every
call. A compiled caller therefore gets these errors by running once eagerly (``gsworkbench.core.compile.compile_step``
runs the first call of a step eagerly for this reason) and watches its loss for non-finite values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from gsworkbench._ext import has_kernel

FLOAT_DTYPES = (torch.float32, torch.float64)


def checking_values() -> bool:
    """True when value checks (finite scans, value ranges) run: in eager mode, not while torch.compile
    traces (see the module docstring)."""
    return not torch.compiler.is_compiling()


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
    sizes = x.shape
    if len(sizes) != len(shape) or any(type(s) is int and n != s for n, s in zip(sizes, shape)):
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
    check_finite_all({name: x})
    return x


_NO_DATA = (True, float("inf"), float("-inf"))  # stats of a tensor without values: passes every range check


def check_finite_all(tensors: Mapping[str, torch.Tensor]) -> list[tuple[bool, float, float]]:
    """:func:`check_finite` for several tensors with one pass and one device sync; the error names the
    first offending tensor. Returns their :func:`value_stats` (min/max for range checks); tensors that
    are not floating point, or have no data (meta, or traced by torch.compile: :func:`checking_values`),
    get (True, inf, -inf), which pass every range check.

    This runs on every call of the public ops, so it stays a handful of attribute reads and one op call
    (a few microseconds on tiny inputs)."""
    if not checking_values():
        return [_NO_DATA] * len(tensors)
    values = list(tensors.values())
    if all(t.is_floating_point() and not t.is_meta for t in values):  # the usual case: every tensor checked
        stats = value_stats(values)
        if all(row[0] for row in stats):
            return stats
    checked = [(name, t) for name, t in tensors.items() if t.is_floating_point() and not t.is_meta]
    stats = value_stats([t for _, t in checked])
    by_name = {}
    for (name, _), row in zip(checked, stats):
        if not row[0]:
            raise ValueError(f"{name} contains non-finite values (NaN or Inf)")
        by_name[name] = row
    return [by_name.get(name, _NO_DATA) for name in tensors]


_STATS_DTYPES = (torch.float32, torch.float64)


def value_stats(tensors: Sequence[torch.Tensor]) -> list[tuple[bool, float, float]]:
    """Per floating-point tensor: (all values finite, min, max), with one device sync for all of them.

    min/max of an empty tensor are +inf/-inf; they are meaningless when a value is not finite. CPU
    float32/float64 tensors go through the extension's one-pass ``tensor_stats`` op when it is built (a
    hot-path input check costs microseconds); others through torch reductions, the reference the tests
    compare it with.
    """
    if not tensors:
        return []
    first = tensors[0]  # the op checks every tensor's device and dtype itself (RuntimeError: the reference)
    if first.is_cpu and first.dtype in _STATS_DTYPES and has_kernel("tensor_stats", "cpu"):
        try:
            # not differentiable: its C++ autograd kernel goes straight to the kernel (no no_grad block)
            rows = torch.ops.gsworkbench.tensor_stats(tensors).tolist()
        except RuntimeError:  # a tensor of another device or dtype: mixed lists are rare
            rows = value_stats_torch(tensors)
    else:
        rows = value_stats_torch(tensors)
    return [(r[0] == 0, r[1], r[2]) for r in rows]


def value_stats_torch(tensors: Sequence[torch.Tensor]) -> list[list[float]]:
    """Reference of :func:`value_stats`: rows (number of non-finite values, min, max) by torch reductions."""
    rows = []
    for t in tensors:
        t = t.detach()
        if t.numel():
            lo, hi = torch.aminmax(t)
            rows.append(torch.stack([(~torch.isfinite(t)).sum().to(torch.float64), lo.double(), hi.double()]))
        else:
            rows.append(torch.tensor([0.0, float("inf"), float("-inf")], dtype=torch.float64, device=t.device))
    return torch.stack(rows).tolist() if rows else []


def check_same_size(size_name: str, *uses: tuple[str, torch.Tensor, int]) -> int:
    """Checks that dimension ``dim`` of every ``(label, tensor, dim)`` agrees; returns that size."""
    sizes = [(label, t.shape[d]) for label, t, d in uses]
    if any(s != sizes[0][1] for _, s in sizes):  # no set: symbolic sizes (torch.compile) are not hashable
        detail = ", ".join(f"{label}: {s}" for label, s in sizes)
        raise ValueError(f"inconsistent {size_name} across inputs ({detail})")
    return sizes[0][1]


def check_same_device_dtype(**tensors: torch.Tensor) -> None:
    """All tensors on one device and of one dtype."""
    ts = list(tensors.values())
    device, dtype = ts[0].device, ts[0].dtype
    if any(t.device != device for t in ts):
        detail = ", ".join(f"{k} on {t.device}" for k, t in tensors.items())
        raise ValueError(f"inputs are on different devices ({detail})")
    if any(t.dtype != dtype for t in ts):
        detail = ", ".join(f"{k} {str(t.dtype).replace('torch.', '')}" for k, t in tensors.items())
        raise ValueError(f"inputs have different dtypes ({detail})")


def check_choice(name: str, value: object, choices: Sequence[str]) -> str:
    """``value`` must be one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value  # type: ignore[return-value]
