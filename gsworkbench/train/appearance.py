"""Per-photo appearance: what a phone's auto-exposure and white balance change from photo to photo,
learned beside the splats so that the splats need not bend to it.

``appearance="affine"`` gives each training photo a colour transform, ``c -> A c + b`` (a 3x3 matrix
and an offset, started at the identity), applied to the render before the loss and learned with its
own Adam (:attr:`PhotoAppearance.lr`), as the 3DGS repository's exposure compensation does. A held-out
photo has no transform of its own: it is rendered with the mean of the training photos' transforms
(their average exposure and balance), and :func:`colour_corrected_psnr` scores it also after the
least-squares affine colour fit to the photo, the measure of Mip-NeRF 360 and Zip-NeRF for captures
whose exposure changes: it sees the geometry and texture, not the exposure.
"""

from __future__ import annotations

from typing import Any

import torch

APPEARANCES = ("none", "affine")


class PhotoAppearance:
    """One affine colour transform per photo of a scene with ``num_views`` views: ``params`` [V,3,4],
    the deviation from the identity (``A = I + params[..., :3]``, ``b = params[..., 3]``), zeros at the
    start; ``train_ids``: the views whose transforms are learned (the held-out ones use their mean)."""

    def __init__(self, num_views: int, train_ids: torch.Tensor, lr: float, device: torch.device | str = "cpu") -> None:
        self.params = torch.zeros(num_views, 3, 4, device=device, requires_grad=True)
        self.train_ids = torch.as_tensor(train_ids, dtype=torch.long, device=device)
        self.lr = lr
        self.optimizer = torch.optim.Adam([self.params], lr=lr, eps=1e-15)

    def transform(self, view: int, held_out: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """(A [3,3], b [3]) of ``view``; ``held_out``: the mean of the training views' instead."""
        d = self.params[self.train_ids].mean(0) if held_out else self.params[view]
        return torch.eye(3, device=d.device, dtype=d.dtype) + d[:, :3], d[:, 3]

    def apply(self, colors: torch.Tensor, view: int, held_out: bool = False) -> torch.Tensor:
        """``colors`` [...,3] as photo ``view`` would have recorded them: ``A c + b``."""
        A, b = self.transform(view, held_out)
        return colors @ A.T + b

    def step(self) -> None:
        """One Adam step on the transforms that have gradients, then their gradients cleared."""
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def state_dict(self) -> dict[str, Any]:
        return {"params": self.params.detach().cpu(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        with torch.no_grad():
            self.params.copy_(state["params"].to(self.params.device))
        self.optimizer.load_state_dict(state["optimizer"])


def colour_corrected_psnr(img: torch.Tensor, ref: torch.Tensor) -> float:
    """PSNR in dB of ``img`` against ``ref`` ([H,W,3] in [0,1]) after the affine colour transform of
    ``img`` (3x3 and an offset, least squares over every pixel) that best matches ``ref``, clamped to
    [0, 1]: the score that an exposure or white-balance difference alone does not lower."""
    x = img.detach().double().reshape(-1, 3).cpu()
    y = ref.detach().double().reshape(-1, 3).cpu()
    design = torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype)], dim=1)
    fit = torch.linalg.lstsq(design, y).solution
    mse = float((((design @ fit).clamp(0, 1) - y) ** 2).mean())
    return float("inf") if mse <= 0 else -10.0 * float(torch.log10(torch.tensor(mse)))
