"""Target volumes to fit a field to: analytic ones and user grids.

A target maps points [B,3] to density values [B] and has ``bounds`` (lo [3], hi [3]) from which
training points are drawn. Targets follow their points: values come back on the points' device (CPU
or CUDA), and ``sample(..., device=)`` draws on the CPU generator and moves the points, so a seed gives
the same points on every device.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gsworkbench.core.validation import check_tensor
from gsworkbench.field._torch_impl import evaluate_torch


class Target:
    """Base: ``target(points) -> values``, ``bounds``, ``sample(n, generator)``."""

    lo: torch.Tensor
    hi: torch.Tensor

    def __call__(self, points: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    @property
    def bounds(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.lo, self.hi

    def sample(
        self,
        n: int,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> torch.Tensor:
        """n points uniform in the bounds, [n,3], on ``device`` (default CPU)."""
        u = torch.rand(n, 3, generator=generator, dtype=dtype)
        pts = self.lo.to(dtype) + u * (self.hi - self.lo).to(dtype)
        return pts if device is None else pts.to(device)


def _cube(volume_size: float) -> tuple[torch.Tensor, torch.Tensor]:
    h = volume_size / 2
    return torch.full((3,), -h), torch.full((3,), h)


class GaussianMixtureTarget(Target):
    """A sum of known Gaussians (means [K,3], lower factors [K,3,3], weights [K])."""

    def __init__(self, means: torch.Tensor, factors: torch.Tensor, weights: torch.Tensor, volume_size: float = 2.0):
        self.means = check_tensor("means", means, (None, 3)).double()
        self.factors = check_tensor("factors", factors, (means.shape[0], 3, 3)).double()
        self.weights = check_tensor("weights", weights, (means.shape[0],)).double()
        self.lo, self.hi = _cube(volume_size)

    @classmethod
    def random(cls, num: int, seed: int = 0, volume_size: float = 2.0) -> GaussianMixtureTarget:
        """``num`` random anisotropic Gaussians inside the middle of the cube, positive weights."""
        g = torch.Generator().manual_seed(seed)
        means = (torch.rand(num, 3, generator=g, dtype=torch.float64) - 0.5) * 0.7 * volume_size
        sigma = volume_size * (0.04 + 0.08 * torch.rand(num, 3, generator=g, dtype=torch.float64))
        L = torch.diag_embed(sigma)
        L = L + torch.tril(0.3 * volume_size * 0.05 * torch.randn(num, 3, 3, generator=g, dtype=torch.float64), -1)
        weights = 0.5 + torch.rand(num, generator=g, dtype=torch.float64)
        return cls(means, L, weights, volume_size)

    def __call__(self, points: torch.Tensor) -> torch.Tensor:
        dev = points.device
        values = evaluate_torch(points.double(), self.means.to(dev), self.factors.to(dev), self.weights.to(dev))
        return values.to(points.dtype)


class TorusTarget(Target):
    """A smooth torus in the xy-plane: exp(-1/2 (distance to the ring / tube)^2)."""

    def __init__(self, ring_radius: float = 0.5, tube: float = 0.12, volume_size: float = 2.0):
        self.ring_radius, self.tube = ring_radius, tube
        self.lo, self.hi = _cube(volume_size)

    def __call__(self, points: torch.Tensor) -> torch.Tensor:
        rho = torch.sqrt(points[:, 0] ** 2 + points[:, 1] ** 2)
        d2 = (rho - self.ring_radius) ** 2 + points[:, 2] ** 2
        return torch.exp(-0.5 * d2 / self.tube**2)


class ShellTarget(Target):
    """A smooth spherical shell: exp(-1/2 ((|x| - radius) / thickness)^2)."""

    def __init__(self, radius: float = 0.6, thickness: float = 0.08, volume_size: float = 2.0):
        self.radius, self.thickness = radius, thickness
        self.lo, self.hi = _cube(volume_size)

    def __call__(self, points: torch.Tensor) -> torch.Tensor:
        r = points.norm(dim=-1)
        return torch.exp(-0.5 * ((r - self.radius) / self.thickness) ** 2)


class GridTarget(Target):
    """A user volume [D,H,W] (z, y, x order) over a bounding box, trilinearly interpolated; 0 outside."""

    def __init__(self, volume: torch.Tensor, lo: tuple[float, float, float], hi: tuple[float, float, float]):
        vol = torch.as_tensor(volume)
        if vol.dim() != 3 or min(vol.shape) < 2:
            raise ValueError(f"volume must be a [D,H,W] array with every size >= 2, got shape {list(vol.shape)}")
        vol = vol.to(torch.float64)
        if not bool(torch.isfinite(vol).all()):
            raise ValueError("volume contains non-finite values")
        self.volume = vol
        self.lo = torch.as_tensor(lo, dtype=torch.float32)
        self.hi = torch.as_tensor(hi, dtype=torch.float32)
        if self.lo.shape != (3,) or self.hi.shape != (3,) or not bool((self.hi > self.lo).all()):
            raise ValueError(f"bounding box must be lo < hi per axis (3 values each), got lo={lo}, hi={hi}")

    def __call__(self, points: torch.Tensor) -> torch.Tensor:
        lo, hi = self.lo.to(points.device, torch.float64), self.hi.to(points.device, torch.float64)
        u = 2 * (points.double() - lo) / (hi - lo) - 1  # [-1,1], xyz
        grid = u.reshape(1, 1, 1, -1, 3)
        vol = self.volume.to(points.device)[None, None]
        out = F.grid_sample(vol, grid, mode="bilinear", align_corners=True, padding_mode="zeros")
        return out.reshape(-1).to(points.dtype)


TARGETS = ("mixture", "torus", "shell")


def make_target(name: str, seed: int = 0, volume_size: float = 2.0, num_components: int = 8) -> Target:
    """A named analytic target: ``mixture`` (random known Gaussians), ``torus`` or ``shell``."""
    if name == "mixture":
        return GaussianMixtureTarget.random(num_components, seed, volume_size)
    s = volume_size / 2.0
    if name == "torus":
        return TorusTarget(0.5 * s, 0.12 * s, volume_size)
    if name == "shell":
        return ShellTarget(0.6 * s, 0.08 * s, volume_size)
    raise ValueError(f"unknown target {name!r}; known: {', '.join(TARGETS)}")


def slice_grid(target_or_field, axis: int = 2, value: float = 0.0, lo: float = -1.0, hi: float = 1.0, res: int = 96):
    """Values on a res x res slice through the volume (axis fixed at ``value``), as a [res,res] CPU tensor.

    The points are made on the device of a field's parameters (a target: the CPU).
    """
    device = torch.device("cpu")
    if isinstance(target_or_field, torch.nn.Module):
        device = next(target_or_field.parameters(), torch.empty(0)).device
    t = torch.linspace(lo, hi, res, device=device)
    a, b = torch.meshgrid(t, t, indexing="ij")
    pts = torch.zeros(res * res, 3, device=device)
    others = [i for i in range(3) if i != axis]
    pts[:, others[0]] = b.reshape(-1)
    pts[:, others[1]] = a.reshape(-1)
    pts[:, axis] = value
    params = list(target_or_field.parameters()) if isinstance(target_or_field, torch.nn.Module) else []
    if params:
        pts = pts.to(params[0].device, params[0].dtype)
    with torch.no_grad():
        return target_or_field(pts).reshape(res, res).cpu()


__all__ = ["GaussianMixtureTarget", "GridTarget", "ShellTarget", "Target", "TorusTarget", "make_target", "slice_grid"]
