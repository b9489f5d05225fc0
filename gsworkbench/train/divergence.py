"""Catching a diverging training run early, with one message that says what blew up and why.

:class:`DivergenceMonitor` looks at the parameters (and their gradients) every ``check_every`` steps,
and at every step's loss. A run has diverged when

- a parameter or its gradient holds NaN or inf (checked after the backward pass, before Adam uses it);
- the log-scales grow so large that the activated scales overflow float32 (exp(88) is inf);
- the Gaussians' means leave the scene: their median distance from the cameras' centroid exceeds
  ``bounds_factor`` times the larger of the scene scale and that median at the start (random starts
  lie within 3 scene scales; a capture's point cloud may lie further out than its cameras' extent);
- the loss blows up: smoothed over about 50 steps, it stays above ``blowup_factor`` (20) times its
  lowest smoothed value (watched from the ``BLOWUP_WARMUP``-th step on), or above ``loss_ceiling``
  (watched from the first step), for ``blowup_patience`` (20) steps in a row. A runaway colour rate
  sends the loss from 0.08 to 20-40 within a few steps, the first one included; an opacity reset
  raises the smoothed loss by a few times at most. The trainer's ceiling is twice the largest
  photometric loss of a render within [0, 1], ``2 (1 + ssim_lambda)``: only colours far outside that
  range go above it;
- the loss, smoothed over about 50 steps, stays above ``loss_factor`` times its lowest smoothed value
  for ``patience`` steps in a row (1,000: an opacity reset raises it for a few hundred steps only),
  watched from step 100.

The smoothed loss is an exponential average with Adam's bias correction: from the first step on it is
a weighted mean of the losses so far, not the first step's loss alone.

It raises :class:`TrainingDiverged`, naming the step, the parameter at fault, and the learning rate
that most likely caused it: for a blow-up of the loss, the parameter whose largest magnitude grew the
most since the first step. The check costs one small reduction per parameter and one device sync.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from gsworkbench.core.validation import value_stats

# The parameter whose runaway values a learning rate explains, and that rate's TrainConfig field.
LEARNING_RATE_OF = {
    "means": "lr_means",
    "quats": "lr_quats",
    "log_scales": "lr_scales",
    "opacity_logits": "lr_opacities",
    "sh_dc": "lr_sh0",
    "sh_rest": "lr_shN",
}
LOG_SCALE_MAX = 80.0  # exp(80) ~ 5.5e34: still finite in float32, and no real scene comes near it
BLOWUP_WARMUP = 5  # steps: the smoothed loss then averages several views, not one view's loss
SMOOTHING = 0.98  # the loss average's decay per step (about 50 steps)
GROWTH_SUSPECT = 10.0  # a parameter whose magnitude grew this much (or more) is named as the cause


class TrainingDiverged(FloatingPointError):
    """Training blew up: ``step``, ``what`` (a short description) and the run's partial ``files``."""

    def __init__(self, message: str, step: int, what: str) -> None:
        super().__init__(message)
        self.step = step
        self.what = what
        self.files: dict[str, object] = {}


class DivergenceMonitor:
    """Checks a run for divergence; see the module docstring. ``center`` [3] and ``scene_scale`` (world
    units) place the scene, ``means`` [N,3] are the starting means; ``lrs`` maps the TrainConfig
    learning-rate fields to their values."""

    def __init__(
        self,
        center: torch.Tensor,
        scene_scale: float,
        means: torch.Tensor,
        lrs: Mapping[str, float],
        *,
        check_every: int = 10,
        bounds_factor: float = 100.0,
        loss_factor: float = 3.0,
        patience: int = 1000,
        blowup_factor: float = 20.0,
        blowup_patience: int = 20,
        loss_ceiling: float = math.inf,
    ) -> None:
        self.center = center.detach().float().reshape(1, 3).to(means.device)
        self.bounds_factor = bounds_factor
        self.reference = max(float(scene_scale), float(self._spread(means.detach())), 1e-6)
        self.limit = bounds_factor * self.reference
        self.lrs = dict(lrs)
        self.check_every = check_every
        self.loss_factor = loss_factor
        self.patience = patience
        self.blowup_factor = blowup_factor
        self.blowup_patience = blowup_patience
        self.loss_ceiling = loss_ceiling
        self.ema: float | None = None  # the smoothed loss (bias-corrected)
        self._avg, self._weight, self._seen = 0.0, 0.0, 0
        self.best = math.inf  # the lowest smoothed loss from step 100 (the slow rise)
        self.lowest = math.inf  # the lowest smoothed loss from BLOWUP_WARMUP losses on (the blow-up)
        self.high_steps = 0
        self.blowup_steps = 0
        self.start: dict[str, float] | None = None  # each parameter's largest magnitude at the first step
        self.start_loss = math.inf  # the first step's loss

    def _spread(self, means: torch.Tensor) -> float | torch.Tensor:
        """The median distance of ``means`` from the centre (a 0-dim tensor; 0.0 when empty)."""
        return (means.float() - self.center).norm(dim=1).median() if len(means) else 0.0

    def _fail(self, step: int, what: str, param: str | None, detail: str = "") -> TrainingDiverged:
        hint = "check the inputs and learning rates"
        if param is not None:
            lr = LEARNING_RATE_OF[param]
            hint = f"the learning rate {lr}={self.lrs.get(lr, '?'):g} is likely too high"
        msg = f"training diverged at step {step}: {what}{detail}; {hint}"
        return TrainingDiverged(msg, step, what)

    def check_loss(self, step: int, loss: float, params: Mapping[str, torch.Tensor] | None = None) -> None:
        """After each step's forward pass: a non-finite loss, one that blows up, or one that keeps rising.
        ``params`` (the parameters by name) name the cause of a blow-up."""
        if not math.isfinite(loss):
            raise self._fail(step, f"the loss is {loss}", None, " (a NaN or inf in the render or its inputs)")
        if params is not None and self.start is None:
            self.start = _magnitudes(params)
        if self._seen == 0:
            self.start_loss = loss
        self._avg = SMOOTHING * self._avg + (1 - SMOOTHING) * loss
        self._weight = SMOOTHING * self._weight + (1 - SMOOTHING)
        self._seen += 1
        self.ema = self._avg / self._weight
        if self._seen >= BLOWUP_WARMUP:
            self.lowest = min(self.lowest, self.ema)
        high = self.ema > self.blowup_factor * self.lowest or self.ema > self.loss_ceiling
        self.blowup_steps = self.blowup_steps + 1 if high else 0
        if self.blowup_steps >= self.blowup_patience:
            param, detail = self._grown(params)
            low = min(self.lowest, self.start_loss)
            raise self._fail(step, f"the loss blew up from {low:.4g} to {self.ema:.4g} (smoothed)", param, detail)
        if step < 100:  # the slow rule compares with the loss of a trained-in model
            return
        self.best = min(self.best, self.ema)
        self.high_steps = self.high_steps + 1 if self.ema > self.loss_factor * self.best else 0
        if self.high_steps >= self.patience:
            raise self._fail(
                step,
                f"the loss rose from {self.best:.4g} to {self.ema:.4g} (smoothed) and stayed there for "
                f"{self.patience} steps",
                None,
            )

    def _grown(self, params: Mapping[str, torch.Tensor] | None) -> tuple[str | None, str]:
        """The parameter whose largest magnitude grew the most since the first step (None when none grew
        ``GROWTH_SUSPECT`` times), and a few words on it."""
        if params is None or self.start is None:
            return None, ""
        now = _magnitudes(params)
        # magnitudes are O(1) in each parameter's units (logits, log-scales, SH), so +1 keeps a
        # parameter that starts at zero (sh_rest) comparable
        growth = {n: (now[n] + 1.0) / (self.start[n] + 1.0) for n in now if n in self.start and n in LEARNING_RATE_OF}
        if not growth:
            return None, ""
        name = max(growth, key=lambda n: growth[n])
        if not growth[name] >= GROWTH_SUSPECT:
            return None, ""
        return name, f"; {name} grew from |{self.start[name]:.3g}| to |{now[name]:.3g}| at most"

    def check_params(self, step: int, params: Mapping[str, torch.Tensor], force: bool = False) -> None:
        """After the backward pass, every ``check_every`` steps (or when ``force``): non-finite
        parameters or gradients, overflowing scales, means far outside the scene."""
        if not force and step % self.check_every:
            return
        names = list(params)
        grads = [n for n in names if params[n].grad is not None]
        with torch.no_grad():
            # one pass over every parameter and gradient (finite, min, max; the extension's tensor_stats
            # on the CPU): no |x| temporaries, which cost about 200 MB per check at 10^6 Gaussians
            rows = value_stats([params[n].detach() for n in names] + [params[n].grad for n in grads])
            spread = float(self._spread(params["means"].detach()))
        for n, (finite, _, _) in zip(names, rows[: len(names)]):
            if not finite:
                raise self._fail(step, f"{n} became {_nan_or_inf(params[n])}", n)
        for n, (finite, _, _) in zip(grads, rows[len(names) :]):
            if not finite:
                raise self._fail(step, f"the gradient of {n} is {_nan_or_inf(params[n].grad)}", n)
        max_log_scale = rows[names.index("log_scales")][2] if params["log_scales"].numel() else 0.0
        if max_log_scale > LOG_SCALE_MAX:
            raise self._fail(
                step, f"log_scales reached {max_log_scale:.3g} (scales of exp({max_log_scale:.0f}))", "log_scales"
            )
        if spread > self.limit:
            raise self._fail(
                step,
                f"the means left the scene: their median distance from its centre is {spread:.3g}, over "
                f"{self.limit:.3g} ({self.bounds_factor:g}x the scene's size, {self.reference:.3g})",
                "means",
            )


def _magnitudes(params: Mapping[str, torch.Tensor]) -> dict[str, float]:
    """Each parameter's largest magnitude max |x| (0 for an empty one; inf when not finite)."""
    with torch.no_grad():
        rows = value_stats([params[n].detach() for n in params])
    out = {}
    for n, (finite, lo, hi) in zip(params, rows):
        out[n] = math.inf if not finite else 0.0 if lo > hi else max(abs(lo), abs(hi))  # lo > hi: empty
    return out


def _nan_or_inf(t: torch.Tensor) -> str:
    """'NaN' when ``t`` holds a NaN, else 'inf' (for the message about a tensor known not finite)."""
    return "NaN" if bool(torch.isnan(t.detach()).any()) else "inf"
