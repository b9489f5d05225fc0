"""Densification strategies: adaptive density control (``default``) and MCMC, each a frozen dataclass
that owns its settings (checked from their field metadata, :mod:`gsworkbench.train.settings`) and its
refinement step; ``TrainConfig.strategy`` holds one. The running statistics a strategy keeps between
steps are a separate ``state`` dict of tensors that the trainer owns and checkpoints.

Both ``step`` methods are called once per step after the optimiser step, with the step's render ``meta`` (its
``means2d`` carries ``.grad`` and, with absgrad, ``.absgrad``, both [C,N,2] in pixels; ``radii`` [C,N]).

- :class:`DefaultStrategy` (Kerbl et al. 2023, gsplat's values): the 2D mean gradients, scaled to NDC
  (x width/2, y height/2, times the number of cameras), are averaged over the steps in which each
  Gaussian was visible. Every ``refine_every`` steps inside the refine window, Gaussians above the
  threshold are cloned (small ones, max scale <= grow_scale3d x scene scale) or split in two (larger
  ones: samples from the Gaussian, scales / 1.6); then the transparent (opacity < prune_opacity) and,
  after the first reset, the too large ones (max scale > prune_scale3d x scene scale) are pruned.
  Every ``reset_every`` steps the opacities are clamped to 2 x prune_opacity. With ``budget`` (Taming
  3DGS's densification to a budget), the threshold is not used: each refinement first prunes, then
  clones or splits the Gaussians of highest mean gradient (its score), as many as bring the count onto a
  geometric curve that meets ``budget`` exactly at the window's last refinement.
- :class:`MCMCStrategy` (Kheradmand et al. 2024): every ``refine_every`` steps the dead Gaussians
  (opacity <= min_opacity) are moved onto live ones sampled by opacity, the count grows by
  ``grow_rate`` up to ``cap_max`` (new Gaussians sampled the same way), with the opacity and scale of
  each sampled Gaussian shared among its copies so the rendered image is preserved to first order.
  Every step adds noise to the means, scaled by the covariance and large for transparent Gaussians.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from gsworkbench.core import gaussians
from gsworkbench.train.model import NAMES, SplatModel
from gsworkbench.train.settings import check_settings, setting

State = dict[str, torch.Tensor]  # a strategy's running statistics (checkpointed with the run)


def _ndc_grads(meta: dict[str, Any], absgrad: bool) -> torch.Tensor | None:
    m2 = meta["means2d"]
    g = getattr(m2, "absgrad", None) if absgrad else m2.grad
    if g is None:
        return None
    scale = g.new_tensor([meta["width"] / 2.0, meta["height"] / 2.0]) * meta["n_cameras"]
    return g.detach() * scale


def _highest(scores: torch.Tensor, among: torch.Tensor, k: int) -> torch.Tensor:
    """A mask [N] of the ``k`` highest ``scores`` [N] (non-negative) among the rows ``among`` [N] bool
    (all of them when fewer)."""
    out = torch.zeros_like(among)
    k = min(k, int(among.sum()))
    if k > 0:
        out[torch.topk(torch.where(among, scores, -1.0), k).indices] = True
    return out


@dataclass(frozen=True)
class DefaultStrategy:
    """Adaptive density control: its settings (lengths x the scene scale, steps are iterations).

    :meth:`step` refines the model in place; its running statistics live in ``state`` (gradient
    sums ``grad2d`` [N] and visibility counts ``count`` [N]), owned by the caller.
    """

    name: ClassVar[str] = "default"
    flat_aliases: ClassVar[dict[str, str]] = {}  # flat config keys that name a field otherwise

    refine_start: int = setting(500, kind="int", min=0)  # refinement runs on steps in (refine_start, refine_stop)
    refine_stop: int = setting(15_000, kind="int", min=0)
    refine_every: int = setting(100, kind="int", min=1)
    # the 2D-gradient threshold of cloning and splitting; None: 2e-4, or 8e-4 with absgrad (gsplat's values)
    grow_grad2d: float | None = setting(None, kind="number", min=0, optional=True)
    grow_scale3d: float = setting(0.01, kind="number", min=0)  # smaller Gaussians are cloned, larger split
    prune_opacity: float = setting(0.005, kind="number", min=0, max=1)
    prune_scale3d: float = setting(0.1, kind="number", min=0)  # pruned above this (after the first reset)
    reset_every: int = setting(3000, kind="int", min=1)  # opacities clamped to 2 x prune_opacity
    absgrad: bool = setting(False, kind="bool")  # accumulate the per-pixel absolute 2D-mean gradients
    max_gaussians: int | None = setting(None, kind="int", min=1, optional=True)  # growth stops here
    # grow to this count by the last refinement, the highest scores first, instead of by the threshold
    budget: int | None = setting(None, kind="int", min=1, optional=True)

    def __post_init__(self) -> None:
        check_settings(self)

    @property
    def grow_grad2d_threshold(self) -> float:
        """The 2D-gradient threshold in use (``grow_grad2d``, else by ``absgrad``)."""
        if self.grow_grad2d is not None:
            return self.grow_grad2d
        return 8e-4 if self.absgrad else 2e-4

    @property
    def wants_absgrad(self) -> bool:
        """Whether the render must accumulate ``means2d.absgrad``."""
        return self.absgrad

    def _reset_state(self, model: SplatModel, state: State) -> None:
        z = model.params["means"].new_zeros(len(model))
        state.clear()
        state.update(grad2d=z, count=z.clone())

    def step(
        self, model: SplatModel, state: State, step: int, meta: dict[str, Any], gen: torch.Generator,
        scene_scale: float,
    ) -> dict[str, int]:  # fmt: skip
        """Accumulates the step's gradients into ``state``, refines when due; returns counts of what
        changed. ``scene_scale``: world units of the scene (the 3D scale thresholds are relative to it)."""
        out = {"cloned": 0, "split": 0, "pruned": 0}
        if step >= self.refine_stop:
            return out
        if not state or state["grad2d"].shape[0] != len(model):
            self._reset_state(model, state)
        grads = _ndc_grads(meta, self.absgrad)
        if grads is not None:  # per Gaussian, sums over the cameras that see it (dense: no index lists)
            visible = meta["radii"] > 0  # [C,N]
            norms = torch.linalg.vector_norm(grads, dim=-1)
            state["grad2d"].add_(torch.where(visible, norms, 0.0).sum(0))
            state["count"].add_(visible.sum(0))
        if step > self.refine_start and step % self.refine_every == 0:
            if self.budget is None:
                out.update(self._grow(model, state, gen, scene_scale))
                out["pruned"] = self._prune(model, step, scene_scale)
            else:  # prune first, so the count after growing is the curve's
                out["pruned"] = self._prune(model, step, scene_scale, state)
                out.update(self._grow(model, state, gen, scene_scale, self.budget_growth(len(model), step)))
            self._reset_state(model, state)
        if step > 0 and step % self.reset_every == 0:
            self._reset_opacity(model)
        return out

    def budget_growth(self, count: int, step: int) -> int:
        """How many Gaussians the refinement at ``step`` adds to ``count`` under ``budget``: the count
        then follows a geometric curve, count x (budget / count)^(1/k) with k the refinements left in
        the window (this one included), so the last one lands on ``budget``; 0 when at or above it."""
        if self.budget is None or count >= self.budget or count <= 0:  # none to clone from: no curve
            return 0
        last = (self.refine_stop - 1) // self.refine_every * self.refine_every
        left = max((last - step) // self.refine_every + 1, 1)
        return max(round(count * (self.budget / count) ** (1.0 / left)) - count, 0)

    def _grow(self, model: SplatModel, state: State, gen: torch.Generator, scene_scale: float,
              n: int | None = None) -> dict[str, int]:  # fmt: skip
        """Clones or splits the Gaussians above the threshold (``n`` None) or the ``n`` of highest mean
        gradient among those seen since the last refinement; ``max_gaussians`` caps either."""
        avg = state["grad2d"] / state["count"].clamp_min(1)
        high = avg > self.grow_grad2d_threshold if n is None else _highest(avg, state["count"] > 0, n)
        if self.max_gaussians is not None:
            room = max(self.max_gaussians - len(model), 0)
            if int(high.sum()) > room:
                high = _highest(avg, high, room)
        small = gaussians.scales_from_log(model.log_scales.detach()).amax(-1) <= self.grow_scale3d * scene_scale
        clone, split = high & small, high & ~small
        n_clone, n_split = int(clone.sum()), int(split.sum())
        if n_clone:
            model.append({n: model.params[n].detach()[clone] for n in NAMES})
        if n_split:
            split = torch.cat([split, split.new_zeros(n_clone)])
            self._split(model, split, gen)
        return {"cloned": n_clone, "split": n_split}

    @staticmethod
    def _split(model: SplatModel, mask: torch.Tensor, gen: torch.Generator) -> None:
        """Replaces each masked Gaussian by two samples of it with scales / 1.6."""
        p = {n: model.params[n].detach()[mask] for n in NAMES}
        scales = gaussians.scales_from_log(p["log_scales"])
        R = gaussians.quat_to_rotmat(gaussians.quat_normalize(p["quats"]))
        noise = torch.randn((2, *scales.shape), generator=gen, dtype=scales.dtype).to(scales.device)
        samples = torch.einsum("nij,bnj->bni", R, scales * noise) + p["means"]
        rows = {n: torch.cat([p[n], p[n]]) for n in NAMES}
        rows["means"] = samples.reshape(-1, 3)
        rows["log_scales"] = gaussians.log_from_scales(scales / 1.6).repeat(2, 1)
        model.append(rows, keep=~mask)

    def _prune(self, model: SplatModel, step: int, scene_scale: float, state: State | None = None) -> int:
        """Removes the transparent and (after the first reset) the too large Gaussians; the rows of
        ``state``, if given, go with them."""
        with torch.no_grad():
            prune = gaussians.opacity_from_logit(model.opacity_logits) < self.prune_opacity
            if step > self.reset_every:
                big = gaussians.scales_from_log(model.log_scales).amax(-1) > self.prune_scale3d * scene_scale
                prune |= big
        n = int(prune.sum())
        if n:
            model.keep(~prune)
            for key in state or {}:
                state[key] = state[key][~prune]
        return n

    def _reset_opacity(self, model: SplatModel) -> None:
        with torch.no_grad():
            cap = gaussians.logit_from_opacity(torch.tensor(2 * self.prune_opacity))
            model.opacity_logits.clamp_(max=float(cap))
        model.zero_state("opacity_logits")


def relocation(
    opacities: torch.Tensor, scales: torch.Tensor, copies: torch.Tensor, n_max: int = 51
) -> tuple[torch.Tensor, torch.Tensor]:
    """Opacity and scales of each of ``copies`` [M] Gaussians that replace one with ``opacities`` [M]
    and ``scales`` [M,3] (the MCMC paper's relocation: 1 - (1 - o)^(1/n) and its scale correction)."""
    dtype = opacities.dtype
    opacities, scales = opacities.double(), scales.double()  # the alternating sum cancels heavily
    n = copies.clamp(1, n_max).to(opacities.dtype)
    new_o = 1 - (1 - opacities) ** (1 / n)
    # denominator: sum_{i=1..n} sum_{k=0..i-1} C(i-1, k) (-1)^k new_o^(k+1) / sqrt(k+1)
    i = torch.arange(1, n_max + 1, dtype=opacities.dtype, device=opacities.device)
    k = torch.arange(0, n_max, dtype=opacities.dtype, device=opacities.device)
    binom = torch.exp(torch.lgamma(i[:, None]) - torch.lgamma(k[None, :] + 1) - torch.lgamma(i[:, None] - k[None, :]))
    binom = torch.where(k[None, :] <= i[:, None] - 1, binom, torch.zeros_like(binom))  # [i, k]
    sign = (-1.0) ** k / torch.sqrt(k + 1)
    powers = new_o[:, None] ** (k[None, :] + 1)  # [M, k]
    per_i = powers @ (binom * sign).T  # [M, i]
    mask_i = i[None, :] <= n[:, None]
    denom = (per_i * mask_i).sum(-1)
    new_scales = (opacities / denom)[:, None] * scales
    return new_o.to(dtype), new_scales.to(dtype)


@dataclass(frozen=True)
class MCMCStrategy:
    """3DGS as MCMC: relocation of dead Gaussians, bounded growth, noise on the means. Its settings
    (steps are iterations); :meth:`step` keeps no running statistics (its ``state`` stays empty)."""

    name: ClassVar[str] = "mcmc"
    flat_aliases: ClassVar[dict[str, str]] = {"prune_opacity": "min_opacity"}  # the default strategy's name

    refine_start: int = setting(500, kind="int", min=0)  # relocation and growth on steps in (start, stop)
    refine_stop: int = setting(25_000, kind="int", min=0)
    refine_every: int = setting(100, kind="int", min=1)
    min_opacity: float = setting(0.005, kind="number", min=0, max=1)  # at or below: dead, relocated
    cap_max: int = setting(1_000_000, kind="int", min=1)  # growth stops at this count
    noise_lr: float = setting(5e5, kind="number", min=0)  # the means' noise, x their learning rate
    grow_rate: float = setting(0.05, kind="number", min=0)  # growth per refinement, a fraction of the count

    def __post_init__(self) -> None:
        check_settings(self)

    @property
    def wants_absgrad(self) -> bool:
        """MCMC reads no 2D-mean gradients."""
        return False

    def step(
        self, model: SplatModel, state: State, step: int, meta: dict[str, Any], gen: torch.Generator,
        scene_scale: float,
    ) -> dict[str, int]:  # fmt: skip
        """Relocates and grows when due, then adds the step's noise; returns counts of what changed.
        ``state``, ``meta`` and ``scene_scale`` are unused (the signature is :class:`DefaultStrategy`'s)."""
        out = {"relocated": 0, "added": 0}
        if self.refine_start < step < self.refine_stop and step % self.refine_every == 0:
            out["relocated"] = self._relocate(model, gen)
            out["added"] = self._add(model, gen)
        self._noise(model, gen)
        return out

    def _sample(self, weights: torch.Tensor, n: int, gen: torch.Generator) -> torch.Tensor:
        idx = torch.multinomial(weights.detach().cpu().double(), n, replacement=True, generator=gen)
        return idx.to(weights.device)

    def _replace_rows(self, model: SplatModel, sampled: torch.Tensor) -> dict[str, torch.Tensor]:
        """New opacity logits and log-scales of the sampled rows, shared with their copies."""
        with torch.no_grad():
            op = gaussians.opacity_from_logit(model.opacity_logits[sampled])
            sc = gaussians.scales_from_log(model.log_scales[sampled])
            counts = torch.bincount(sampled, minlength=len(model))[sampled] + 1
            new_o, new_s = relocation(op, sc, counts)
            eps = torch.finfo(new_o.dtype).eps
            new_o = new_o.clamp(min=self.min_opacity, max=1 - eps)
            return {
                "opacity_logits": gaussians.logit_from_opacity(new_o),
                "log_scales": gaussians.log_from_scales(new_s),
            }

    def _relocate(self, model: SplatModel, gen: torch.Generator) -> int:
        with torch.no_grad():
            op = gaussians.opacity_from_logit(model.opacity_logits)
            dead = (op <= self.min_opacity).nonzero()[:, 0]
            alive = (op > self.min_opacity).nonzero()[:, 0]
        n = int(dead.numel())
        if n == 0 or alive.numel() == 0:
            return 0
        sampled = alive[self._sample(op[alive], n, gen)]
        new = self._replace_rows(model, sampled)
        model.assign(sampled, new)
        model.assign(dead, {name: model.params[name].detach()[sampled] for name in NAMES})
        return n

    def _add(self, model: SplatModel, gen: torch.Generator) -> int:
        cur = len(model)
        target = min(self.cap_max, int(math.floor((1 + self.grow_rate) * cur)))
        n = max(target - cur, 0)
        if n == 0:
            return 0
        with torch.no_grad():
            op = gaussians.opacity_from_logit(model.opacity_logits)
        sampled = self._sample(op, n, gen)
        new = self._replace_rows(model, sampled)
        model.assign(sampled, new)
        model.append({name: model.params[name].detach()[sampled] for name in NAMES})
        return n

    def _noise(self, model: SplatModel, gen: torch.Generator) -> None:
        with torch.no_grad():
            op = gaussians.opacity_from_logit(model.opacity_logits)
            cov = model.covariances()
            gate = torch.sigmoid(100 * ((1 - op) - 0.995))  # ~1 for nearly transparent Gaussians
            noise = torch.randn(model.means.shape, generator=gen, dtype=model.means.dtype).to(model.means.device)
            noise = noise * gate[:, None] * self.noise_lr * model.lr("means")
            model.means.add_(torch.einsum("nij,nj->ni", cov, noise))


Strategy = DefaultStrategy | MCMCStrategy
STRATEGIES: dict[str, type[DefaultStrategy] | type[MCMCStrategy]] = {
    DefaultStrategy.name: DefaultStrategy,
    MCMCStrategy.name: MCMCStrategy,
}
