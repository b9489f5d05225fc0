"""The 3DGS trainer: :class:`Trainer` (step by step; :func:`gsworkbench.train.train` runs a whole run).

One step: pick the next training view (a shuffled pass over the train views), render it with
:func:`gsworkbench.splat.rasterize` (backend ``ext`` or ``torch``), take the photometric loss
(0.8 L1 + 0.2 (1 - SSIM), plus the MCMC regularisers), back-propagate, step Adam, then densify
(:mod:`gsworkbench.train.strategy`). With ``resolution_schedule`` the early steps render and compare
at a reduced size (:mod:`gsworkbench.train.resolution`; evaluation stays at full size). With ``filter_3d`` every render
sees the Gaussians through Mip-Splatting's 3D filter (:mod:`gsworkbench.train.mip_filter`): their
sampling rates over the train cameras are recomputed every ``filter_3d_every`` steps and after each
densification that changed them, and :meth:`Trainer.splats` exports the filtered splats. Each stage is
timed (:data:`gsworkbench.train.timers.STAGES`); :attr:`Trainer.history` has one row per step with the
loss, the PSNR of the step's view, the Gaussian count, the resolution factor and the stage times in
seconds.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from gsworkbench.core import gaussians
from gsworkbench.core.atomic import atomic_write_bytes
from gsworkbench.core.compile import compile_step
from gsworkbench.core.limits import retained_freed_memory
from gsworkbench.core.spatial_order import morton_order
from gsworkbench.core.splats import SplatSet
from gsworkbench.splat import rasterize
from gsworkbench.train.appearance import PhotoAppearance
from gsworkbench.train.background import eval_background, over_background
from gsworkbench.train.config import TrainConfig
from gsworkbench.train.divergence import LEARNING_RATE_OF, DivergenceMonitor
from gsworkbench.train.evaluate import evaluate_views, sfm_background_mask
from gsworkbench.train.fingerprint import scene_fingerprint
from gsworkbench.train.init_points import initial_splats, sparse_cloud
from gsworkbench.train.losses import SSIM_WINDOW, photometric_loss, psnr_from_mse
from gsworkbench.train.mip_filter import filtered_scales_opacities, max_sampling_rate
from gsworkbench.train.model import NAMES, SplatModel
from gsworkbench.train.pose_refinement import CameraRefinement, align_pose, corrected_viewmats, radial_warp
from gsworkbench.train.resolution import ReducedViews, check_fits, factor_at, scale_intrinsics
from gsworkbench.train.timers import STAGES, StageTimer

CHECKPOINT_FORMAT = "gsworkbench-3dgs-checkpoint-v1"


class Trainer:
    """Trains splats on ``scene`` (a :class:`gsworkbench.scenes.Scene`) with ``config``.

    ``splats``: the starting splats (default: the scene's point cloud or random points by
    ``config.init_rule``, see :mod:`gsworkbench.train.init_points`; the rule used is ``init_info``).
    ``ranges``: open ``torch.profiler`` ranges per stage.
    ``clock``: seconds for the step's timers (``t_<stage>``, ``t_step``) and ``checkpoint_minutes``;
    default the class's :attr:`clock`. Tests give a fake one (here, or as the class's attribute), so
    that nothing they assert depends on how busy the machine is.
    """

    clock = staticmethod(time.perf_counter)

    def __init__(
        self,
        scene: Any,
        config: TrainConfig,
        splats: SplatSet | None = None,
        ranges: bool = False,
        clock: Callable[[], float] | None = None,
    ):
        if not isinstance(config, TrainConfig):
            raise ValueError(f"config must be a TrainConfig, got {type(config).__name__}")
        self.cfg = config
        if clock is not None:
            self.clock = clock
        self.device = torch.device(config.device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError("device 'cuda' asked for, but torch sees no CUDA device")
        if len(scene.train_ids) == 0:
            raise ValueError(f"scene {scene.name!r} has no training views")
        self.scene = scene.to(self.device)
        self.gen = torch.Generator().manual_seed(config.seed)
        self.scene_fingerprint = scene_fingerprint(scene)  # what metrics.json and checkpoints name
        self.init_info: dict[str, Any] = {"rule": "given splats"}
        if splats is None:  # the scene's cloud, or random points by config.init_rule
            splats, self.init_info = initial_splats(scene, config, self.gen)
        if splats.sh_degree < config.sh_degree:
            k = gaussians.num_sh_bases(config.sh_degree) - 1
            rest = splats.sh_rest.new_zeros(len(splats), k, 3)
            rest[:, : splats.sh_rest.shape[1]] = splats.sh_rest
            splats = replace(splats, sh_rest=rest)
        self.model = SplatModel(
            splats.to(self.device, torch.float32), self._learning_rates(), config.adam_eps, config.optimizer
        )
        self.appearance = (
            PhotoAppearance(len(scene.viewmats), scene.train_ids, config.lr_appearance, self.device)
            if config.appearance == "affine" else None
        )  # fmt: skip
        self.poses = (
            CameraRefinement(len(scene.viewmats), config.lr_pose, scene.scene_scale, self.device,
                             intrinsics=config.intrinsics_opt)
            if config.pose_opt else None
        )  # fmt: skip
        self.strategy = config.strategy
        self.strategy_state: dict[str, torch.Tensor] = {}  # the strategy's running statistics
        self.scene_scale = scene.scene_scale  # world units; the strategy's 3D thresholds are relative to it
        self.timer = StageTimer(self.device, ranges=ranges, clock=self.clock)
        check_fits(config.resolution_schedule, scene.width, scene.height, SSIM_WINDOW if config.ssim_lambda else 1)
        self.reduced = ReducedViews(self.scene)  # train views at the schedule's reduced sizes, cached
        # filter_3d: each Gaussian's highest sampling rate over the train cameras [N] (None without the filter)
        self.sampling_rate: torch.Tensor | None = None
        self.update_sampling_rate()
        self.step_index = 0
        self._background_masks: dict[int, np.ndarray] = {}  # held-out view -> its background (evaluate)
        self.rows: list[dict[str, Any]] = []
        self._queue: list[int] = []
        self._loss = compile_step(photometric_loss, config.compile, dynamic=False)
        self._bg = torch.tensor(scene.background, dtype=torch.float32, device=self.device)
        self.eval_bg = torch.tensor(eval_background(scene, config.eval_background), device=self.device)
        lrs = {LEARNING_RATE_OF[n]: getattr(config, LEARNING_RATE_OF[n]) for n in NAMES}
        self.monitor = DivergenceMonitor(
            self.scene.camera_centers().float().mean(0), scene.scene_scale, self.model.means, lrs,
            loss_ceiling=2.0 * (1.0 + config.ssim_lambda),  # twice the loss of the worst render in [0, 1]
        )  # fmt: skip

    # ---- pieces ---------------------------------------------------------------------------------
    def _learning_rates(self) -> dict[str, float]:
        c = self.cfg
        return {
            "means": c.lr_means * self.scene.scene_scale,
            "quats": c.lr_quats,
            "log_scales": c.lr_scales,
            "opacity_logits": c.lr_opacities,
            "sh_dc": c.lr_sh0,
            "sh_rest": c.lr_shN,
        }

    def _next_view(self) -> int:
        if not self._queue:
            ids = self.scene.train_ids.cpu()
            self._queue = ids[torch.randperm(len(ids), generator=self.gen)].tolist()
        return self._queue.pop()

    def _target(self, view: int, factor: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
        """The view's image [H/factor,W/factor,3] over this step's background, and the background [3]."""
        img, a = self.reduced.image(view, factor)
        if self.cfg.background != "random":
            return img, self._bg
        if a is None:
            raise ValueError("background 'random' needs a scene with alpha masks (an RGBA source)")
        bg = torch.rand(3, generator=self.gen).to(self.device)
        return img - (1 - a) * self._bg + (1 - a) * bg, bg

    def reorder(self, order: torch.Tensor) -> None:
        """Puts the Gaussians in the order ``order`` [N] int64 (a permutation): their parameters, Adam's
        moments, the strategy's per-Gaussian statistics and the 3D filter's rates alike."""
        n = len(self.model)
        self.model.reorder(order)
        for k, v in self.strategy_state.items():
            if torch.is_tensor(v) and v.ndim >= 1 and v.shape[0] == n:
                self.strategy_state[k] = v.index_select(0, order)
        if self.sampling_rate is not None and len(self.sampling_rate) == n:
            self.sampling_rate = self.sampling_rate.index_select(0, order)

    def update_sampling_rate(self) -> None:
        """Recomputes :attr:`sampling_rate` (with ``filter_3d``) from the Gaussians' centres now and the
        train cameras at full size (the finest they sample, whatever the resolution schedule)."""
        if not self.cfg.filter_3d:
            return
        train = self.scene.train_ids.to(self.device)
        self.sampling_rate = max_sampling_rate(
            self.model.means.detach(), self.scene.viewmats[train], self.scene.Ks[train], self.scene.width,
            self.scene.height, self.cfg.near_plane,
        )  # fmt: skip

    def scales_opacities(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The scales [N,3] and opacities [N] the renders use: the parameters' activations, through the
        3D filter with ``filter_3d`` (differentiable in both)."""
        m = self.model
        scales, opacities = gaussians.scales_from_log(m.log_scales), gaussians.opacity_from_logit(m.opacity_logits)
        if self.sampling_rate is None:
            return scales, opacities
        return filtered_scales_opacities(scales, opacities, self.sampling_rate, self.cfg.filter_3d_variance)

    def sh_degree_at(self, step: int) -> int:
        return min(step // self.cfg.sh_degree_interval, self.cfg.sh_degree)

    def render(
        self, views: torch.Tensor | list[int], sh_degree: int | None = None, background: torch.Tensor | None = None,
        absgrad: bool = False, timed: bool = False, factor: int = 1, size: tuple[int, int] | None = None,
        pose: tuple[torch.Tensor, torch.Tensor | None] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:  # fmt: skip
        """Renders ``views`` (indices into the scene) at 1/``factor`` of the image size (see
        :mod:`gsworkbench.train.resolution`), or at ``size`` = (width, height) pixels (the same field of
        view: zoomed in or out) -> colours [C,h,w,3], alphas [C,h,w,1], meta. With ``pose_opt`` the
        views' learned pose corrections apply; ``pose``: these corrections instead, (pose [C,9], lens
        [C,4] or None) (:mod:`gsworkbench.train.pose_refinement`)."""
        m = self.model
        with self.timer.stage("prepare") if timed else contextlib.nullcontext():
            views = torch.as_tensor(views, dtype=torch.long, device=self.device)
            bg = (self._bg if background is None else background).expand(len(views), 3)
            scales, opacities = self.scales_opacities()
            if size is not None:
                width, height = size
                Ks = scale_intrinsics(self.scene.Ks[views], self.scene.width, self.scene.height, width, height)
            else:
                width, height = (self.scene.width, self.scene.height) if factor == 1 else self.reduced.size(factor)
                Ks = self.reduced.Ks(views, factor)
            viewmats, lens = self.scene.viewmats[views], None
            if pose is not None:
                viewmats, lens = corrected_viewmats(viewmats, pose[0], self.scene_scale, pose[1]), pose[1]
            elif self.poses is not None:
                viewmats, lens = self.poses.apply(viewmats, views), self.poses.lens(views)
        sh_dc, sh_rest = m.sh_pieces
        colors, alphas, meta = rasterize(
            m.means,
            m.quats,
            scales,
            opacities,
            sh_dc,
            viewmats,
            Ks,
            width,
            height,
            sh_degree=self.cfg.sh_degree if sh_degree is None else sh_degree,
            near_plane=self.cfg.near_plane,
            far_plane=self.cfg.far_plane,
            backgrounds=bg,
            absgrad=absgrad,
            backend=self.cfg.backend,
            stages=self.timer.stage if timed else None,
            sh_rest=sh_rest,
            rasterize_mode=self.cfg.rasterize_mode,
            eps2d=self.cfg.eps2d,
            check_values=not self.cfg.check_divergence,  # the monitor watches the values (check_loss/params)
        )
        if lens is not None:  # the photo's radial residual: an image-space warp of the render
            colors = radial_warp(colors, lens[:, 3], Ks)
        return colors, alphas, meta

    # ---- one step -----------------------------------------------------------------------------------
    def step(self) -> dict[str, Any]:
        """One training step; returns (and records) its history row."""
        cfg, s, stage = self.cfg, self.step_index, self.timer.stage
        t0 = self.clock()
        self.timer.reset()
        with stage("prepare"):
            decay = cfg.lr_means_final ** (s / max(cfg.iterations, 1))
            self.model.set_lr("means", self._learning_rates()["means"] * decay)
            view = self._next_view()
            factor = factor_at(cfg.resolution_schedule, s)
            gt, bg = self._target(view, factor)
            sh_deg = self.sh_degree_at(s)
        try:
            absgrad = self.strategy.wants_absgrad
            colors, _, meta = self.render([view], sh_deg, bg, absgrad=absgrad, timed=True, factor=factor)
        except ValueError:  # e.g. "scales contains non-finite values" (the value scan runs without the
            # monitor): say which parameter blew up, and when
            self.monitor.check_params(s, self.model.params, force=True)
            raise
        meta["means2d"].retain_grad()
        with stage("loss"):
            # the one view as a view of [1,H,W,3] (its backward reshapes; colors[0]'s would zero-fill and copy)
            pred = colors.view(colors.shape[1:])
            if self.appearance is not None:  # the photo's exposure and balance, learned beside the splats
                pred = self.appearance.apply(pred, view)
            loss, parts = self._loss(pred, gt, cfg.ssim_lambda, cfg.backend)
            if cfg.opacity_reg > 0:
                loss = loss + cfg.opacity_reg * gaussians.opacity_from_logit(self.model.opacity_logits).mean()
            if cfg.scale_reg > 0:
                loss = loss + cfg.scale_reg * gaussians.scales_from_log(self.model.log_scales).mean()
            mse = float(parts["mse"].detach() if "mse" in parts else ((pred.detach() - gt) ** 2).mean())
            loss_value = float(loss.detach())
            if cfg.check_divergence or not np.isfinite(loss_value):
                if not np.isfinite(loss_value):  # name the parameter that blew up, if one did
                    self.monitor.check_params(s, self.model.params, force=True)
                self.monitor.check_loss(s, loss_value, self.model.params)
        with stage("backward"):
            loss.backward()
        with stage("optimizer"):
            if cfg.check_divergence:
                self.monitor.check_params(s, self.model.params)
            self.model.step(meta["radii"])  # a visible Adam steps only the Gaussians this view sees
            self.model.optimizer.zero_grad(set_to_none=True)
            if self.appearance is not None:
                self.appearance.step()
            if self.poses is not None:
                self.poses.step()
        with stage("densify"):
            changes = self.strategy.step(self.model, self.strategy_state, s, meta, self.gen, self.scene_scale)
            changed = any(changes.values())
            if cfg.spatial_order and changed:
                self.reorder(morton_order(self.model.means))
            if cfg.filter_3d and (changed or (s + 1) % cfg.filter_3d_every == 0):
                self.update_sampling_rate()  # the centres moved, or Gaussians came and went
        row: dict[str, Any] = {
            "step": s,
            "view": view,
            "loss": loss_value,
            "l1": float(parts["l1"].detach()),
            "ssim": float(parts["ssim"].detach()) if "ssim" in parts else float("nan"),
            "psnr_db": psnr_from_mse(mse),
            "num_gaussians": len(self.model),
            "sh_degree": sh_deg,
            "resolution_factor": factor,
            **changes,
        }
        times = self.timer.reset()
        row.update({f"t_{k}": times.get(k, 0.0) for k in STAGES})
        row["t_step"] = self.clock() - t0
        self.rows.append(row)
        self.step_index += 1
        return row

    @property
    def history(self) -> pd.DataFrame:
        """One row per step: step, view, loss, l1, ssim, psnr_db (of the step's view, at its resolution),
        num_gaussians, sh_degree, resolution_factor, densify counts, t_<stage> (seconds), t_step (the
        step's wall time), test_psnr_db where evaluated."""
        return pd.DataFrame(self.rows)

    def run(
        self,
        iterations: int | None = None,
        *,
        checkpoint: str | os.PathLike[str] | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> pd.DataFrame:
        """Steps until ``iterations`` (default: the config's) with a progress bar; returns the history.

        ``checkpoint``: where to write the periodic checkpoints (``checkpoint_every`` steps and/or
        ``checkpoint_minutes``). ``stop``: asked after each step; True ends the run early (Ctrl-C, see
        :func:`gsworkbench.train.interrupt.deferred_interrupt`).
        """
        from tqdm.auto import tqdm

        cfg = self.cfg
        end = cfg.iterations if iterations is None else iterations
        bar = tqdm(total=end, initial=self.step_index, disable=not cfg.progress, desc="train", unit="step")
        saved_at = self.clock()
        # the steps' temporaries reuse freed pages (gsworkbench.core.limits); the policy is undone when the run stops
        with retained_freed_memory(), contextlib.closing(bar):
            while self.step_index < end and not (stop is not None and stop()):
                row = self.step()
                if cfg.eval_every and self.step_index % cfg.eval_every == 0:
                    row["test_psnr_db"] = float(self.evaluate()[0]["psnr_db"].mean())
                bar.update(1)
                if self.step_index % 10 == 0 or self.step_index == end:
                    bar.set_postfix(loss=f"{row['loss']:.4f}", psnr=f"{row['psnr_db']:.2f}", n=row["num_gaussians"])
                due_steps = cfg.checkpoint_every and self.step_index % cfg.checkpoint_every == 0
                due_time = cfg.checkpoint_minutes and self.clock() - saved_at >= 60 * cfg.checkpoint_minutes
                if checkpoint is not None and self.step_index < end and (due_steps or due_time):
                    self.save_checkpoint(checkpoint)
                    saved_at = self.clock()
        return self.history

    # ---- evaluation and output ----------------------------------------------------------------------
    def evaluate(
        self, views: Any = None, references: Mapping[int, torch.Tensor] | None = None
    ) -> tuple[pd.DataFrame, dict]:
        """PSNR and SSIM per held-out view (default: the test views) and the renders (uint8 [H,W,3]).

        ``references``: the views to score instead, as {view: image [h,w,3] in [0,1]} at any size with
        the view's field of view (zoomed in or out; each view rendered at its reference's size, no
        background scores, no held-out pose alignment)."""
        if references is not None:
            sizes = {v: (int(ref.shape[1]), int(ref.shape[0])) for v, ref in references.items()}

            def render_at(v: int) -> torch.Tensor:
                img = self.render([v], background=self.eval_bg, size=sizes[v])[0][0]
                return img if self.appearance is None else self.appearance.apply(img, v, held_out=True)

            refs_here = {v: ref.to(self.device, torch.float32) for v, ref in references.items()}
            return evaluate_views(render_at, refs_here, list(references))
        ids = (self.scene.test_ids if views is None else torch.as_tensor(views)).tolist()
        refs = {v: over_background(self.scene, v, self.eval_bg) for v in ids}  # over config.eval_background
        sc, masks = self.scene, None
        # the background: what the sparse cloud (the scene's, or the one triangulated for the start) misses;
        # fixed by the scene, so each view's mask is made once, not at every evaluation of a run
        missing = [v for v in ids if v not in self._background_masks]
        cloud = sparse_cloud(sc, self.init_info) if missing else None
        for v in missing if cloud is not None else []:
            self._background_masks[v] = sfm_background_mask(cloud, sc.viewmats[v], sc.Ks[v], sc.width, sc.height)
        if all(v in self._background_masks for v in ids):
            masks = {v: self._background_masks[v] for v in ids}

        aligned = {v: self._aligned_pose(v, refs[v]) for v in ids} if self.cfg.eval_pose_steps else {}

        def render(v: int) -> torch.Tensor:
            pose = aligned.get(v)
            img = self.render([v], background=self.eval_bg, pose=pose)[0][0]
            return img if self.appearance is None else self.appearance.apply(img, v, held_out=True)

        return evaluate_views(render, refs, ids, masks)

    def _aligned_pose(self, view: int, photo: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The correction of ``view`` fitted to its photo (over the evaluation background) with the
        splats fixed: ``eval_pose_steps`` steps from the identity; (pose [1,9], lens [1,4] or None). The
        lens too where training refines it (``intrinsics_opt``)."""
        held_out = self.appearance is not None and view not in set(self.scene.train_ids.tolist())

        def render(pose: torch.Tensor, lens: torch.Tensor | None) -> torch.Tensor:
            lens = None if lens is None else lens[None]
            img = self.render([view], background=self.eval_bg, pose=(pose[None], lens))[0][0]
            return img if self.appearance is None else self.appearance.apply(img, view, held_out=held_out)

        # everything training learns stays fixed, and gathers no gradient a later step would apply
        learned = [*self.model.params.values()]
        learned += [self.appearance.params] if self.appearance is not None else []
        learned += self.poses.tensors if self.poses is not None else []
        for p in learned:
            p.requires_grad_(False)
        try:
            pose, lens = align_pose(render, photo, self.cfg.eval_pose_steps, self.cfg.lr_eval_pose,
                                    intrinsics=self.cfg.pose_opt and self.cfg.intrinsics_opt)
            return pose[None], None if lens is None else lens[None]
        finally:
            for p in learned:
                p.requires_grad_(True)

    def splats(self) -> SplatSet:
        """A detached copy of the splats as any renderer should draw them: with ``filter_3d``, the
        filter baked into their scales and opacities (render them with this config's ``rasterize_mode``)."""
        out = self.model.splats()
        if self.sampling_rate is None:
            return out
        with torch.no_grad():
            scales, opacities = self.scales_opacities()
            return replace(out, log_scales=gaussians.log_from_scales(scales),
                           opacity_logits=gaussians.logit_from_opacity(opacities))  # fmt: skip

    # ---- checkpoints --------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "format": CHECKPOINT_FORMAT,
            "step": self.step_index,
            "config": self.cfg.to_dict(),
            "scene": str(getattr(self.scene, "name", "")),
            "scene_fingerprint": self.scene_fingerprint,
            "init": self.init_info,
            "params": {n: self.model.params[n].detach().cpu() for n in NAMES},
            "optimizer": self.model.optimizer.state_dict(),
            "strategy": {k: v.cpu() for k, v in self.strategy_state.items()},
            "generator": self.gen.get_state(),
            "queue": list(self._queue),
            "history": self.rows,
            "appearance": self.appearance.state_dict() if self.appearance is not None else None,
            "poses": self.poses.state_dict() if self.poses is not None else None,
            # filter_3d: the rates in use (between two recomputations they lag the centres; a resumed run
            # must render with the same ones)
            "sampling_rate": None if self.sampling_rate is None else self.sampling_rate.cpu(),
        }

    def save_checkpoint(self, path: str | os.PathLike[str]) -> Path:
        """Writes the full training state atomically (readable with ``torch.load(weights_only=True)``)."""
        buf = io.BytesIO()
        torch.save(self.state_dict(), buf)
        return atomic_write_bytes(path, buf.getvalue())

    @classmethod
    def from_checkpoint(
        cls, path: str | os.PathLike[str], scene: Any, *, other_data: bool = False, **config_overrides: Any
    ) -> Trainer:
        """A trainer that goes on from a checkpoint, as if it had never stopped. A checkpoint trained on
        other data (its scene fingerprint differs) is refused with a ValueError saying how the data
        differ, unless ``other_data``: then it goes on with a warning, from a fresh pass over the views."""
        state = load_checkpoint(path)
        cfg = TrainConfig.from_dict(state["config"]).with_flat(**config_overrides)
        splats = SplatSet(*(state["params"][n] for n in NAMES))
        trainer = cls(scene, cfg, splats)
        was = state.get("scene_fingerprint", {})
        same = not was.get("sha256") or was["sha256"] == trainer.scene_fingerprint["sha256"]
        if not same:
            why = f"{path} was trained on other data ({_data_change(was, trainer.scene_fingerprint)})"
            if not other_data:
                raise ValueError(f"{why}; resume refused (resume_other_data=True goes on anyway)")
            warnings.warn(why, stacklevel=2)
        trainer.model.optimizer.load_state_dict(state["optimizer"])
        if trainer.appearance is not None and state.get("appearance") is not None:
            trainer.appearance.load_state_dict(state["appearance"])
        if trainer.poses is not None and state.get("poses") is not None:
            trainer.poses.load_state_dict(state["poses"])
        trainer.strategy_state = {k: v.to(trainer.device) for k, v in state["strategy"].items()}
        rate = state.get("sampling_rate")
        if trainer.sampling_rate is not None and rate is not None and len(rate) == len(trainer.model):
            trainer.sampling_rate = rate.to(trainer.device)  # else: recomputed from the centres (the constructor)
        trainer.gen.set_state(state["generator"])
        trainer._queue = list(state["queue"]) if same else []  # other data: its views, a fresh pass
        trainer.rows = list(state["history"])
        trainer.step_index = int(state["step"])
        trainer.init_info = state.get("init", trainer.init_info)
        return trainer


def _data_change(was: dict[str, Any], now: dict[str, Any]) -> str:
    """How two scene fingerprints differ, in a few words: name, view count and image size, else content."""

    def says(fp: dict[str, Any]) -> str:
        size = f"{fp.get('width', '?')}x{fp.get('height', '?')}"
        return f"scene {fp.get('name', '?')!r}, {fp.get('views', '?')} views of {size}"

    then, here = says(was), says(now)
    if then == here:
        then, here = f"{then}, fingerprint {was['sha256'][:12]}", f"{here}, fingerprint {now['sha256'][:12]}"
    return f"then {then}; now {here}"


def load_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A checkpoint's contents (``torch.load(weights_only=True)``); ValueError naming the file otherwise."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise ValueError(f"checkpoint not found: {path}") from None
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError) as err:
        raise ValueError(f"cannot read checkpoint {path}: {str(err).splitlines()[0]}") from None
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not a gsworkbench 3DGS training checkpoint")
    return state
