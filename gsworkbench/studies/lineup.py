"""Implementation line-ups: external implementations of an op, benchmarked beside ours.

``register_implementation("rasterize", "mine", fn)`` adds ``fn`` (a callable with the signature of
:func:`gsworkbench.splat.rasterize`, less ``backend``; returning ``(render_colors, render_alphas,
meta)``) to the ``render`` suite's forward and forward+backward cases, as backend ``"mine"``
(:func:`gsworkbench.studies.suites.render.render_lineup_cases`: the same calls as ours). Cases that
differ only in the backend are timed in the same interleaved rounds, so ``mine`` runs beside ``ext``
and ``torch`` on the same inputs.

Before any timing, each implementation's outputs are checked against our pure-torch reference
(``backend="torch"``) on a fixed scene (:data:`CHECK_SCENE`, with and without SH): colours and alphas
must agree to a relative error of :data:`CHECK_TOL`. An implementation that fails is recorded in the
table as skipped, with the error, and never timed.

gsplat: when ``gsplat`` is importable and CUDA is available, :func:`gsplat_rasterize` (its
``rasterization``, inputs moved to the GPU and the outputs back, so the timings include the transfers)
is registered as ``"gsplat"`` automatically. That adapter is untested here (no CUDA, no gsplat).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import torch

from gsworkbench.core import cameras
from gsworkbench.core.splats import synthetic_splats
from gsworkbench.splat import rasterize

OPS = ("rasterize",)
CHECK_SCENE = {"num": 2_000, "width": 128, "height": 96}
CHECK_TOL = 1e-4
_IMPLEMENTATIONS: dict[str, dict[str, Callable[..., Any]]] = {op: {} for op in OPS}
_CHECKED: dict[tuple[str, str, int], str | None] = {}


def register_implementation(op: str, name: str, fn: Callable[..., Any]) -> None:
    """Adds ``fn`` as implementation ``name`` of ``op`` (ValueError on unknown ops or taken names)."""
    if op not in OPS:
        raise ValueError(f"unknown op {op!r} for a line-up; known: {', '.join(OPS)}")
    if name in ("torch", "ext", "copy") or not name or not callable(fn):
        raise ValueError(f"implementation name {name!r} is taken or empty, or fn is not callable")
    _IMPLEMENTATIONS[op][name] = fn


def unregister_implementation(op: str, name: str) -> None:
    _IMPLEMENTATIONS.get(op, {}).pop(name, None)


def implementations(op: str) -> dict[str, Callable[..., Any]]:
    """The registered external implementations of ``op``, by name."""
    return dict(_IMPLEMENTATIONS[op])


def _rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def check_rasterize(name: str, fn: Callable[..., Any]) -> str | None:
    """None when ``fn`` matches the torch reference on :data:`CHECK_SCENE` (SH degree 0 and 3), else why not."""
    key = ("rasterize", name, id(fn))
    if key in _CHECKED:
        return _CHECKED[key]
    reason = None
    try:
        w, h = CHECK_SCENE["width"], CHECK_SCENE["height"]
        vm, Ks = cameras.orbit_cameras(1, w, h, distance=3.0)
        for degree in (0, 3):
            s = synthetic_splats(CHECK_SCENE["num"], degree, seed=123)
            args = (s.means, s.quats, s.scales, s.opacities, s.sh, vm, Ks, w, h)
            with torch.no_grad():
                ref_img, ref_alpha, _ = rasterize(*args, sh_degree=degree, backend="torch")
                img, alpha, _ = fn(*args, sh_degree=degree)
            if tuple(img.shape) != tuple(ref_img.shape) or tuple(alpha.shape) != tuple(ref_alpha.shape):
                reason = f"output shapes {tuple(img.shape)}, {tuple(alpha.shape)} differ from the reference's"
                break
            err = max(_rel_err(img, ref_img), _rel_err(alpha, ref_alpha))
            if not err < CHECK_TOL:
                reason = f"output differs from the torch reference (SH degree {degree}): relative error {err:.2e}"
                break
    except Exception as e:  # a crashing implementation is reported, not timed
        reason = f"failed on the check scene: {type(e).__name__}: {e}"
    _CHECKED[key] = reason
    return reason


def gsplat_rasterize(*args: Any, **kw: Any) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
    """gsplat's ``rasterization`` with our signature: tensors to CUDA, outputs back (UNTESTED here)."""
    from gsplat import rasterization

    device = args[0].device
    moved = [a.cuda() if isinstance(a, torch.Tensor) else a for a in args]
    img, alpha, meta = rasterization(*moved, **kw)
    torch.cuda.synchronize()
    return img.to(device), alpha.to(device), meta


if importlib.util.find_spec("gsplat") is not None and torch.cuda.is_available():  # pragma: no cover
    register_implementation("rasterize", "gsplat", gsplat_rasterize)
