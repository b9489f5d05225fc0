"""``compile_step``: a training or rendering step under ``torch.compile``, the way the ops expect it.

Every public op (``splat.rasterize``, ``field.evaluate``, ``transforms.transform`` with prebuilt
``Frames``; ``torch`` and ``ext`` backends) traces whole with ``fullgraph=True``. Compile the forward
and the loss; call ``backward()`` on the result outside (AOTAutograd compiles the backward too).

Value checks (finite values, ranges) do not run inside a compiled graph (see
:mod:`gsworkbench.validation`); the first call of a ``compile_step`` therefore runs eagerly, so bad
inputs still raise their clear errors there.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import torch

COMPILE_MODES = ("eager", "aot_eager", "inductor")

F = TypeVar("F", bound=Callable[..., Any])


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
