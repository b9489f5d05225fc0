"""``GaussianField``: an ``nn.Module`` holding N Gaussians as learnable parameters."""

from __future__ import annotations

import math

import torch
from torch import nn

from gsworkbench.core import gaussians
from gsworkbench.core.validation import check_choice, check_tensor
from gsworkbench.field.api import BACKENDS, COVARIANCES, evaluate


class GaussianField(nn.Module):
    """A sum of N weighted 3D Gaussians in the cube [-volume_size/2, volume_size/2]^3.

    Parameters (``nn.Parameter``):
        means [N,3];
        ``covariance="full"``: ``raw_factors`` [N,6] (log of L's diagonal, then L10, L20, L21; see
        :func:`gsworkbench.core.gaussians.cholesky_from_raw`); ``"diag"``: ``log_scales`` [N,3];
        weights [N].

    ``forward(points [B,3]) -> values [B]`` calls :func:`gsworkbench.field.evaluate`.
    """

    def __init__(
        self,
        num_gaussians: int,
        covariance: str = "full",
        volume_size: float = 2.0,
        backend: str = "ext",
        *,
        init_weight: float = 0.1,
        seed: int | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        if not isinstance(num_gaussians, int) or num_gaussians < 0:
            raise ValueError(f"num_gaussians must be a non-negative int, got {num_gaussians!r}")
        if not volume_size > 0:
            raise ValueError(f"volume_size must be positive, got {volume_size!r}")
        self.covariance = check_choice("covariance", covariance, COVARIANCES)
        self.backend = check_choice("backend", backend, BACKENDS)
        self.volume_size = float(volume_size)
        gen = torch.Generator().manual_seed(seed) if seed is not None else None
        n = num_gaussians
        means = (torch.rand(n, 3, generator=gen, dtype=dtype) - 0.5) * volume_size
        # spacing of N points in the cube: Gaussians start about half that wide
        log_sigma = math.log(0.5 * volume_size / max(n, 1) ** (1 / 3))
        self.means = nn.Parameter(means)
        if covariance == "full":
            raw = torch.zeros(n, 6, dtype=dtype)
            raw[:, :3] = log_sigma
            self.raw_factors = nn.Parameter(raw)
        else:
            self.log_scales = nn.Parameter(torch.full((n, 3), log_sigma, dtype=dtype))
        self.weights = nn.Parameter(torch.full((n,), init_weight, dtype=dtype))

    @classmethod
    def from_parameters(
        cls,
        means: torch.Tensor,
        factors: torch.Tensor,
        weights: torch.Tensor,
        *,
        covariance: str = "full",
        volume_size: float = 2.0,
        backend: str = "ext",
    ) -> GaussianField:
        """A field with explicit parameters: factors are L [N,3,3] ("full") or std devs [N,3] ("diag")."""
        check_tensor("means", means, (None, 3))
        n = means.shape[0]
        field = cls(n, covariance, volume_size, backend, dtype=means.dtype)
        with torch.no_grad():
            field.means.copy_(means)
            field.weights.copy_(check_tensor("weights", weights, (n,)))
            if covariance == "full":
                L = check_tensor("factors", factors, (n, 3, 3))
                if not bool((torch.diagonal(L, dim1=-2, dim2=-1) > 0).all()):
                    raise ValueError("factors must have a positive diagonal")
                field.raw_factors.copy_(gaussians.raw_from_cholesky(L))
            else:
                s = check_tensor("factors", factors, (n, 3))
                if not bool((s > 0).all()):
                    raise ValueError("factors (standard deviations) must be positive")
                field.log_scales.copy_(gaussians.log_from_scales(s))
        return field

    @property
    def num_gaussians(self) -> int:
        return self.means.shape[0]

    def factors(self) -> torch.Tensor:
        """L [N,3,3] ("full") or standard deviations [N,3] ("diag")."""
        if self.covariance == "full":
            return gaussians.cholesky_from_raw(self.raw_factors)
        return gaussians.scales_from_log(self.log_scales)

    def forward(self, points: torch.Tensor, backend: str | None = None) -> torch.Tensor:
        return evaluate(
            points,
            self.means,
            self.factors(),
            self.weights,
            covariance=self.covariance,
            backend=backend or self.backend,
        )

    def extra_repr(self) -> str:
        return f"num_gaussians={self.num_gaussians}, covariance={self.covariance!r}, backend={self.backend!r}"
