"""Named workloads to profile: a training preset, a render case, a field case, or any callable.

A :class:`Workload` is set up once (scenes, inputs) and then run several times. Each run receives a
``stage`` hook (``name -> context manager``) and wraps its stages in it, so that the profiler can time
them and open ``torch.profiler.record_function("stage:<name>")`` ranges; a run may also return stage
seconds it measured itself (the trainer's per-step timers) on the ``clock`` it is given, the one the
hook reads.

Spec strings (the command line): ``train:<preset>`` (``smoke``, ``micro``, ...; any
:class:`gsworkbench.train.TrainConfig` field is a parameter), ``render`` and ``field`` (parameters in
:data:`RENDER_DEFAULTS` and :data:`FIELD_DEFAULTS`).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import torch

StageHook = Callable[[str], AbstractContextManager[Any]]
Clock = Callable[[], float]  # seconds
RunFn = Callable[[StageHook, Clock], "Mapping[str, float] | None"]

# One run of ``render``: ``calls`` renders of one view of ``synthetic_splats(num, sh_degree)``.
RENDER_DEFAULTS: dict[str, Any] = dict(
    num=10_000, width=256, height=256, sh_degree=3, mode="forward+backward", backend="ext", calls=5, device="cpu"
)
# One run of ``field``: ``calls`` evaluations of N Gaussians at B points.
FIELD_DEFAULTS: dict[str, Any] = dict(
    N=1000, B=20_000, covariance="full", mode="forward+backward", backend="ext", calls=5, device="cpu"
)
MODES = ("forward", "forward+backward")


@dataclass
class Workload:
    """``setup()`` builds the inputs once and returns ``run(stage, clock)``, one repetition of the work.

    ``name`` and ``params`` identify the workload: two profiles compare only when both agree
    (``backend`` aside, see :mod:`gsworkbench.profiling.compare`). ``device`` is ``"cpu"`` or ``"cuda"``.
    """

    name: str
    params: dict[str, Any]
    setup: Callable[[], RunFn]
    device: str = "cpu"
    stages: tuple[str, ...] = field(default_factory=tuple)  # the stage order for tables (others follow)


def describe_workloads() -> str:
    """One line naming the workload specs this module accepts."""
    # each workload imports what it runs (train, splat, field) when it is set up: importing profiling
    # loads none of them
    from gsworkbench.train import PRESETS

    return f"train:<preset> (presets: {', '.join(PRESETS)}), render, field"


def _coerce(name: str, default: Any, value: Any) -> Any:
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ValueError(f"parameter {name} must be true or false, got {value!r}")
        return value
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"parameter {name} must be an int >= 1, got {value!r}")
        return value
    if isinstance(default, str) and not isinstance(value, str):
        raise ValueError(f"parameter {name} must be a string, got {value!r}")
    return value


def _merge(kind: str, defaults: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ValueError(f"unknown {kind} parameter(s): {', '.join(unknown)}; known: {', '.join(defaults)}")
    out = {k: _coerce(k, v, given[k]) if k in given else v for k, v in defaults.items()}
    if out["mode"] not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {out['mode']!r}")
    if out["backend"] not in ("torch", "ext"):
        raise ValueError(f"backend must be 'torch' or 'ext', got {out['backend']!r}")
    if out["device"] not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {out['device']!r}")
    if out["device"] == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' asked for, but torch sees no CUDA device")
    return out


def render_workload(**params: Any) -> Workload:
    """``calls`` renders (forward, or forward + backward of sum(colours) + sum(alphas)) per run. Stages:
    rasterize's four (``project`` includes the input checks, ``rasterize`` the background), ``glue`` (the
    rest of the ``rasterize`` call, between its stages) and ``backward`` (the loss sum and the backward
    pass)."""
    p = _merge("render", RENDER_DEFAULTS, params)

    def setup() -> RunFn:
        from gsworkbench.core import cameras
        from gsworkbench.core.splats import synthetic_splats
        from gsworkbench.splat import rasterize

        dev = torch.device(p["device"])
        s = synthetic_splats(p["num"], p["sh_degree"], seed=0).to(dev)
        vm, Ks = cameras.orbit_cameras(1, p["width"], p["height"], distance=3.0)
        vm, Ks = vm.to(dev), Ks.to(dev)
        grad = p["mode"] == "forward+backward"
        leaves = [t.detach().clone().requires_grad_(grad) for t in (s.means, s.quats, s.scales, s.opacities, s.sh)]

        def run(stage: StageHook, clock: Clock) -> dict[str, float]:
            inner = [0.0]

            @contextlib.contextmanager
            def timed(name: str) -> Iterator[None]:
                t0 = clock()
                with stage(name):
                    yield
                inner[0] += clock() - t0

            glue = 0.0
            for _ in range(p["calls"]):
                for t in leaves:
                    t.grad = None
                inner[0], t0 = 0.0, clock()
                with torch.set_grad_enabled(grad):
                    img, alpha, _ = rasterize(
                        *leaves, vm, Ks, p["width"], p["height"], sh_degree=p["sh_degree"], backend=p["backend"],
                        stages=timed,
                    )  # fmt: skip
                glue += clock() - t0 - inner[0]
                if grad:
                    with stage("backward"):
                        (img.sum() + alpha.sum()).backward()
            return {"glue": glue}

        return run

    stages = ("glue", "project", "sh", "isect", "rasterize", "backward")
    return Workload("render", p, setup, p["device"], stages)


def field_workload(**params: Any) -> Workload:
    """``calls`` field evaluations (forward, or forward + backward to every input) per run."""
    p = _merge("field", FIELD_DEFAULTS, params)
    if p["covariance"] not in ("full", "diag"):
        raise ValueError(f"covariance must be 'full' or 'diag', got {p['covariance']!r}")

    def setup() -> RunFn:
        from gsworkbench.field import evaluate
        from gsworkbench.field.api import random_field_inputs

        grad = p["mode"] == "forward+backward"
        inputs = [t.to(p["device"]).requires_grad_(grad) for t in random_field_inputs(p["B"], p["N"], p["covariance"])]

        def run(stage: StageHook, clock: Clock) -> None:
            for _ in range(p["calls"]):
                for t in inputs:
                    t.grad = None
                with torch.set_grad_enabled(grad), stage("forward"):
                    values = evaluate(*inputs, covariance=p["covariance"], backend=p["backend"])
                if grad:
                    with stage("backward"):
                        values.sum().backward()

        return run

    return Workload("field", p, setup, p["device"], ("forward", "backward"))


def train_workload(preset: str, scene: Any = None, **overrides: Any) -> Workload:
    """``iterations`` training steps of preset ``preset`` from a fresh trainer per run (same seed, so the
    same work each run). ``scene``: a :class:`gsworkbench.scenes.Scene` (default: the preset's built-in
    scene). ``overrides``: any :class:`gsworkbench.train.TrainConfig` field. Stages: ``init`` (the
    trainer's construction) and the trainer's per-step stages, summed over the steps."""
    from gsworkbench.core.limits import retained_freed_memory
    from gsworkbench.train import STAGES, Trainer, preset_scene
    from gsworkbench.train import preset as train_preset

    cfg = train_preset(preset, **{"progress": False, **overrides})
    scene_params = preset_scene(preset)
    params = {"preset": preset, **cfg.to_dict(), "scene": scene_params if scene is None else str(scene.name)}

    def setup() -> RunFn:
        if scene is None:
            from gsworkbench.synthetic import builtin_scene

            data = builtin_scene(**scene_params)
        else:
            data = scene

        def run(stage: StageHook, clock: Clock) -> dict[str, float]:
            with stage("init"):
                trainer = Trainer(data, cfg, ranges=True, clock=clock)
            sums = dict.fromkeys(STAGES, 0.0)
            with retained_freed_memory():  # the malloc policy of Trainer.run
                for _ in range(cfg.iterations):
                    row = trainer.step()
                    for s in STAGES:
                        sums[s] += row[f"t_{s}"]
            return sums

        return run

    return Workload(f"train:{preset}", params, setup, cfg.device, ("init", *STAGES))


def callable_workload(fn: Callable[..., Any], name: str | None = None, params: Mapping[str, Any] | None = None,
                      device: str = "cpu") -> Workload:  # fmt: skip
    """Any Python callable: ``fn()``, or ``fn(stage)`` to time its own stages with ``with stage("x"):``.
    ``name`` defaults to ``callable:<module>.<qualname>``."""
    if not callable(fn):
        raise ValueError(f"a callable workload needs a function, got {type(fn).__name__}")
    try:
        takes_stage = len(inspect.signature(fn).parameters) >= 1
    except (TypeError, ValueError):
        takes_stage = False
    label = name or f"callable:{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"

    def setup() -> RunFn:
        def run(stage: StageHook, clock: Clock) -> Any:
            if takes_stage:
                fn(stage)
            else:
                with stage("call"):
                    fn()

        return run

    return Workload(label, dict(params or {}), setup, device)


def make_workload(spec: str | Workload | Callable[..., Any], params: Mapping[str, Any] | None = None) -> Workload:
    """The workload named by ``spec`` (``train:<preset>``, ``render``, ``field``) with ``params``; a
    :class:`Workload` is returned as it is, a callable wrapped by :func:`callable_workload`."""
    params = dict(params or {})
    if isinstance(spec, Workload):
        if params:
            raise ValueError("parameters apply to named workloads, not to a Workload object")
        return spec
    if callable(spec):
        return callable_workload(spec, params=params)
    if not isinstance(spec, str):
        raise ValueError(f"a workload is a name, a Workload or a callable, got {type(spec).__name__}")
    if spec.startswith("train:"):
        return train_workload(spec.split(":", 1)[1], **params)
    if spec == "render":
        return render_workload(**params)
    if spec == "field":
        return field_workload(**params)
    raise ValueError(f"unknown workload {spec!r}; workloads: {describe_workloads()}")


def workload_spec(
    workload: str, preset: str, backend: str, device: str = "cpu", iterations: int = 0
) -> tuple[str, dict]:
    """The (spec, params) of ``workload`` (``train``, ``render`` or ``field``) for one backend, as the
    profiling notebook names them; ``preset`` and ``iterations`` (0: the preset's) apply to ``train``."""
    params: dict[str, Any] = {"backend": backend, "device": device}
    if workload == "train":
        if iterations:
            params["iterations"] = iterations
        return f"train:{preset}", params
    if workload in ("render", "field"):
        return workload, params
    raise ValueError(f"unknown workload {workload!r}; one of train, render, field")
