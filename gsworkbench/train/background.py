"""Backgrounds: the colour RGBA views are composited over for training and for evaluation.

A scene's images [V,H,W,3] are already composited over ``scene.background`` by its loader; with the
alphas [V,H,W,1] they can be recomposited over any other colour: img + (1 - a) (bg - scene_bg).
Training uses ``TrainConfig.background`` ("scene" or "random", see the trainer); evaluation uses
``TrainConfig.eval_background``: "scene", or the colour a dataset's protocol scores on ("white" for
NeRF-synthetic, as the 3DGS paper evaluates it), so that a scene loaded over another colour is still
scored the way published numbers are.
"""

from __future__ import annotations

from typing import Any

import torch

NAMED = {"white": (1.0, 1.0, 1.0), "black": (0.0, 0.0, 0.0)}


def eval_background(scene: Any, name: str) -> tuple[float, float, float]:
    """The RGB in [0,1] that evaluation composites and renders over: the scene's own for "scene",
    else the named colour. ValueError when that differs from the scene's and it has no alphas."""
    if name == "scene":
        return tuple(float(c) for c in scene.background)  # type: ignore[return-value]
    if name not in NAMED:
        raise ValueError(f"eval_background must be 'scene' or one of {sorted(NAMED)}, got {name!r}")
    bg = NAMED[name]
    if scene.alphas is None and tuple(float(c) for c in scene.background) != bg:
        raise ValueError(
            f"eval_background {name!r} differs from scene {scene.name!r}'s background {tuple(scene.background)}, "
            "and the scene has no alphas to recomposite its images (load it over that colour instead)"
        )
    return bg


def over_background(scene: Any, view: int, bg: torch.Tensor) -> torch.Tensor:
    """View ``view`` of ``scene`` composited over ``bg`` [3] instead of the scene's background:
    [H,W,3] on the images' device (the image itself when the colours agree or there are no alphas)."""
    img = scene.images[view]
    scene_bg = torch.tensor(scene.background, dtype=img.dtype, device=img.device)
    bg = bg.to(img.device, img.dtype)
    if scene.alphas is None or torch.equal(bg, scene_bg):
        return img
    return img + (1 - scene.alphas[view]) * (bg - scene_bg)
