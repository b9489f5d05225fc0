"""The 3DGS trainer end to end on a tiny generated scene: learning, checkpoints, export, backends."""

from __future__ import annotations

import pytest
import torch
from conftest import backend_params, ext_built, rel_err, requires_ext, write_code_running_checkpoint
from fake_clock import OpClock

from gsworkbench.io import read_ply
from gsworkbench.train import Trainer, load_checkpoint, preset, train
from gsworkbench.train.trainer import CHECKPOINT_FORMAT


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    from gsworkbench.synthetic import builtin_scene

    cache = tmp_path_factory.mktemp("scenes")
    return builtin_scene("object", width=48, height=48, n_train=24, n_test=4, cache_dir=cache)


@pytest.mark.parametrize("strategy", ["default", "mcmc"])
def test_training_raises_psnr_clearly(scene, strategy, device):
    backend = "ext" if ext_built() else "torch"
    cfg = preset("smoke", strategy=strategy, seed=1, backend=backend, device=device)  # 150 steps
    clock = OpClock()  # the step timers count torch ops: the share asserted below cannot depend on the load
    trainer = Trainer(scene, cfg, clock=clock)
    before = float(trainer.evaluate()[0]["psnr_db"].mean())
    with clock:
        trainer.run()
    after = float(trainer.evaluate()[0]["psnr_db"].mean())
    hist = trainer.history
    assert after > before + 2.0, (before, after)  # about +4 dB (default) and +3 dB (mcmc) measured
    assert hist["loss"].iloc[-10:].mean() < 0.7 * hist["loss"].iloc[:5].mean()
    assert all(p.device.type == device for p in trainer.model.params.values())
    assert torch.isfinite(torch.stack([p.detach().sum().cpu() for p in trainer.model.params.values()])).all()
    times = hist[[f"t_{s}" for s in ("project", "sh", "isect", "rasterize", "loss", "backward", "optimizer")]]
    assert (times.iloc[5:] > 0).all().all()
    # the timed stages hold 90% of a step's ops (the rest is bookkeeping: the loss terms read back)
    stage_sum = hist.filter(like="t_").drop(columns="t_step").sum(axis=1)
    assert float((stage_sum.iloc[5:] / hist["t_step"].iloc[5:]).median()) > 0.9


@requires_ext
def test_checkpoint_resume_equals_an_uninterrupted_run(scene, tmp_path):
    prev = torch.get_num_threads()
    torch.set_num_threads(1)  # the ext backward sums per thread: one thread makes runs bit-reproducible
    try:
        cfg = preset("smoke", iterations=24, refine_start=5, refine_every=5, refine_stop=20, seed=3)
        straight = Trainer(scene, cfg)
        straight.run()
        first = Trainer(scene, cfg)
        first.run(12)
        path = first.save_checkpoint(tmp_path / "ck.pt")
        state = torch.load(path, weights_only=True)  # loadable without pickle code execution
        assert state["step"] == 12
        resumed = Trainer.from_checkpoint(path, scene)
        resumed.run()
    finally:
        torch.set_num_threads(prev)
    assert resumed.step_index == straight.step_index == 24
    for name, p in straight.model.params.items():
        assert torch.equal(resumed.model.params[name], p), name
    assert resumed.history["loss"].tolist() == straight.history["loss"].tolist()


def test_bad_checkpoints_are_named(tmp_path):
    with pytest.raises(ValueError, match="checkpoint not found"):
        load_checkpoint(tmp_path / "missing.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="cannot read checkpoint .*junk.pt"):
        load_checkpoint(tmp_path / "junk.pt")
    torch.save({"a": 1}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a gsworkbench 3DGS training checkpoint"):
        load_checkpoint(tmp_path / "other.pt")
    ran = write_code_running_checkpoint(tmp_path / "evil.pt", {"format": CHECKPOINT_FORMAT})  # valid but for that
    with pytest.raises(ValueError, match="cannot read checkpoint .*evil.pt"):
        load_checkpoint(tmp_path / "evil.pt")
    assert not ran.exists()  # weights_only=True: the pickled code never ran


def test_run_outputs_and_ply_export_read_back_bit_exactly(scene, tmp_path):
    cfg = preset("smoke", iterations=12, backend="ext" if ext_built() else "torch")
    result = train(scene, cfg, results_dir=tmp_path)
    for key in ("history", "evaluation", "ply", "checkpoint", "metrics"):
        assert result.files[key].exists()
    state = torch.load(result.files["checkpoint"], weights_only=True)  # tensors and plain data only
    assert torch.equal(state["params"]["means"], result.splats.means.cpu())
    assert len(result.evaluation) == len(scene.test_ids) and result.metrics["lpips"].startswith("not computed")
    back = read_ply(result.files["ply"])
    for name in ("means", "quats", "log_scales", "opacity_logits", "sh_dc", "sh_rest"):
        assert torch.equal(getattr(back, name), getattr(result.splats, name)), name


@requires_ext
def test_ext_and_torch_backends_train_alike(scene, device):
    """The same steps with both backends (densification off) give nearly the same splats."""
    out = {}
    for backend in ("ext", "torch"):
        cfg = preset("smoke", iterations=5, backend=backend, refine_start=1000, seed=2, device=device)
        t = Trainer(scene, cfg)
        t.run()
        out[backend] = t.model.params["means"].detach().cpu().clone()
    assert rel_err(out["ext"], out["torch"]) < 1e-4


@pytest.mark.parametrize("backend", backend_params(["ext", "torch"]))
def test_compiled_loss_trains_like_eager(scene, backend, device):
    """compile="aot_eager" compiles the L1 + SSIM loss (fullgraph); the steps match eager ones."""
    out = {}
    for mode in (False, "aot_eager"):
        cfg = preset("smoke", iterations=4, backend=backend, refine_start=1000, seed=4, device=device, compile=mode)
        t = Trainer(scene, cfg)
        t.run()
        out[mode] = (t.model.params["means"].detach().cpu().clone(), t.history["loss"].to_numpy())
    assert rel_err(out["aot_eager"][0], out[False][0]) < 1e-5
    assert abs(out["aot_eager"][1] - out[False][1]).max() < 1e-5


def test_trainer_rejects_bad_setups(scene):
    with pytest.raises(ValueError, match="compile must be a bool or one of"):
        preset("smoke", compile="turbo")
    with pytest.raises(ValueError, match="config must be a TrainConfig"):
        Trainer(scene, {"iterations": 3})
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device"):
            Trainer(scene, preset("smoke", device="cuda"))
    with pytest.raises(ValueError, match="needs a scene with alpha masks"):
        s = scene.subset(scene.train_ids)
        s.alphas = None
        Trainer(s, preset("smoke", background="random")).step()



def test_a_watcher_sees_the_run_every_n_steps(tmp_path):
    """train(watch=...) is how a live viewer follows a run: called between steps, every watch_every."""
    from gsworkbench.synthetic import builtin_scene
    from gsworkbench.train import preset_scene

    scene = builtin_scene(**{**preset_scene("smoke"), "cache_dir": tmp_path / "cache"})
    seen = []
    cfg = preset("smoke", iterations=12, backend="ext" if ext_built() else "torch")
    result = train(scene, cfg, watch=lambda t: seen.append((t.step_index, len(t.splats()))), watch_every=5)
    assert [s for s, _ in seen] == [5, 10] and result.metrics["iterations"] == 12
    assert all(n > 0 for _, n in seen)
    with pytest.raises(ValueError, match="watch_every"):
        train(scene, cfg, watch=print, watch_every=0)
