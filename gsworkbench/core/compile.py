"""``compile_step``: a training or rendering step under ``torch.compile``, the way the ops expect it.

Every public op (``splat.rasterize``, ``field.evaluate``, ``transforms.transform`` with prebuilt
``Frames``; ``torch`` and ``ext`` backends) traces whole with ``fullgraph=True``. Compile the forward
and the loss; call ``backward()`` on the result outside (AOTAutograd compiles the backward too).

Plain ``torch.compile(fn)`` of user code traces the ops whole too, with or without ``fullgraph`` and
with no ``torch._dynamo.config`` flags: the only data-dependent size (the number of tile intersections
M) is declared by :func:`data_dependent_size` in the fake kernels, and no wrapper reads tensor data
into Python while tracing. ``compile_step`` adds ``fullgraph=True`` and the eager first call only.

Value checks (finite values, ranges) do not run inside a compiled graph (see
:mod:`gsworkbench.core.validation`); the first call of a ``compile_step`` therefore runs eagerly, so bad
inputs still raise their clear errors there.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import torch

COMPILE_MODES = ("eager", "aot_eager", "inductor")

F = TypeVar("F", bound=Callable[..., Any])


def data_dependent_size(like: torch.Tensor) -> torch.SymInt:
    """A new size (>= 0) for an output of a fake kernel whose length depends on the input data.

    Call it in a ``register_fake`` kernel; ``like`` is one of the kernel's (fake) inputs. It is
    ``torch.library.get_ctx().new_dynamic_size()`` without that function's gate: torch allows it only
    under ``fullgraph=True`` or ``torch._dynamo.config.capture_dynamic_output_shape_ops``, and
    otherwise breaks the graph at the op. The ops that call this are made for a data-dependent size
    (nothing in gsworkbench branches on it), so they opt in: the size becomes an unbacked symbol, as
    it would with the flag. User code that branches on it (``if meta["n_isects"] > 0``) breaks the
    graph there, as with the flag. Outside torch.compile (no shape environment, e.g. ``opcheck`` with
    static shapes) this is ``new_dynamic_size``, which raises the usual DynamicOutputShapeException.
    """
    ctx = torch.library.get_ctx()
    shape_env = getattr(getattr(like, "fake_mode", None), "shape_env", None)
    if shape_env is None or shape_env.allow_dynamic_output_shape_ops:
        return ctx.new_dynamic_size()
    size = shape_env.create_unbacked_symint()
    torch._check(size >= 0)  # a size: never negative (the range new_dynamic_size declares)
    return size


def compile_step(fn: F, enabled: bool | str = True, *, eager_first_call: bool = True, **options: Any) -> F:
    """``fn`` under ``torch.compile(fullgraph=True)`` when ``enabled``, else ``fn`` itself.

    Args:
        enabled: True (inductor), False or "eager" (no compilation), or a backend name
            ("aot_eager", "inductor").
        eager_first_call: run the first call eagerly, so the value checks see real inputs once.
        options: passed on to ``torch.compile`` (``dynamic``, ``mode``, ...).
    """
    backend = "inductor" if enabled is True else ("eager" if enabled is False else enabled)
    if backend not in COMPILE_MODES:
        raise ValueError(f"compile must be a bool or one of {', '.join(map(repr, COMPILE_MODES))}; got {enabled!r}")
    if backend == "eager":
        return fn
    compiled = torch.compile(fn, backend=backend, fullgraph=True, **options)
    calls = [0 if eager_first_call else 1]

    @functools.wraps(fn)
    def step(*args: Any, **kwargs: Any) -> Any:
        if calls[0] == 0:
            calls[0] = 1
            return fn(*args, **kwargs)
        return compiled(*args, **kwargs)

    return step  # type: ignore[return-value]
