"""Measurements behind the field notebook: per-iteration training time by backend."""

from __future__ import annotations

import time

import pandas as pd
import torch

from gsworkbench.field.module import GaussianField
from gsworkbench.field.targets import Target
from gsworkbench.field.trainer import TrainConfig, _optimizer


def step_times(
    target: Target,
    num_gaussians: int,
    covariance: str,
    batch_size: int,
    backends: list[str],
    steps: int = 5,
    seed: int = 0,
) -> pd.DataFrame:
    """Seconds per training step (forward + backward + Adam) for each backend, ``steps`` each.

    Returns one row per (backend, step) with columns backend, step, time_s, threads.
    """
    rows = []
    cfg = TrainConfig(iterations=steps, batch_size=batch_size, seed=seed, progress=False)
    for backend in backends:
        model = GaussianField(num_gaussians, covariance, backend=backend, seed=seed)
        opt = _optimizer(model, cfg)
        gen = torch.Generator().manual_seed(seed)
        for step in range(steps + 1):  # step 0 is a warm-up, not recorded
            t0 = time.perf_counter()
            pts = target.sample(batch_size, gen)
            loss = torch.mean((model(pts) - target(pts)) ** 2)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if step:
                rows.append(
                    {
                        "backend": backend,
                        "step": step,
                        "time_s": time.perf_counter() - t0,
                        "threads": torch.get_num_threads(),
                    }
                )
    return pd.DataFrame(rows)


def summarize_step_times(times: pd.DataFrame) -> pd.DataFrame:
    """Per backend: median and IQR of the step time, and the speedup over ``loop`` (when timed)."""
    g = times.groupby("backend", sort=False).time_s
    out = pd.DataFrame({"median_s": g.median(), "iqr_s": g.quantile(0.75) - g.quantile(0.25)})
    out["speedup_vs_loop"] = out.median_s.get("loop", float("nan")) / out.median_s
    out["threads"] = times.groupby("backend", sort=False).threads.first()
    return out.reset_index()
