"""The optimisers of the splat parameters: torch's dense Adam, or an Adam that steps only the Gaussians
the step's view sees.

``TrainConfig.optimizer`` picks one (:data:`OPTIMIZERS`, built by :func:`make_optimizer`):

- ``"adam"`` (the default): ``torch.optim.Adam`` with its fused kernel (one pass over each parameter
  group). Dense: every row's moments decay and every row moves each step, whether its Gaussian was
  seen or not (an unseen one keeps drifting on its momentum).
- ``"visible_adam"``: :class:`VisibleAdam`. Rows whose Gaussian is not visible in the step's view
  (``radii == 0`` in every camera of the step) keep their parameters and both moments exactly as they
  were; visible rows get torch's Adam update. Bias correction uses one step count per parameter group,
  advanced every step (the count ``torch.optim.SparseAdam``, the "lazy Adam", keeps), so with every
  row visible a step is ``torch.optim.Adam``'s to the bit, and with a fixed set of visible rows it is
  dense Adam run on those rows alone. A row first seen late gets the correction of the group's count,
  not of the steps it was seen.
- ``"selective_adam"``: gsplat's ``SelectiveAdam`` (from Taming 3DGS; gsplat's ``visible_adam`` option):
  the same visibility rule with *no* bias correction, as gsplat's kernel does (it updates the moments
  and steps by ``lr * m / (sqrt(v) + eps)``, and never advances a step count).

Gradients that reach unseen Gaussians from outside the render (the MCMC opacity and scale
regularisers) are dropped by the visible variants, as in gsplat. Every variant keeps torch Adam's
state layout (``step``, ``exp_avg``, ``exp_avg_sq`` per parameter), so checkpoints load across them and
:class:`gsworkbench.train.model.SplatModel`'s row operations (densification) keep the moments row for
row. On the CPU the visible variants are never faster than the fused dense step (they add gathers and
scatters of rows around the same fused kernel); what they change is which rows move.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch.optim.adam import adam as adam_update  # torch's functional Adam (public: torch.optim.adam.__all__)

OPTIMIZERS = ("adam", "visible_adam", "selective_adam")
# A step count large enough that beta**t underflows to 0 in double precision for any beta <= 0.999
# (0.999**1e6 = e**-1000.5 < 5e-324), so both of the fused kernel's bias corrections are exactly 1.
# Exact in float32, the dtype of a fused step count.
NO_BIAS_CORRECTION_STEP = 1e6
# Below this share of visible rows, the visible rows are gathered and stepped alone; at or above
# it, the invisible rows are saved, all rows stepped, and the saved rows put back (less copying).
GATHER_BELOW = 0.5


def visible_rows(radii: torch.Tensor) -> torch.Tensor:
    """[N] bool: the Gaussians seen by at least one camera of a step, from ``rasterize``'s ``meta["radii"]``
    ([C,N] pixels, 0 where culled; or [C,N,2] per axis, where both must be > 0, as in gsplat)."""
    seen = radii > 0
    if seen.dim() == 3:
        seen = seen.all(-1)
    return seen.any(0)


class VisibleAdam(torch.optim.Adam):
    """Adam that updates only the rows (first dimension: Gaussians) flagged in ``step(visible)``.

    Parameters must share their first dimension N. ``bias_correction=False`` is gsplat's
    SelectiveAdam update (no bias correction). ``step()`` without a mask, or with every row visible,
    is ``torch.optim.Adam``'s step. Uses torch's fused Adam kernel (CPU and CUDA)."""

    def __init__(
        self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
        bias_correction: bool = True,
    ) -> None:  # fmt: skip
        super().__init__(params, lr=lr, betas=betas, eps=eps, fused=True)
        self.bias_correction = bias_correction
        for g in self.param_groups:
            if not bias_correction and not max(g["betas"]) <= 0.999:
                raise ValueError(f"VisibleAdam(bias_correction=False) needs betas <= 0.999, got {g['betas']}")

    @torch.no_grad()
    def step(self, visible: torch.Tensor | None = None, closure: Any = None) -> None:  # type: ignore[override]
        """One step. ``visible``: [N] bool (see :func:`visible_rows`), or None for every row."""
        if closure is not None:
            raise ValueError("VisibleAdam.step takes no closure")
        if visible is not None:
            visible = visible.to(torch.bool).reshape(-1)
            for g in self.param_groups:
                for p in g["params"]:
                    if p.shape[:1] != visible.shape:
                        raise ValueError(f"visible has {visible.shape[0]} rows, a parameter {tuple(p.shape)}")
        if self.bias_correction and (visible is None or bool(visible.all())):
            super().step()
            return
        first = next(p for g in self.param_groups for p in g["params"])
        if visible is None:
            visible = torch.ones(first.shape[0], dtype=torch.bool, device=first.device)
        rows = visible.nonzero().squeeze(1)  # [V] the visible rows
        gather = rows.numel() < GATHER_BELOW * visible.numel()
        hidden = None if gather else (~visible).nonzero().squeeze(1)  # [N - V]
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is not None:
                    self._step_param(p, g, rows if gather else None, hidden)

    def _state(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        state = self.state[p]
        if not state:  # torch's fused Adam layout: a float32 step count on the parameter's device
            state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        return state

    def _step_param(
        self, p: torch.Tensor, group: dict[str, Any], gather: torch.Tensor | None, hidden: torch.Tensor | None
    ) -> None:
        """Steps rows ``gather`` of ``p`` alone (copied out and back), or all rows but ``hidden`` (all
        stepped, then rows ``hidden`` of the parameter and its moments put back)."""
        state = self._state(p)
        m, v, step = state["exp_avg"], state["exp_avg_sq"], state["step"]
        if gather is not None:
            x, grad, mg, vg = (t.index_select(0, gather) for t in (p, p.grad, m, v))
        else:
            x, grad, mg, vg = p, p.grad, m, v
            saved = [t.index_select(0, hidden) for t in (p, m, v)]
        # the group's count advances once per step either way (unused without bias correction: the kernel
        # then gets a count whose corrections are exactly 1), so checkpoints record the steps taken
        count = step if self.bias_correction else torch.full_like(step, NO_BIAS_CORRECTION_STEP)
        b1, b2 = group["betas"]
        adam_update([x], [grad], [mg], [vg], [], [count], fused=True, amsgrad=False, beta1=b1, beta2=b2,
                    lr=group["lr"], weight_decay=0.0, eps=group["eps"], maximize=False)  # fmt: skip
        if not self.bias_correction:
            step += 1
        if gather is not None:
            for dst, src in zip((p, m, v), (x, mg, vg)):
                dst.index_copy_(0, gather, src)
        else:
            for dst, src in zip((p, m, v), saved):
                dst.index_copy_(0, hidden, src)


def make_optimizer(groups: list[dict[str, Any]], eps: float, kind: str = "adam") -> torch.optim.Optimizer:
    """The optimiser ``kind`` (:data:`OPTIMIZERS`) over parameter ``groups`` (torch's param-group dicts)."""
    if kind not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {kind!r}")
    if kind == "adam":
        device = groups[0]["params"][0].device.type
        return torch.optim.Adam(groups, eps=eps, fused=device in ("cpu", "cuda"))
    return VisibleAdam(groups, eps=eps, bias_correction=kind == "visible_adam")


def optimizer_step(optimizer: torch.optim.Optimizer, radii: torch.Tensor | None) -> None:
    """One step of ``optimizer``: a :class:`VisibleAdam` gets the rows seen in ``radii`` (``meta["radii"]``)."""
    if isinstance(optimizer, VisibleAdam) and radii is not None:
        optimizer.step(visible_rows(radii))
    else:
        optimizer.step()


def adam_step_bytes(elements: int, itemsize: int = 4) -> int:
    """The least memory traffic of one Adam step over ``elements`` parameter values: the parameter, its
    gradient and both moments read, the parameter and both moments written (7 values of ``itemsize``
    bytes each), what a fused single-pass kernel moves. Left out: the extra passes of the ``foreach`` and
    per-tensor paths (each reads and writes intermediates), :class:`VisibleAdam`'s visibility mask and
    its gathers and scatters of rows, and the per-group step counts."""
    return 7 * itemsize * elements
