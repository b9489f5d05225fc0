"""TrainConfig with its strategy dataclasses: checks from field metadata, the nested dict of checkpoints
and metrics.json, flat keys (notebook parameters, the CLI's -p, old checkpoints) routed into the
strategy, and the presets as frozen TrainConfig instances."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError, dataclass, fields, replace
from typing import Any

import pytest
import torch

from gsworkbench.train import PRESETS, DefaultStrategy, MCMCStrategy, TrainConfig, Trainer, preset, preset_scene
from gsworkbench.train.presets import MCMC_RUN_SETTINGS
from gsworkbench.train.settings import check_settings, setting


def _old_flat(cfg: TrainConfig) -> dict[str, Any]:
    """``cfg`` as the flat dict checkpoints held before strategies had their own settings: the
    strategy's name and every strategy's settings beside the run-wide ones (the other strategy's at
    their defaults, MCMC's min_opacity as prune_opacity, refine_stop None: "by strategy")."""
    nested = cfg.to_dict()
    strategy = nested.pop("strategy")
    name = strategy.pop("name")
    if name == "mcmc":
        strategy["prune_opacity"] = strategy.pop("min_opacity")
    flat = {**nested, **vars(DefaultStrategy()), **vars(MCMCStrategy()), "strategy": name}
    del flat["min_opacity"]
    flat.update(strategy)
    if strategy["refine_stop"] == type(cfg.strategy)().refine_stop:
        flat["refine_stop"] = None
    return flat


def test_a_new_field_is_checked_by_its_metadata_alone():
    @dataclass(frozen=True)
    class Example:
        steps: int = setting(10, kind="int", min=1)
        share: float | None = setting(None, kind="number", min=0, max=1, min_open=True, optional=True)
        mode: str = setting("a", kind="choice", choices=("a", "b"))

        def __post_init__(self) -> None:
            check_settings(self)

    assert Example(steps=3, share=1.0, mode="b").share == 1.0
    for bad, message in [
        (dict(steps=0), "steps must be an int >= 1, got 0"),
        (dict(steps=True), "steps must be an int >= 1, got True"),
        (dict(share=0.0), r"share must be None or lie in \(0, 1\], got 0.0"),
        (dict(mode="c"), r"mode must be one of \('a', 'b'\), got 'c'"),
    ]:
        with pytest.raises(ValueError, match=message):
            Example(**bad)


@pytest.mark.parametrize("kind", [TrainConfig, DefaultStrategy, MCMCStrategy])
def test_every_bounded_field_refuses_a_value_below_its_minimum(kind):
    """Walks the metadata as check_settings does, so a field added with a bound is covered too."""
    bounded = [f for f in fields(kind) if f.metadata.get("min") is not None]
    assert len(bounded) >= 3
    for f in bounded:
        with pytest.raises(ValueError, match=f"^{f.name} must "):
            kind(**{f.name: f.metadata["min"] - 1})


def test_strategies_own_their_settings():
    assert {f.name for f in fields(TrainConfig)} & {"cap_max", "noise_lr", "refine_every", "absgrad"} == set()
    assert TrainConfig().strategy == DefaultStrategy() and TrainConfig(strategy="mcmc").strategy == MCMCStrategy()
    assert DefaultStrategy().refine_stop == 15_000 and MCMCStrategy().refine_stop == 25_000
    assert DefaultStrategy().grow_grad2d_threshold == 2e-4
    assert DefaultStrategy(grow_grad2d=1e-3).grow_grad2d_threshold == 1e-3
    with pytest.raises(ValueError, match="cap_max must be an int >= 1"):
        MCMCStrategy(cap_max=0)
    with pytest.raises(ValueError, match="strategy must be one of"):
        TrainConfig(strategy={"name": "adc"})
    with pytest.raises(ValueError, match="unknown mcmc strategy parameter.*absgrad"):
        TrainConfig(strategy={"name": "mcmc", "absgrad": True})
    with pytest.raises(FrozenInstanceError):
        TrainConfig().strategy.refine_every = 3  # type: ignore[misc]


@pytest.mark.parametrize("strategy", ["default", "mcmc"])
def test_the_nested_dict_round_trips_through_json(strategy):
    cfg = preset("smoke", strategy=strategy, resolution_schedule="100:2", refine_every=7)
    data = json.loads(json.dumps(cfg.to_dict()))
    assert data["strategy"]["name"] == strategy and data["strategy"]["refine_every"] == 7
    assert "refine_every" not in data and "cap_max" not in data
    assert TrainConfig.from_dict(data) == cfg
    with pytest.raises(ValueError, match="unknown training parameter.*lr_mean"):
        TrainConfig.from_dict({**data, "lr_mean": 1.0})


def test_flat_keys_go_into_the_chosen_strategy():
    mcmc = TrainConfig.from_flat(dict(strategy="mcmc", cap_max=500, prune_opacity=0.02, max_gaussians=9,
                                      reset_every=7, refine_stop=None, iterations=40))  # fmt: skip
    # MCMC's min_opacity is the flat prune_opacity; the default strategy's keys are ignored; None: the default
    assert mcmc.strategy == MCMCStrategy(cap_max=500, min_opacity=0.02) and mcmc.iterations == 40
    default = TrainConfig.from_flat(dict(cap_max=500, max_gaussians=9, absgrad=True, grow_grad2d=None))
    assert default.strategy == DefaultStrategy(max_gaussians=9, absgrad=True)
    assert default.strategy.grow_grad2d_threshold == 8e-4
    # on a config: the same strategy keeps its other settings, another starts from its defaults
    smoke = preset("smoke")
    assert smoke.with_flat(refine_every=10).strategy == replace(smoke.strategy, refine_every=10)
    assert smoke.with_flat(strategy="mcmc").strategy == MCMCStrategy()
    with pytest.raises(ValueError, match="unknown training parameter.*refine_evry"):
        TrainConfig.from_flat({"refine_evry": 3})
    with pytest.raises(ValueError, match="refine_every must be an int >= 1"):
        preset("smoke", refine_every=0)


@pytest.mark.parametrize("name", sorted(PRESETS))
@pytest.mark.parametrize("strategy", ["default", "mcmc"])
def test_an_old_flat_config_reads_back_as_the_same_config(name, strategy):
    cfg = preset(name, strategy=strategy)
    flat = _old_flat(cfg)
    assert isinstance(flat["strategy"], str) and "cap_max" in flat and "absgrad" in flat
    assert TrainConfig.from_dict(flat) == cfg


def test_presets_are_frozen_configs_of_both_strategies():
    doc = " ".join(preset.__doc__.split())
    assert all(f"``{name}``" in doc for name in PRESETS)  # the docstring lists every preset
    for name, p in PRESETS.items():
        assert isinstance(p.default.strategy, DefaultStrategy) and isinstance(p.mcmc.strategy, MCMCStrategy), name
        d, m = p.default.strategy, p.mcmc.strategy
        assert (d.refine_start, d.refine_every) == (m.refine_start, m.refine_every), name
        if d.max_gaussians is not None:  # one cap for both strategies
            assert m.cap_max == d.max_gaussians, name
        run_wide = {k: getattr(p.default, k) for k in MCMC_RUN_SETTINGS}
        assert replace(p.mcmc, strategy=p.default.strategy, **run_wide) == p.default, name
        assert all(getattr(p.mcmc, k) == v for k, v in MCMC_RUN_SETTINGS.items()), name
        assert preset(name) == p.default and preset(name, strategy="mcmc") == p.mcmc
    with pytest.raises(TypeError):
        PRESETS["smoke"] = PRESETS["short"]  # type: ignore[index]
    with pytest.raises(TypeError):
        PRESETS["smoke"].scene["width"] = 1  # type: ignore[index]
    scene = preset_scene("smoke")
    scene["width"] = 1
    assert preset_scene("smoke")["width"] == 64
    short = preset("short", strategy="mcmc", opacity_reg=0.0, cap_max=100)
    assert short.opacity_reg == 0.0 and short.strategy.cap_max == 100
    assert PRESETS["short"].mcmc.strategy.cap_max == 60_000


def test_the_smoke_presets_keep_their_schedules():
    smoke, micro = preset("smoke"), preset("micro", strategy="mcmc")
    assert (smoke.strategy.refine_start, smoke.strategy.refine_stop, smoke.strategy.refine_every) == (30, 120, 30)
    assert micro.strategy.cap_max == 5000 and micro.strategy.refine_stop == 100
    assert preset("full7k", strategy="mcmc").strategy.refine_stop == 25_000 == MCMCStrategy().refine_stop
    assert preset("full7k").strategy.refine_stop == 15_000


def test_the_cli_parameters_reach_the_strategy():
    from gsworkbench.cli.main import profile_params
    from gsworkbench.profiling.workloads import train_workload

    overrides = profile_params([["strategy", "mcmc"], ["refine_every", "7"], ["cap_max", "300"]])
    cfg = preset("smoke", **overrides)
    assert cfg.strategy == replace(PRESETS["smoke"].mcmc.strategy, refine_every=7, cap_max=300)
    work = train_workload("smoke", **overrides)
    assert work.params["strategy"] == {"name": "mcmc", **vars(cfg.strategy)}


def test_checkpoints_and_metrics_record_the_nested_form_and_old_checkpoints_resume(tmp_path):
    from gsworkbench.synthetic import builtin_scene
    from gsworkbench.train import train

    scene = builtin_scene(**{**preset_scene("smoke"), "n_train": 4, "n_test": 1}, cache_dir=tmp_path)
    cfg = preset("smoke", strategy="mcmc", iterations=3, backend="torch", init_num=200, refine_start=0,
                 refine_every=2, cap_max=260)  # fmt: skip
    run = tmp_path / "run"
    train(scene, cfg, results_dir=run)
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["config"]["strategy"] == {"name": "mcmc", **vars(cfg.strategy)}
    state = torch.load(run / "checkpoint.pt", weights_only=True)
    assert state["config"] == cfg.to_dict()
    assert Trainer.from_checkpoint(run / "checkpoint.pt", scene).cfg == cfg
    state["config"] = _old_flat(cfg)  # a checkpoint written before the strategy had its own settings
    torch.save(state, tmp_path / "old.pt")
    resumed = Trainer.from_checkpoint(tmp_path / "old.pt", scene, iterations=5)
    assert resumed.cfg == replace(cfg, iterations=5) and resumed.step_index == 3
    resumed.run()
    assert resumed.step_index == 5
