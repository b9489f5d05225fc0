"""``transform``: move, rotate and scale splat sets, SH included, with a choice of backend."""

from __future__ import annotations

from typing import Any

import torch

from gsworkbench._ext import has_ext, has_kernel, require_kernel
from gsworkbench.core.splats import SplatSet
from gsworkbench.core.validation import check_choice
from gsworkbench.transforms import _numba_impl
from gsworkbench.transforms._numpy_impl import transform_numpy
from gsworkbench.transforms._torch_impl import transform_torch
from gsworkbench.transforms.frames import Frames, make_frames
from gsworkbench.transforms.ops import transform_ext

BACKENDS = ("auto", "numpy", "numba", "torch", "ext")
_FIELDS = ("means", "quats", "log_scales", "sh_rest")


def resolve_backend(backend: str, splats: SplatSet) -> str:
    """The concrete backend ``auto`` stands for, or a ValueError when ``backend`` cannot run here.

    ``auto``: ``torch`` when the splats require grad; else ``ext`` when the extension has a kernel
    for the splats' device (CPU, or CUDA in CUDA builds); else ``numba``/``numpy`` on the CPU and
    ``torch`` on other devices.
    """
    check_choice("backend", backend, BACKENDS)
    grad = any(getattr(splats, f).requires_grad for f in _FIELDS)
    device = splats.means.device
    if backend == "auto":
        if grad:
            return "torch"
        if device.type != "cpu":
            return "ext" if has_kernel("transform_splats", device.type) else "torch"
        return "ext" if has_ext() else ("numba" if _numba_impl.available() else "numpy")
    if backend != "torch" and grad:
        raise ValueError(f"backend {backend!r} is not differentiable but the splats require grad; use backend='torch'")
    if backend in ("numpy", "numba") and device.type != "cpu":
        raise ValueError(f"backend {backend!r} runs on the CPU only; use backend='torch' or 'ext' on {device}")
    if backend == "ext":
        require_kernel("transform_splats", device.type)
    return backend


def _check_out(out: Any, splats: SplatSet, frames: Frames) -> list[SplatSet] | None:
    """The output sets, one per frame, checked against the input's shapes, dtype and device."""
    if out is None:
        return None
    if frames.batched and not isinstance(out, (list, tuple)):
        raise ValueError(f"out must be a list of {len(frames)} SplatSets for a batch of {len(frames)} frames")
    if not frames.batched and not isinstance(out, SplatSet):
        raise ValueError(f"out must be a SplatSet for a single transform, got {type(out).__name__}")
    outs = list(out) if frames.batched else [out]
    if len(outs) != len(frames):
        raise ValueError(f"out holds {len(outs)} SplatSets, the transform has {len(frames)} frames")
    for i, o in enumerate(outs):
        if not isinstance(o, SplatSet):
            raise ValueError(f"out must hold SplatSets, got {type(o).__name__}")
        for name in ("means", "quats", "log_scales", "opacity_logits", "sh_dc", "sh_rest"):
            a, b = getattr(o, name), getattr(splats, name)
            if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
                raise ValueError(
                    f"out[{i}].{name} must match the input ({list(b.shape)}, {b.dtype}, {b.device}); got "
                    f"{list(a.shape)}, {a.dtype}, {a.device}"
                )
            if not a.is_contiguous():
                raise ValueError(f"out[{i}].{name} must be contiguous")
    return outs


def _run_kernel(backend: str, inputs: list[torch.Tensor], params: dict[str, torch.Tensor], general: bool,
                outs: list[torch.Tensor]) -> None:  # fmt: skip
    if backend == "ext":
        transform_ext(*inputs, *params.values(), general, *outs)
        return
    arrays = [t.detach().numpy() for t in [*inputs, *params.values()]]
    out_arrays = [t.detach().numpy() for t in outs]
    if backend == "numba":
        _numba_impl.transform_numba(*arrays, general, *out_arrays)
    else:
        transform_numpy(*arrays, general, *out_arrays)


def transform(
    splats: SplatSet,
    frames: Frames | None = None,
    *,
    rotation: Any = None,
    translation: Any = None,
    scale: Any = None,
    center: Any = None,
    backend: str = "auto",
    out: SplatSet | list[SplatSet] | None = None,
    copy_unchanged: bool = False,
) -> SplatSet | list[SplatSet]:
    """Applies ``x -> s R (x - c) + c + t`` to every splat (or F such transforms in one call).

    Args:
        splats: N splats (float32 or float64; the output has the same dtype and device).
        frames: a prebuilt :class:`~gsworkbench.transforms.frames.Frames` (e.g. from
            :func:`inverse` / :func:`compose`) instead of rotation/translation/scale/center. Under
            torch.compile pass Frames built outside the compiled function: building them is numpy
            with data-dependent checks (graph breaks); with prebuilt Frames the call traces whole.
            Building Frames costs ~0.15 ms (checks, the rotation and its quaternion, in float64), so loops
            that reuse one transform should build it once.
        rotation: 3x3 rotation matrix or wxyz quaternion; batched [F,3,3] / [F,4].
        translation: t [3] or [F,3] (world units).
        scale: s > 0, a scalar or 3-vector (``diag(s)`` applied after R, along world axes); [F] or [F,3].
        center: pivot c [3] or [F,3] (default: the origin).
        backend: ``auto`` | ``numpy`` | ``numba`` | ``torch`` | ``ext`` (see :func:`resolve_backend`).
            Only ``torch`` is differentiable (it runs on any device; ``ext`` runs on CUDA too in CUDA
            builds); the others raise ValueError when the splats require grad.
        out: preallocated output: a SplatSet of the input's shapes (a list of F for a batch). It may
            be the input itself (in-place transform). Reusing buffers in a loop (animation frames)
            avoids faulting in fresh output memory on every call, which dominates at large N. The
            transformed fields (means, quats, log_scales, sh_rest) are written into out's tensors;
            out's ``opacity_logits`` and ``sh_dc`` attributes are set to the input's tensors (shared,
            not copied, as without ``out``): the transform does not change them, and copying them
            would be a third of the memory traffic of an SH-free transform.
        copy_unchanged: with ``out``, copy the input's ``opacity_logits`` and ``sh_dc`` into out's own
            tensors instead of sharing them (for callers that need out to own independent buffers).

    Returns:
        The transformed SplatSet (a list of F for a batch; ``out`` itself when given). Its
        ``opacity_logits`` and ``sh_dc`` are the input's tensors (unchanged, shared, not copied),
        unless ``copy_unchanged``.

    Rule: means ``x -> A x + b`` with ``A = diag(s) R``, ``b = c + t - A c``; opacities and SH DC
    unchanged. Uniform scale: quaternions left-multiplied by R's quaternion (their norm is kept),
    log-scales + log s. Non-uniform scale (or any A that is not s·R): each covariance becomes
    ``A Sigma A^T`` and is re-decomposed into a unit quaternion and log-scales (per-Gaussian SVD).
    SH bands l >= 1 are rotated by the rotation part of A (the orthogonal factor of its polar
    decomposition, one rotation per frame), in the 3DGS real-SH basis of
    :func:`gsworkbench.core.gaussians.sh_basis`, so a splat seen from a camera moved by the same rigid
    transform has the same colour.
    """
    if not isinstance(splats, SplatSet):
        raise ValueError(f"splats must be a SplatSet, got {type(splats).__name__}")
    if frames is not None:
        if any(a is not None for a in (rotation, translation, scale, center)):
            raise ValueError("give either frames or rotation/translation/scale/center, not both")
        if not isinstance(frames, Frames):
            raise ValueError(f"frames must be a Frames, got {type(frames).__name__}")
    else:
        frames = make_frames(rotation, translation, scale, center)
    backend = resolve_backend(backend, splats)
    outs = _check_out(out, splats, frames)
    general = not frames.is_similarity
    dtype, device = splats.means.dtype, splats.means.device
    # per-frame parameters, computed once by Frames for every backend (affine, quat_r, log_s, sh_rot)
    params = {k: v.to(dtype=dtype, device=device) for k, v in frames.params(splats.sh_degree).items()}
    inputs = [getattr(splats, f).contiguous() for f in _FIELDS]
    F, N, K = len(frames), len(splats), splats.sh_rest.shape[1]

    if backend == "torch":
        results = transform_torch(*inputs, *params.values(), general)
        if outs is None:
            return _wrap(splats, results, frames.batched)
        with torch.no_grad():
            for f, o in enumerate(outs):
                for name, r in zip(_FIELDS, results, strict=True):
                    getattr(o, name).copy_(r[f])
                _set_unchanged(splats, o, copy_unchanged)
        return out

    if outs is None:
        stacked = [
            torch.empty(F, N, 3, dtype=dtype, device=device),
            torch.empty(F, N, 4, dtype=dtype, device=device),
            torch.empty(F, N, 3, dtype=dtype, device=device),
            torch.empty(F, N, K, 3, dtype=dtype, device=device),
        ]
        _run_kernel(backend, inputs, params, general, stacked)
        return _wrap(splats, stacked, frames.batched)
    for f, o in enumerate(outs):
        frame_params = {k: v[f : f + 1] for k, v in params.items()}
        _run_kernel(backend, inputs, frame_params, general, [getattr(o, name)[None] for name in _FIELDS])
        _set_unchanged(splats, o, copy_unchanged)
    return out


def _set_unchanged(src: SplatSet, dst: SplatSet, copy: bool) -> None:
    """dst's opacity_logits and sh_dc: the input's tensors (shared), or copies of them into dst's own."""
    for name in ("opacity_logits", "sh_dc"):
        a, b = getattr(src, name), getattr(dst, name)
        if a is b:
            continue
        if copy:
            if a.data_ptr() != b.data_ptr():
                b.copy_(a)
        else:
            setattr(dst, name, a)


def _wrap(splats: SplatSet, results: list[torch.Tensor] | tuple[torch.Tensor, ...], batched: bool):  # noqa: ANN202
    if not batched:
        return SplatSet._trusted(*(r[0] for r in results[:3]), splats.opacity_logits, splats.sh_dc, results[3][0])
    per_frame = [r.unbind(0) for r in results]
    return [
        SplatSet._trusted(m, q, s, splats.opacity_logits, splats.sh_dc, sh)
        for m, q, s, sh in zip(*per_frame, strict=True)
    ]


def inverse(frames: Frames | None = None, **params: Any) -> Frames:
    """The inverse of ``frames`` (or of the transform given by rotation/translation/scale/center).

    ``transform(transform(splats, f), inverse(f))`` gives back the splats to float32 rounding (for a
    non-uniform scale the quaternions/scales come back as an equivalent decomposition of the same
    covariance).
    """
    if frames is None:
        frames = make_frames(**params)
    elif params:
        raise ValueError("give either frames or transform parameters, not both")
    return frames.inverse()


def compose(second: Frames, first: Frames) -> Frames:
    """One transform applying ``first`` then ``second`` (frame by frame; a single frame broadcasts)."""
    if len(second) != len(first) and 1 not in (len(second), len(first)):
        raise ValueError(f"cannot compose batches of {len(second)} and {len(first)} frames")
    return second.compose(first)
