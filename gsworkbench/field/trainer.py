"""Fits a :class:`GaussianField` to a target volume with Adam; history, checkpoints, held-out error."""

from __future__ import annotations

import io
import os
import pickle
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from gsworkbench.core.atomic import atomic_write_bytes
from gsworkbench.core.compile import COMPILE_MODES, compile_step
from gsworkbench.field.module import GaussianField
from gsworkbench.field.targets import Target


@dataclass
class FieldTrainConfig:
    """The field trainer's settings (the 3DGS trainer's are :class:`gsworkbench.train.TrainConfig`).
    Learning rates are per parameter group (means, factors, weights)."""

    iterations: int = 500
    batch_size: int = 4096
    lr_means: float = 5e-3
    lr_factors: float = 1e-2
    lr_weights: float = 2e-2
    seed: int = 0
    eval_points: int = 8192
    progress: bool = True
    # torch.compile the model + loss (backward and Adam stay eager): False, True (inductor) or a
    # backend name ("aot_eager", "inductor"); see gsworkbench.core.compile.compile_step
    compile: bool | str = False

    def __post_init__(self) -> None:
        for name in ("iterations", "batch_size", "eval_points"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < (0 if name == "iterations" else 1):
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        for name in ("lr_means", "lr_factors", "lr_weights"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if not (isinstance(self.compile, bool) or self.compile in COMPILE_MODES):
            raise ValueError(f"compile must be a bool or one of {', '.join(COMPILE_MODES)}; got {self.compile!r}")


@dataclass
class TrainResult:
    """``history``: one row per iteration (iteration, loss, time_s); ``final_error``: relative RMSE on
    held-out points; ``final_loss``: MSE on them."""

    history: pd.DataFrame
    final_error: float
    final_loss: float
    config: dict[str, Any] = field(default_factory=dict)


def _optimizer(model: GaussianField, cfg: FieldTrainConfig) -> torch.optim.Adam:
    factors = model.raw_factors if model.covariance == "full" else model.log_scales
    return torch.optim.Adam(
        [
            {"params": [model.means], "lr": cfg.lr_means, "name": "means"},
            {"params": [factors], "lr": cfg.lr_factors, "name": "factors"},
            {"params": [model.weights], "lr": cfg.lr_weights, "name": "weights"},
        ]
    )


class FieldTrainStep:
    """One training step per call: sample ``batch_size`` points of the target (from ``gen``, on the
    model's device), the MSE of the model there (compiled per ``config.compile``), backward, Adam.
    Returns the loss, detached. :func:`train_field` loops over it; the ``field`` benchmark suite times it.
    """

    def __init__(
        self, model: GaussianField, target: Target, config: FieldTrainConfig, gen: torch.Generator | None = None
    ):
        self.model, self.target, self.config = model, target, config
        self.optimizer = _optimizer(model, config)
        self.gen = gen if gen is not None else torch.Generator().manual_seed(config.seed)

        def mse(pts: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
            return torch.mean((model(pts) - ref) ** 2)

        self.loss_fn = compile_step(mse, config.compile)

    def __call__(self) -> torch.Tensor:
        m = self.model.means
        pts = self.target.sample(self.config.batch_size, self.gen, dtype=m.dtype, device=m.device)
        loss = self.loss_fn(pts, self.target(pts))
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return loss.detach()


def held_out_error(model: GaussianField, target: Target, n: int = 8192, seed: int = 12345) -> tuple[float, float]:
    """(relative RMSE, MSE) of the field against the target on ``n`` fresh points (on the model's device)."""
    g = torch.Generator().manual_seed(seed)
    pts = target.sample(n, g, dtype=model.means.dtype, device=model.means.device)
    with torch.no_grad():
        pred, ref = model(pts), target(pts)
    mse = float(((pred - ref) ** 2).mean())
    return mse**0.5 / max(float((ref**2).mean()) ** 0.5, 1e-30), mse


def train_field(
    model: GaussianField,
    target: Target,
    config: FieldTrainConfig | None = None,
    *,
    checkpoint: str | os.PathLike[str] | None = None,
    resume: bool = False,
) -> TrainResult:
    """Trains ``model`` in place: each step samples ``batch_size`` points and minimises the MSE.

    Training runs on the model's device (``model.to("cuda")`` trains on the GPU): the points are drawn
    from the CPU generator (same points for a seed on every device) and moved there.
    With ``checkpoint``, the final state is saved there (atomically); with ``resume`` too, training
    starts from that file's state when it exists and runs up to ``config.iterations`` in total.
    """
    from tqdm.auto import tqdm  # a widget in a notebook (as the splat trainer's), text in a terminal

    cfg = config or FieldTrainConfig()
    step = FieldTrainStep(model, target, cfg)
    start, rows = 0, []
    if resume and checkpoint is not None and Path(checkpoint).exists():
        state = load_checkpoint(checkpoint, model, step.optimizer)
        start, rows = state["iteration"], state["history"]
    step.gen.manual_seed(cfg.seed + start)
    bar = tqdm(range(start, cfg.iterations), disable=not cfg.progress, desc="train", mininterval=1.0)
    for it in bar:
        t0 = time.perf_counter()
        loss = step()
        dt = time.perf_counter() - t0
        value = float(loss)
        if value != value or value in (float("inf"), float("-inf")):
            raise FloatingPointError(f"training diverged at iteration {it}: loss is {value}; lower the learning rates")
        rows.append({"iteration": it, "loss": value, "time_s": dt})
        if it % 20 == 0:
            bar.set_postfix(loss=f"{value:.3e}")
    history = pd.DataFrame(rows, columns=["iteration", "loss", "time_s"])
    if checkpoint is not None:
        save_checkpoint(checkpoint, model, step.optimizer, cfg.iterations, history.to_dict("records"))
    err, mse = held_out_error(model, target, cfg.eval_points)
    return TrainResult(history, err, mse, asdict(cfg))


def save_checkpoint(
    path: str | os.PathLike[str],
    model: GaussianField,
    optimizer: torch.optim.Optimizer | None = None,
    iteration: int = 0,
    history: list[dict[str, Any]] | None = None,
) -> Path:
    """Atomically writes model (+ optimizer) state, its settings, the iteration and the history: tensors and
    plain Python data only, so that :func:`load_checkpoint` reads it with ``torch.load(weights_only=True)``."""
    buf = io.BytesIO()
    torch.save(
        {
            "model": model.state_dict(),
            "settings": {
                "num_gaussians": model.num_gaussians,
                "covariance": model.covariance,
                "volume_size": model.volume_size,
                "backend": model.backend,
            },
            "optimizer": optimizer.state_dict() if optimizer is not None else None,
            "iteration": iteration,
            "history": history or [],
        },
        buf,
    )
    return atomic_write_bytes(path, buf.getvalue())


def load_checkpoint(
    path: str | os.PathLike[str],
    model: GaussianField | None = None,
    optimizer: torch.optim.Optimizer | None = None,
) -> dict[str, Any]:
    """Loads a checkpoint; fills ``model``/``optimizer`` when given, else builds the model.

    Returns the checkpoint dict with ``"model"`` replaced by the (loaded) module.
    """
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)  # tensors and plain data only
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError) as err:
        raise ValueError(f"cannot read checkpoint {path}: {err}") from err
    if not isinstance(state, dict) or "model" not in state or "settings" not in state:
        raise ValueError(f"{path} is not a gsworkbench field checkpoint")
    s = state["settings"]
    if model is None:
        model = GaussianField(s["num_gaussians"], s["covariance"], s["volume_size"], s["backend"])
    model.load_state_dict(state["model"])
    if optimizer is not None and state.get("optimizer") is not None:
        optimizer.load_state_dict(state["optimizer"])
    return {**state, "model": model}
