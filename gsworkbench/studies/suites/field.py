"""``gsworkbench bench field``: forward and forward+backward of every field backend.

Sizes: N = 100 and 1000 Gaussians x B = 500 points, and N = 1000 x B = 5000, each with full and
diagonal covariance, for all backends; N = 4096 x B = 65536 for ``torch``, ``numba`` and ``ext`` only.
N = 1000 x B = 5000 (full covariance) also runs ``torch`` and ``ext`` under torch.compile
(``compile``: aot_eager, inductor; quick: ext forward+backward under aot_eager), interleaved with the
eager runs. Mode ``train-step`` is one training step of a GaussianField (the trainer's own
:class:`~gsworkbench.field.FieldTrainStep`: sample B points of the ``shell`` target, MSE, backward,
Adam) at N = 1000 x B = 5000, full covariance (quick: N = 100 x B = 200); :func:`train_step_cases`
gives such cases for any target and size (the field notebook's timings). The summary adds pairs per
second and the speedups over ``vectorized``, ``loop`` and ``numba`` (eager) and over the same backend
eager, measured in the same run; ``numba`` is the fused numba peer (:mod:`gsworkbench.field._numba_impl`),
and the ext rows' ``speedup_vs_numba`` is the field's headline ratio. Each forward and
forward+backward row carries the field's work count (``flops_per_call``, ``bytes_per_call``:
:func:`gsworkbench.field.ops.field_work`, the ext kernels' pair work, against which every backend is
judged) for the roofline columns.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import torch

from gsworkbench._ext import has_ext
from gsworkbench.bench.registry import Case, Prepared, register_suite
from gsworkbench.core.compile import COMPILE_MODES, compile_step
from gsworkbench.core.limits import memory_budget
from gsworkbench.field import BACKENDS, FieldTrainConfig, FieldTrainStep, GaussianField, evaluate, make_target
from gsworkbench.field._torch_impl import vectorized_bytes
from gsworkbench.field.api import random_field_inputs
from gsworkbench.field.ops import field_work
from gsworkbench.field.targets import Target


def _compile_numba(backend: str) -> None:
    """numba's compilation stays out of the timings."""
    if backend == "numba":
        from gsworkbench.field._numba_impl import warm_up

        warm_up()


def _make(
    B: int, N: int, covariance: str, backend: str, mode: str, compile_mode: str = "eager"
) -> Callable[[], Prepared]:
    def setup() -> Prepared:
        inputs = random_field_inputs(B, N, covariance)
        _compile_numba(backend)

        def field(*ts: torch.Tensor) -> torch.Tensor:
            return evaluate(*ts, covariance=covariance, backend=backend)

        compiled = compile_step(field, compile_mode, eager_first_call=False)
        if mode == "forward":

            def run() -> object:
                with torch.no_grad():
                    return compiled(*inputs)

            fn = run
        else:
            leaves = [t.clone().requires_grad_() for t in inputs]
            grad = torch.ones(B)

            def run_fb() -> object:
                for t in leaves:
                    t.grad = None
                compiled(*leaves).backward(grad)
                return leaves[0].grad

            fn = run_fb
        if compile_mode != "eager":  # compilation stays out of the timings
            fn()
            fn()
        return Prepared(fn, field_work(B, N, mode))

    return setup


def _train_step_setup(
    target: Target, N: int, B: int, covariance: str, backend: str, seed: int
) -> Callable[[], Prepared]:
    def setup() -> Prepared:
        _compile_numba(backend)
        model = GaussianField(N, covariance, backend=backend, seed=seed)
        step = FieldTrainStep(model, target, FieldTrainConfig(batch_size=B, seed=seed, progress=False))
        return Prepared(step)

    return setup


def train_step_cases(
    target: Target, num_gaussians: int, covariance: str, batch_size: int, backends: list[str] | tuple[str, ...],
    seed: int = 0,
) -> list[Case]:  # fmt: skip
    """One ``train-step`` case per backend: a training step of a ``num_gaussians`` field on
    ``batch_size`` points of ``target`` (timed interleaved, as they differ only in the backend)."""
    N, B = num_gaussians, batch_size
    out = []
    for backend in backends:
        params = {"backend": backend, "N": N, "B": B, "covariance": covariance, "mode": "train-step",
                  "compile": "eager"}  # fmt: skip
        setup = _train_step_setup(target, N, B, covariance, backend, seed)
        out.append(Case(f"field/{backend}/N{N}/B{B}/{covariance}/train-step", params, setup, _skip(backend, B, N)))
    return out


def _skip(backend: str, B: int, N: int) -> str | None:
    if backend == "ext" and not has_ext():
        return "extension not built"
    if backend == "vectorized" and vectorized_bytes(B, N, 4) > memory_budget():
        return "over the memory budget"
    return None


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Adds pairs/s and speedups over vectorized, loop and numba within each (N, B, covariance, mode)."""
    if "median_s" not in df:
        return df
    df = df.copy()
    df["pairs_per_s"] = df.N * df.B / df.median_s
    if "compile" not in df:
        df["compile"] = "eager"
    keys = ["N", "B", "covariance", "mode"]
    eager = df[df.compile == "eager"]
    for base in ("vectorized", "loop", "numba"):
        ref = eager[eager.backend == base].set_index(keys).median_s.rename(f"_{base}")
        df = df.join(ref, on=keys)
        df[f"speedup_vs_{base}"] = df[f"_{base}"] / df.median_s
        df = df.drop(columns=f"_{base}")
    ref = eager.set_index([*keys, "backend"]).median_s.rename("_eager")
    df = df.join(ref, on=[*keys, "backend"])
    df["speedup_vs_eager"] = df._eager / df.median_s
    df = df.drop(columns="_eager")
    df["iqr_pct"] = 100 * df.iqr_s / df.median_s
    return df


@register_suite("field", "Gaussian field: forward and forward+backward per backend", summarize)
def cases(quick: bool) -> list[Case]:
    # torch.compile variants (compile_step, fullgraph) of the field step, timed interleaved with eager
    if quick:
        sizes = [(100, 200, BACKENDS)]
        compiled = {(100, 200, "full", "forward+backward", "ext"): ("aot_eager",)}
    else:
        sizes = [(100, 500, BACKENDS), (1000, 500, BACKENDS), (1000, 5000, BACKENDS),
                 (4096, 65536, ("torch", "numba", "ext"))]  # fmt: skip
        compiled = {(1000, 5000, "full", m, b): COMPILE_MODES[1:] for m in ("forward", "forward+backward")
                    for b in ("torch", "ext")}  # fmt: skip
    out = []
    for N, B, backends in sizes:
        for covariance in ("full", "diag"):
            if N == 4096 and covariance == "diag":
                continue  # the large size is specified for full covariance
            for mode in ("forward", "forward+backward"):
                for backend in backends:
                    for cm in compiled.get((N, B, covariance, mode, backend), ()) + ("eager",):
                        params = {"backend": backend, "N": N, "B": B, "covariance": covariance, "mode": mode,
                                  "compile": cm}  # fmt: skip
                        name = f"field/{backend}/N{N}/B{B}/{covariance}/{mode}" + (f"/{cm}" if cm != "eager" else "")
                        setup = _make(B, N, covariance, backend, mode, cm)
                        out.append(Case(name, params, setup, _skip(backend, B, N)))
    N, B = (100, 200) if quick else (1000, 5000)
    return out + train_step_cases(make_target("shell"), N, "full", B, BACKENDS)
