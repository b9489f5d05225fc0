"""Densification strategies: adaptive density control (``default``) and MCMC.

Both are called once per step after the optimiser step, with the step's render ``meta`` (its
``means2d`` carries ``.grad`` and, with absgrad, ``.absgrad``, both [C,N,2] in pixels; ``radii`` [C,N]).

- :class:`DefaultStrategy` (Kerbl et al. 2023, gsplat's values): the 2D mean gradients, scaled to NDC
  (x width/2, y height/2, times the number of cameras), are averaged over the steps in which each
  Gaussian was visible. Every ``refine_every`` steps inside the refine window, Gaussians above the
  threshold are cloned (small ones, max scale <= grow_scale3d x scene scale) or split in two (larger
  ones: samples from the Gaussian, scales / 1.6); then the transparent (opacity < prune_opacity) and,
  after the first reset, the too large ones (max scale > prune_scale3d x scene scale) are pruned.
  Every ``reset_every`` steps the opacities are clamped to 2 x prune_opacity.
- :class:`MCMCStrategy` (Kheradmand et al. 2024): every ``refine_every`` steps the dead Gaussians
  (opacity <= prune_opacity) are moved onto live ones sampled by opacity, the count grows by
  ``grow_rate`` up to ``cap_max`` (new Gaussians sampled the same way), with the opacity and scale of
  each sampled Gaussian shared among its copies so the rendered image is preserved to first order.
  Every step adds noise to the means, scaled by the covariance and large for transparent Gaussians.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from gsworkbench import gaussians
from gsworkbench.train.config import TrainConfig
from gsworkbench.train.model import NAMES, SplatModel


def _ndc_grads(meta: dict[str, Any], absgrad: bool) -> torch.Tensor | None:
    m2 = meta["means2d"]
    g = getattr(m2, "absgrad", None) if absgrad else m2.grad
    if g is None:
        return None
    scale = g.new_tensor([meta["width"] / 2.0, meta["height"] / 2.0]) * meta["n_cameras"]
    return g.detach() * scale


class DefaultStrategy:
    """Adaptive density control; ``state`` holds the gradient sums (``grad2d`` [N]) and counts."""

    def __init__(self, cfg: TrainConfig, scene_scale: float) -> None:
        self.cfg = cfg
        self.scene_scale = scene_scale
        self.state: dict[str, torch.Tensor] = {}

    def _reset_state(self, model: SplatModel) -> None:
        z = model.params["means"].new_zeros(len(model))
        self.state = {"grad2d": z, "count": z.clone()}

    def step(self, model: SplatModel, step: int, meta: dict[str, Any], gen: torch.Generator) -> dict[str, int]:
        """Accumulates the step's gradients, refines when due; returns counts of what changed."""
        cfg = self.cfg
        out = {"cloned": 0, "split": 0, "pruned": 0}
        if step >= cfg.refine_stop_step:
            return out
        if not self.state or self.state["grad2d"].shape[0] != len(model):
            self._reset_state(model)
        grads = _ndc_grads(meta, cfg.absgrad)
        if grads is not None:  # per Gaussian, sums over the cameras that see it (dense: no index lists)
            visible = meta["radii"] > 0  # [C,N]
            norms = torch.linalg.vector_norm(grads, dim=-1)
            self.state["grad2d"].add_(torch.where(visible, norms, 0.0).sum(0))
            self.state["count"].add_(visible.sum(0))
        if step > cfg.refine_start and step % cfg.refine_every == 0:
            out.update(self._grow(model, gen))
            out["pruned"] = self._prune(model, step)
            self._reset_state(model)
        if step > 0 and step % cfg.reset_every == 0:
            self._reset_opacity(model)
        return out

    def _grow(self, model: SplatModel, gen: torch.Generator) -> dict[str, int]:
        cfg = self.cfg
        avg = self.state["grad2d"] / self.state["count"].clamp_min(1)
        high = avg > cfg.grow_grad2d_threshold
        if cfg.max_gaussians is not None:
            budget = max(cfg.max_gaussians - len(model), 0)
            if int(high.sum()) > budget:
                keep = torch.zeros_like(high)
                if budget > 0:
                    keep[torch.topk(torch.where(high, avg, -1.0), budget).indices] = True
                high = keep
        small = gaussians.scales_from_log(model.log_scales.detach()).amax(-1) <= cfg.grow_scale3d * self.scene_scale
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

    def _prune(self, model: SplatModel, step: int) -> int:
        cfg = self.cfg
        with torch.no_grad():
            prune = gaussians.opacity_from_logit(model.opacity_logits) < cfg.prune_opacity
            if step > cfg.reset_every:
                big = gaussians.scales_from_log(model.log_scales).amax(-1) > cfg.prune_scale3d * self.scene_scale
                prune |= big
        n = int(prune.sum())
        if n:
            model.keep(~prune)
        return n

    def _reset_opacity(self, model: SplatModel) -> None:
        with torch.no_grad():
            cap = gaussians.logit_from_opacity(torch.tensor(2 * self.cfg.prune_opacity))
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


class MCMCStrategy:
    """3DGS as MCMC: relocation of dead Gaussians, bounded growth, noise on the means."""

    def __init__(self, cfg: TrainConfig, scene_scale: float) -> None:
        self.cfg = cfg
        self.scene_scale = scene_scale
        self.state: dict[str, torch.Tensor] = {}

    def step(self, model: SplatModel, step: int, meta: dict[str, Any], gen: torch.Generator) -> dict[str, int]:
        cfg = self.cfg
        out = {"relocated": 0, "added": 0}
        if cfg.refine_start < step < cfg.refine_stop_step and step % cfg.refine_every == 0:
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
            new_o = new_o.clamp(min=self.cfg.prune_opacity, max=1 - eps)
            return {
                "opacity_logits": gaussians.logit_from_opacity(new_o),
                "log_scales": gaussians.log_from_scales(new_s),
            }

    def _relocate(self, model: SplatModel, gen: torch.Generator) -> int:
        with torch.no_grad():
            op = gaussians.opacity_from_logit(model.opacity_logits)
            dead = (op <= self.cfg.prune_opacity).nonzero()[:, 0]
            alive = (op > self.cfg.prune_opacity).nonzero()[:, 0]
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
        target = min(self.cfg.cap_max, int(math.floor((1 + self.cfg.grow_rate) * cur)))
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
            noise = noise * gate[:, None] * self.cfg.noise_lr * model.lr("means")
            model.means.add_(torch.einsum("nij,nj->ni", cov, noise))


def make_strategy(cfg: TrainConfig, scene_scale: float) -> DefaultStrategy | MCMCStrategy:
    return MCMCStrategy(cfg, scene_scale) if cfg.strategy == "mcmc" else DefaultStrategy(cfg, scene_scale)
