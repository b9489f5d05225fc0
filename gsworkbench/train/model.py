"""The trained splats as optimiser parameters, and the row operations densification needs.

:class:`SplatModel` holds the Inria parameterisation (means [N,3], quats [N,4], log_scales [N,3],
opacity_logits [N], sh_dc [N,3], sh_rest [N,K,3]) as leaf tensors, with one Adam whose parameter groups
are named after them (dense by default, or one that steps only the rows seen in a step; see
:mod:`gsworkbench.train.adam`). Every operation that adds, removes or rewrites rows (:meth:`keep`,
:meth:`append`, :meth:`assign`, :meth:`reorder`, :meth:`zero_state`) updates the parameters and Adam's moments
together, so the optimiser state always has one row per Gaussian.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from gsworkbench.core import gaussians
from gsworkbench.core.splats import SplatSet
from gsworkbench.train.adam import make_optimizer, optimizer_step

NAMES = ("means", "quats", "log_scales", "opacity_logits", "sh_dc", "sh_rest")


class SplatModel:
    """Parameters + their Adam. ``lrs`` maps each name in :data:`NAMES` to its learning rate;
    ``optimizer`` is one of :data:`gsworkbench.train.adam.OPTIMIZERS` (dense ``"adam"`` by default)."""

    def __init__(
        self, splats: SplatSet, lrs: Mapping[str, float], eps: float = 1e-15, optimizer: str = "adam"
    ) -> None:
        self.params: dict[str, torch.Tensor] = {
            n: getattr(splats, n).detach().clone().requires_grad_(True) for n in NAMES
        }
        groups = [{"params": [self.params[n]], "lr": float(lrs[n]), "name": n} for n in NAMES]
        self.optimizer = make_optimizer(groups, eps, optimizer)

    def step(self, radii: torch.Tensor | None = None) -> None:
        """One optimiser step; a visible Adam steps only the Gaussians with ``radii`` [C,N] > 0 in some
        camera (``rasterize``'s ``meta["radii"]``), dense Adam every row."""
        optimizer_step(self.optimizer, radii)

    # ---- views ---------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.params["means"].shape[0]

    def __getattr__(self, name: str) -> torch.Tensor:
        params = self.__dict__.get("params")
        if params is not None and name in params:
            return params[name]
        raise AttributeError(name)

    @property
    def sh_pieces(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The SH coefficients as ``rasterize`` takes them apart: the DC row [N,1,3] (a view of sh_dc)
        and sh_rest [N,(d+1)^2-1,3], with no concatenation."""
        return self.params["sh_dc"][:, None, :], self.params["sh_rest"]

    def splats(self) -> SplatSet:
        """A detached copy as a :class:`SplatSet`."""
        return SplatSet(*(self.params[n].detach().clone() for n in NAMES))

    def set_lr(self, name: str, lr: float) -> None:
        for g in self.optimizer.param_groups:
            if g["name"] == name:
                g["lr"] = lr

    def lr(self, name: str) -> float:
        return next(g["lr"] for g in self.optimizer.param_groups if g["name"] == name)

    # ---- row operations (parameters and Adam state together) -----------------------------------
    def _rewrite(self, fn: Callable[[str, torch.Tensor, bool], torch.Tensor]) -> None:
        """Replaces every parameter p by fn(name, p, False) and each of its per-row Adam moments m by
        fn(name, m, True)."""
        for g in self.optimizer.param_groups:
            name, old = g["name"], g["params"][0]
            new = fn(name, old.detach(), False).contiguous().requires_grad_(True)
            state = self.optimizer.state.pop(old, None)
            if state:
                for k, v in state.items():
                    if torch.is_tensor(v) and v.shape == old.shape:
                        state[k] = fn(name, v, True).contiguous()
                self.optimizer.state[new] = state
            g["params"][0] = new
            self.params[name] = new

    def reorder(self, order: torch.Tensor) -> None:
        """Puts the rows in the order ``order`` [N] int64 (a permutation): row i becomes old row order[i]."""
        self._rewrite(lambda name, t, is_state: t.index_select(0, order))

    def keep(self, mask: torch.Tensor) -> None:
        """Keeps the rows where ``mask`` [N] bool is True."""
        self._rewrite(lambda name, t, is_state: t[mask])

    def append(self, rows: Mapping[str, torch.Tensor], keep: torch.Tensor | None = None) -> None:
        """Appends new rows (one tensor per name, same count); their Adam moments start at zero. With
        ``keep`` [N] bool, only the rows where it is True stay before them: one new tensor per
        parameter and moment, written once (not a gather for the kept rows and a second copy to
        append; at 10^6 Gaussians each is about 200 MB)."""
        index = None if keep is None else keep.nonzero().squeeze(1)

        def fn(name: str, t: torch.Tensor, is_state: bool) -> torch.Tensor:
            add = rows[name]
            n_old = len(t) if index is None else len(index)
            out = t.new_empty((n_old + len(add), *t.shape[1:]))
            if index is None:
                out[:n_old] = t
            else:
                torch.index_select(t, 0, index, out=out[:n_old])
            if is_state:
                out[n_old:].zero_()
            else:
                out[n_old:] = add.to(t.dtype)
            return out

        self._rewrite(fn)

    def assign(self, index: torch.Tensor, rows: Mapping[str, torch.Tensor]) -> None:
        """Overwrites rows ``index`` of the named parameters in place and zeroes their moments (no copy
        of the untouched rows)."""
        with torch.no_grad():
            for name, value in rows.items():
                p = self.params[name]
                p[index] = value.to(p.dtype)
                self.zero_state(name, index)

    def zero_state(self, name: str, index: torch.Tensor | None = None) -> None:
        """Zeroes the Adam moments of parameter ``name`` (rows ``index``, or all)."""
        p = self.params[name]
        for v in self.optimizer.state.get(p, {}).values():
            if torch.is_tensor(v) and v.shape == p.shape:
                if index is None:
                    v.zero_()
                else:
                    v[index] = 0

    def covariances(self) -> torch.Tensor:
        """World covariances [N,3,3] (detached)."""
        with torch.no_grad():
            return gaussians.covariance_from_scales_quats(
                gaussians.scales_from_log(self.params["log_scales"]), self.params["quats"]
            )
