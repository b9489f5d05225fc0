"""Divergence is caught early, with one message naming the step, what blew up and the likely cause."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch
from conftest import ext_built

from gsworkbench.train import TrainingDiverged, preset, train
from gsworkbench.train.divergence import DivergenceMonitor

BACKEND = "ext" if ext_built() else "torch"


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    from gsworkbench.synthetic import builtin_scene

    return builtin_scene("object", width=32, height=32, n_train=8, n_test=2, cache_dir=tmp_path_factory.mktemp("s"))


@pytest.mark.parametrize(
    ("overrides", "what"),
    [
        ({"lr_means": 1e3}, r"the means left the scene.*lr_means=1000"),  # trained to the end before, 12 dB
        # exp(log_scales) overflows: caught as huge log-scales, or (the render skips its value scan while
        # the monitor watches) as log-scales turned NaN by the next check; either way named, with the rate
        ({"lr_scales": 1e3}, r"log_scales (reached .*|became NaN); the learning rate lr_scales=1000"),
    ],
)
def test_a_runaway_learning_rate_stops_the_run_with_the_step_and_cause(scene, tmp_path, overrides, what):
    with pytest.raises(TrainingDiverged, match=r"training diverged at step \d+: " + what) as info:
        train(scene, preset("smoke", backend=BACKEND, **overrides), results_dir=tmp_path)
    assert info.value.step < 30  # early: the check runs every 10 steps
    history = pd.read_csv(tmp_path / "history.csv")  # what it did is kept
    assert len(history) == info.value.step and str(tmp_path / "history.csv") in str(info.value)
    assert not (tmp_path / "checkpoint.pt").exists()  # no checkpoint of blown-up parameters


def test_normal_training_is_not_flagged(scene):
    result = train(scene, preset("smoke", iterations=40, backend=BACKEND))
    assert result.metrics["iterations"] == 40


def _monitor(**kw) -> DivergenceMonitor:
    means = torch.randn(100, 3, generator=torch.Generator().manual_seed(0))
    lrs = {"lr_means": 1.6e-4, "lr_scales": 5e-3, "lr_quats": 1e-3, "lr_opacities": 0.05, "lr_sh0": 2.5e-3,
           "lr_shN": 1.25e-4}  # fmt: skip
    return DivergenceMonitor(torch.zeros(3), 1.0, means, lrs, **kw)


def _params(n: int = 100) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    shapes = {"means": (n, 3), "quats": (n, 4), "log_scales": (n, 3), "opacity_logits": (n,), "sh_dc": (n, 3),
              "sh_rest": (n, 15, 3)}  # fmt: skip
    out = {k: torch.randn(*s, generator=g).requires_grad_() for k, s in shapes.items()}
    for p in out.values():
        p.grad = torch.zeros_like(p)
    return out


def test_monitor_names_non_finite_values_and_gradients():
    mon, params = _monitor(), _params()
    mon.check_params(0, params)  # healthy
    with torch.no_grad():
        params["sh_dc"][3, 1] = math.nan
    with pytest.raises(TrainingDiverged, match="step 10: sh_dc became NaN; the learning rate lr_sh0=0.0025"):
        mon.check_params(10, params)
    params = _params()
    params["opacity_logits"].grad[5] = math.inf
    with pytest.raises(TrainingDiverged, match="the gradient of opacity_logits is inf.*lr_opacities"):
        mon.check_params(20, params)
    mon.check_params(21, params)  # between checks: not looked at
    with pytest.raises(TrainingDiverged):
        mon.check_params(21, params, force=True)


def test_monitor_catches_a_loss_that_keeps_rising_but_not_a_short_spike():
    mon = _monitor(patience=100)
    for s in range(300):
        mon.check_loss(s, 0.05)
    for s in range(300, 340):  # an opacity reset: a spike that recovers
        mon.check_loss(s, 0.5)
    for s in range(340, 600):
        mon.check_loss(s, 0.05)
    with pytest.raises(TrainingDiverged, match=r"the loss rose from .* and stayed there for 100 steps"):
        for s in range(600, 2000):
            mon.check_loss(s, 0.5)
    with pytest.raises(TrainingDiverged, match="the loss is nan"):
        _monitor().check_loss(0, math.nan)


def test_monitor_catches_an_early_blow_up_and_names_the_parameter_that_grew():
    """The smoothed best loss was tracked only from step 100: a blow-up before it went unflagged."""
    mon, params = _monitor(), _params()
    with torch.no_grad():
        params["sh_rest"].zero_()  # as initialised
    for s in range(12):
        mon.check_loss(s, 0.08, params)
    with torch.no_grad():
        params["sh_rest"].normal_(0.0, 300.0)  # a runaway SH rate
    with pytest.raises(TrainingDiverged, match=r"step (\d+): the loss blew up from 0.08 to .* \(smoothed\); "
                       r"sh_rest grew from \|0\| to \|.*\| at most; the learning rate lr_shN=0.000125 is "
                       r"likely too high") as info:  # fmt: skip
        for s in range(12, 200):
            mon.check_loss(s, 25.0, params)
    assert info.value.step < 50
    # a blow-up with no parameter grown: the inputs and rates in general
    mon = _monitor()
    with pytest.raises(TrainingDiverged, match=r"the loss blew up .*; check the inputs and learning rates"):
        for s in range(200):
            mon.check_loss(s, 0.08 if s < 12 else 25.0, _params())


def test_a_low_first_loss_or_an_opacity_reset_is_not_a_blow_up():
    mon = _monitor()
    mon.check_loss(0, 0.002)  # a view that is nearly all background
    for s in range(1, 3000):
        mon.check_loss(s, 0.1 if s % 7 else 0.01)
    for s in range(3000, 3100):  # an opacity reset: the render is the background for a while
        mon.check_loss(s, 0.6)
    for s in range(3100, 3500):
        mon.check_loss(s, 0.1)


@pytest.mark.parametrize(
    ("overrides", "rate"),
    [
        # the SH degree rises at step 10, so the runaway rate acts from then on
        ({"lr_shN": 1e3, "sh_degree_interval": 10}, "lr_shN=1000"),
        ({"lr_sh0": 1e3}, "lr_sh0=1000"),  # a 400x loss from the second step, which decays slowly
    ],
)
def test_a_runaway_colour_rate_is_named_within_tens_of_steps(scene, tmp_path, overrides, rate):
    """lr_shN=1e3 sent the loss from 0.08 to 22-30 by step 100 and the run finished with exit 0 at
    9.4 dB; lr_sh0=1e3 spiked the loss unflagged."""
    with pytest.raises(TrainingDiverged, match=rf"training diverged at step \d+: .*{rate} is likely too high"
                       ) as info:  # fmt: skip
        train(scene, preset("smoke", backend=BACKEND, **overrides), results_dir=tmp_path)
    assert info.value.step <= 50


def test_monitor_catches_a_loss_above_the_ceiling_from_the_first_steps():
    mon, params = _monitor(loss_ceiling=2.4), _params()
    mon.check_loss(0, 0.1, params)
    with torch.no_grad():
        params["sh_dc"].mul_(100.0)
    with pytest.raises(TrainingDiverged, match=r"the loss blew up from 0.1 to .*; sh_dc grew .*lr_sh0") as info:
        for s in range(1, 100):
            mon.check_loss(s, 40.0 * 0.9**s, params)
    assert info.value.step <= 21


def test_the_scene_size_follows_a_point_cloud_beyond_the_cameras():
    """A capture's cloud may lie far outside the cameras' extent: its own spread sets the bounds."""
    far = torch.randn(100, 3, generator=torch.Generator().manual_seed(0)) * 50
    mon = DivergenceMonitor(torch.zeros(3), 0.1, far, {"lr_means": 1.0})
    params = _params()
    with torch.no_grad():
        params["means"].copy_(far)
    mon.check_params(0, params)
    assert mon.reference > 40
