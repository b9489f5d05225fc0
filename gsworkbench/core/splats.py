"""``SplatSet``: a 3DGS scene in the Inria parameterisation, and a synthetic-scene generator.

Fields (torch tensors, one dtype and device):
    means [N,3] (world units), quats [N,4] (wxyz, not necessarily normalised), log_scales [N,3],
    opacity_logits [N], sh_dc [N,3], sh_rest [N,K,3] with K = (d+1)^2 - 1 for SH degree d <= 3.

Activated forms (linear scales, opacity in [0,1], full SH [N,K+1,3]) come from the properties;
the math is :mod:`gsworkbench.core.gaussians`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

import torch

from gsworkbench.core import gaussians
from gsworkbench.core.validation import check_same_device_dtype, check_same_size, check_tensor

FIELDS = ("means", "quats", "log_scales", "opacity_logits", "sh_dc", "sh_rest")  # SplatSet's, in order


@dataclass
class SplatSet:
    means: torch.Tensor
    quats: torch.Tensor
    log_scales: torch.Tensor
    opacity_logits: torch.Tensor
    sh_dc: torch.Tensor
    sh_rest: torch.Tensor

    def __post_init__(self) -> None:
        check_tensor("means", self.means, (None, 3))
        check_tensor("quats", self.quats, (None, 4))
        check_tensor("log_scales", self.log_scales, (None, 3))
        check_tensor("opacity_logits", self.opacity_logits, (None,))
        check_tensor("sh_dc", self.sh_dc, (None, 3))
        check_tensor("sh_rest", self.sh_rest, (None, None, 3))
        check_same_size("N (number of splats)", *[(f.name, getattr(self, f.name), 0) for f in fields(self)])
        check_same_device_dtype(**{f.name: getattr(self, f.name) for f in fields(self)})
        gaussians.sh_degree_from_bases(self.sh_rest.shape[1] + 1)

    @classmethod
    def _trusted(cls, *tensors: torch.Tensor) -> SplatSet:
        """A set from tensors known to be valid (outputs of library kernels): skips the O(N) checks.

        Order of the dataclass fields: means, quats, log_scales, opacity_logits, sh_dc, sh_rest.
        """
        obj = cls.__new__(cls)
        for name, t in zip(FIELDS, tensors, strict=True):  # names, not dataclasses.fields: traceable
            object.__setattr__(obj, name, t)
        return obj

    # ---- derived -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.means.shape[0]

    @property
    def sh_degree(self) -> int:
        """SH degree d (0..3), from K = (d+1)^2 - 1."""
        return gaussians.sh_degree_from_bases(self.sh_rest.shape[1] + 1)

    @property
    def scales(self) -> torch.Tensor:
        """Linear scales [N,3]."""
        return gaussians.scales_from_log(self.log_scales)

    @property
    def opacities(self) -> torch.Tensor:
        """Opacities in [0,1], [N]."""
        return gaussians.opacity_from_logit(self.opacity_logits)

    @property
    def covariances(self) -> torch.Tensor:
        """World-space covariances [N,3,3] (R S S^T R^T, world units squared)."""
        return gaussians.covariance_from_scales_quats(self.scales, self.quats)

    @property
    def sh(self) -> torch.Tensor:
        """All SH coefficients [N,(d+1)^2,3] (DC first)."""
        return torch.cat([self.sh_dc[:, None, :], self.sh_rest], dim=1)

    @classmethod
    def from_activated(
        cls,
        means: torch.Tensor,
        quats: torch.Tensor,
        scales: torch.Tensor,
        opacities: torch.Tensor,
        sh: torch.Tensor,
    ) -> SplatSet:
        """From linear scales, opacities in [0,1] and full SH [N,(d+1)^2,3]."""
        return cls(
            means,
            quats,
            gaussians.log_from_scales(scales),
            gaussians.logit_from_opacity(opacities),
            sh[:, 0, :].contiguous(),
            sh[:, 1:, :].contiguous(),
        )

    def to(self, *args, **kwargs) -> SplatSet:  # noqa: ANN002, ANN003
        """Every tensor moved/cast like ``Tensor.to``."""
        return replace(self, **{f.name: getattr(self, f.name).to(*args, **kwargs) for f in fields(self)})

    def clone(self) -> SplatSet:
        return replace(self, **{f.name: getattr(self, f.name).clone() for f in fields(self)})

    def __getitem__(self, index: torch.Tensor | slice) -> SplatSet:
        """A subset of the splats (mask, index tensor or slice)."""
        return replace(self, **{f.name: getattr(self, f.name)[index] for f in fields(self)})

    @staticmethod
    def concat(sets: list[SplatSet]) -> SplatSet:
        """The splats of several sets (same SH degree) in one set."""
        if not sets:
            raise ValueError("concat needs at least one SplatSet")
        if len({s.sh_degree for s in sets}) > 1:
            raise ValueError(f"cannot concat splat sets of SH degrees {sorted({s.sh_degree for s in sets})}")
        return SplatSet(**{f.name: torch.cat([getattr(s, f.name) for s in sets]) for f in fields(SplatSet)})


def synthetic_splats(
    num: int,
    sh_degree: int = 3,
    *,
    seed: int = 0,
    extent: float = 1.0,
    scale: float | None = None,
    dtype: torch.dtype = torch.float32,
) -> SplatSet:
    """A reproducible synthetic scene: ``num`` splats on a noisy sphere-and-ground layout.

    Half the splats lie near a sphere of radius ``0.6 * extent``, the rest on a ground disc at
    ``z = -0.8 * extent``; colours vary smoothly with position, higher SH bands are small. ``scale``
    is the typical splat size (default: about the spacing of ``num`` splats on those surfaces).
    """
    if num < 0:
        raise ValueError(f"num must be >= 0, got {num}")
    g = torch.Generator().manual_seed(seed)
    n_sphere = num // 2
    n_ground = num - n_sphere
    d = torch.randn(n_sphere, 3, generator=g, dtype=torch.float64)
    d = d / d.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    sphere = d * 0.6 * extent * (1 + 0.02 * torch.randn(n_sphere, 1, generator=g, dtype=torch.float64))
    r = extent * torch.sqrt(torch.rand(n_ground, generator=g, dtype=torch.float64))
    th = 2 * math.pi * torch.rand(n_ground, generator=g, dtype=torch.float64)
    ground = torch.stack([r * torch.cos(th), r * torch.sin(th), torch.full_like(r, -0.8 * extent)], -1)
    means = torch.cat([sphere, ground])
    s = scale if scale is not None else extent * 2.0 / max(num, 1) ** 0.5
    log_scales = math.log(s) + 0.3 * torch.randn(num, 3, generator=g, dtype=torch.float64)
    quats = torch.randn(num, 4, generator=g, dtype=torch.float64)
    opacity_logits = 1.0 + torch.randn(num, generator=g, dtype=torch.float64)
    rgb = 0.5 + 0.4 * torch.sin(3.0 * means / extent + torch.tensor([0.0, 2.0, 4.0], dtype=torch.float64))
    sh_dc = gaussians.rgb_to_sh_dc(rgb)
    k = gaussians.num_sh_bases(sh_degree) - 1
    sh_rest = 0.1 * torch.randn(num, k, 3, generator=g, dtype=torch.float64)
    return SplatSet(means, quats, log_scales, opacity_logits, sh_dc, sh_rest).to(dtype)
