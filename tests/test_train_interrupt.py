"""No lost work: a real SIGINT into a training process (the API and `gsworkbench run`) keeps the history,
a checkpoint and the splats; periodic checkpoints; resume; temporaries of killed writes are removed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import ext_built

from gsworkbench.core.interrupt import deferred_interrupt
from gsworkbench.io import read_ply
from gsworkbench.train import Trainer, load_checkpoint, preset, train

REPO = Path(__file__).resolve().parent.parent
SCENE = dict(name="object", width=32, height=32, n_train=8, n_test=2)
BACKEND = "ext" if ext_built() else "torch"


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """A scene cache holding SCENE, so the subprocesses load it instead of rendering it."""
    from gsworkbench.synthetic import builtin_scene
    from gsworkbench.train import preset_scene

    path = tmp_path_factory.mktemp("scene-cache")
    builtin_scene(**SCENE, cache_dir=path)
    builtin_scene(**preset_scene("smoke"), cache_dir=path)  # notebook 02's scene at its smoke preset
    return path


def _env(cache: Path) -> dict[str, str]:
    return {**os.environ, "GSW_SCENE_CACHE": str(cache), "OMP_WAIT_POLICY": "PASSIVE", "OMP_NUM_THREADS": "1"}


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 240) -> None:
    """Polls until ``path`` exists (the process got that far); fails if the process ends first. The
    deadline only bounds a hang: nothing is judged by how long it took."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"process ended (rc {proc.returncode}) before {path.name} appeared:\n{out}\n{err}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"{path.name} did not appear")
        time.sleep(0.2)


TRAIN_SCRIPT = """
import sys
from gsworkbench.synthetic import builtin_scene
from gsworkbench.train import TrainingInterrupted, preset, train

scene = builtin_scene(**{scene!r})
cfg = preset("smoke", iterations=10**7, checkpoint_every=5, backend={backend!r}, progress=False)
try:
    train(scene, cfg, results_dir=sys.argv[1])
except TrainingInterrupted as err:
    print("STEP", err.step)
    print(err)
    sys.exit(128 + err.signum)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_into_train_keeps_history_checkpoint_and_splats(tmp_path, cache, sig):
    """SIGTERM (what timeout, docker stop, Slurm and Kubernetes send) as Ctrl-C: it ended the process at
    once, with glog's native stack dump (pycolmap installs its handler) and no files."""
    run = tmp_path / "run"
    script = "import pycolmap\n" + textwrap.dedent(TRAIN_SCRIPT.format(scene=SCENE, backend=BACKEND))
    proc = subprocess.Popen([sys.executable, "-c", script, str(run)], env=_env(cache), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    _wait_for(run / "checkpoint.pt", proc)  # a periodic checkpoint: training is under way
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 128 + sig, (out, err)
    step = int(out.split("STEP")[1].split()[0])
    by = " by SIGTERM" if sig == signal.SIGTERM else ""
    assert f"training interrupted{by} after step {step}" in out and "resume" in out and str(run) in out
    assert "Traceback" not in err and "@ 0x" not in err
    history = pd.read_csv(run / "history.csv")
    assert len(history) == step and history.step.tolist() == list(range(step))
    state = load_checkpoint(run / "checkpoint.pt")
    assert state["step"] == step and len(state["history"]) == step  # saved at the interrupt, not the last period
    assert len(read_ply(run / "splats.ply")) == len(state["params"]["means"])
    # resume from the folder goes on from that step
    from gsworkbench.synthetic import builtin_scene

    scene = builtin_scene(**SCENE, cache_dir=cache)
    result = train(scene, preset("smoke", iterations=step + 3, backend=BACKEND), resume=run, results_dir=run)
    assert result.metrics["iterations"] == step + 3 and len(result.history) == step + 3


NOTEBOOK_ARGS = ["-p", "preset", "smoke", "-p", "iterations", "10000000", "-p", "checkpoint_every", "5"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_into_the_cli_is_one_line_and_keeps_the_training(tmp_path, cache, sig):
    """Ctrl-C: exit 130; SIGTERM (it ended `gsworkbench run` at once, exit 143, no message and no
    training files) the same way, exit 143."""
    run = tmp_path / "nb"
    cmd = [sys.executable, "-m", "gsworkbench.cli.main", "run", str(REPO / "notebooks" / "02_training.py"),
           *NOTEBOOK_ARGS, "-p", "backend", BACKEND, "--out", str(run)]  # fmt: skip
    proc = subprocess.Popen(cmd, env=_env(cache), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _wait_for(run / "checkpoint.pt", proc)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 128 + sig, (out, err)
    said = [line for line in err.splitlines() if line.startswith("gsworkbench:")]
    assert len(said) == 1, err
    by = " by SIGTERM" if sig == signal.SIGTERM else ""
    assert f"interrupted{by} in cell" in said[0] and "training interrupted after step" in said[0]
    assert str(run) in said[0] and "partly executed notebook" in said[0]
    assert f"to go on: gsworkbench run {REPO / 'notebooks' / '02_training.py'} -p resume {run}" in said[0]
    # the hint inside the notebook names its resume parameter, not train(scene, config, resume=...)
    assert f"to go on, set resume = '{run}' in the parameters cell" in said[0] and "train(scene" not in said[0]
    for noise in ("Traceback", "ZMQError", "KeyboardInterrupt"):
        assert noise not in err, err
    assert "done in" not in err.splitlines()[-2]  # the interrupted cell is not reported as done
    for name in ("history.csv", "checkpoint.pt", "splats.ply", "02_training.ipynb"):
        assert (run / name).is_file(), name
    if sig != signal.SIGINT:
        return
    # training goes on from the folder the interrupted notebook left: here through train(), which the
    # notebook's resume parameter is handed to (that hand-over runs in the refusal test below), so no
    # second kernel has to start and train
    from gsworkbench.synthetic import builtin_scene
    from gsworkbench.train import preset_scene

    step = load_checkpoint(run / "checkpoint.pt")["step"]
    scene = builtin_scene(**preset_scene("smoke"), cache_dir=cache)
    again = train(scene, preset("smoke", iterations=step + 2, backend=BACKEND), resume=run,
                  results_dir=tmp_path / "again")  # fmt: skip
    assert len(again.history) == step + 2 and len(pd.read_csv(tmp_path / "again" / "history.csv")) == step + 2


def test_the_resume_hint_can_name_a_notebook_parameter(tmp_path, cache, monkeypatch):
    from gsworkbench.synthetic import builtin_scene
    from gsworkbench.train import TrainingInterrupted

    scene = builtin_scene(**SCENE, cache_dir=cache)
    real_step = Trainer.step

    def step(self):
        if self.step_index == 3:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C during the step: the run ends after it
        return real_step(self)

    monkeypatch.setattr(Trainer, "step", step)
    with pytest.raises(TrainingInterrupted) as info:
        train(scene, preset("smoke", iterations=50, backend=BACKEND), results_dir=tmp_path,
              resume_hint="set resume = '{run_dir}' and run again")  # fmt: skip
    assert info.value.step == 4 and str(info.value).endswith(f"; set resume = '{tmp_path}' and run again")


def test_periodic_checkpoints_and_stale_temporaries(tmp_path, cache, monkeypatch):
    from gsworkbench.synthetic import builtin_scene
    from gsworkbench.train import run as run_module

    scene = builtin_scene(**SCENE, cache_dir=cache)
    saved = []
    real_save = Trainer.save_checkpoint
    monkeypatch.setattr(Trainer, "save_checkpoint", lambda self, p: saved.append(self.step_index) or real_save(self, p))
    stale = tmp_path / ".checkpoint.pt.k1ll3d.tmp.pt"  # what a write killed with -9 leaves behind
    stale.write_bytes(b"\0" * 1000)
    keep = tmp_path / ".other.pt.abc.tmp.pt"
    keep.write_bytes(b"x")
    train(scene, preset("smoke", iterations=12, checkpoint_every=5, backend=BACKEND), results_dir=tmp_path)
    assert saved == [5, 10, 12]  # every 5 steps, and the final one
    assert not stale.exists() and keep.exists()
    assert load_checkpoint(tmp_path / "checkpoint.pt")["step"] == 12
    assert run_module.checkpoint_file(tmp_path) == tmp_path / "checkpoint.pt"


def test_interrupt_outside_a_step_boundary_saves_without_a_checkpoint(tmp_path, cache, monkeypatch):
    """A KeyboardInterrupt that lands mid-step (a second Ctrl-C, or a thread without signals) keeps the
    history, but no checkpoint of half-updated parameters."""
    from gsworkbench.synthetic import builtin_scene
    from gsworkbench.train import TrainingInterrupted

    scene = builtin_scene(**SCENE, cache_dir=cache)
    real_step = Trainer.step

    def step(self):
        if self.step_index == 4:
            raise KeyboardInterrupt
        return real_step(self)

    monkeypatch.setattr(Trainer, "step", step)
    with pytest.raises(TrainingInterrupted, match="mid-step, so no checkpoint") as info:
        train(scene, preset("smoke", iterations=50, backend=BACKEND), results_dir=tmp_path)
    assert info.value.step == 4 and set(info.value.files) == {"history"}
    assert len(pd.read_csv(tmp_path / "history.csv")) == 4 and not (tmp_path / "checkpoint.pt").exists()


def test_deferred_interrupt_defers_the_first_sigint_and_not_the_second():
    before = signal.getsignal(signal.SIGINT)  # Python's default handler, or SIG_IGN when started in the background
    with deferred_interrupt() as interrupted:
        assert not interrupted()
        os.kill(os.getpid(), signal.SIGINT)
        torch.zeros(1)  # the handler runs at the next bytecode boundary
        assert interrupted()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):
                torch.zeros(1)
    assert signal.getsignal(signal.SIGINT) is before  # put back as it was


def test_checkpoints_every_so_many_minutes(tmp_path, cache, monkeypatch):
    """checkpoint_minutes on a fake clock that each step advances by 20 s: a checkpoint every 3 steps."""
    from gsworkbench.synthetic import builtin_scene

    scene = builtin_scene(**SCENE, cache_dir=cache)
    now = [0.0]

    def clock() -> float:
        return now[0]

    saved = []
    real_step, real_save = Trainer.step, Trainer.save_checkpoint

    def step(self):
        now[0] += 20.0
        return real_step(self)

    monkeypatch.setattr(Trainer, "clock", staticmethod(clock))
    monkeypatch.setattr(Trainer, "step", step)
    monkeypatch.setattr(Trainer, "save_checkpoint", lambda self, p: saved.append(self.step_index) or real_save(self, p))
    train(scene, preset("smoke", iterations=10, checkpoint_minutes=1.0, backend=BACKEND), results_dir=tmp_path)
    assert saved == [3, 6, 9, 10]


def test_resume_on_other_data_is_refused_on_the_terminal(tmp_path, cache):
    """A checkpoint of one scene resumed on another exited 0 (the "trained on other data" warning only
    inside the executed notebook), or, with another view count, failed with an IndexError."""
    from gsworkbench.synthetic import builtin_scene
    from gsworkbench.train import preset_scene

    nb = REPO / "notebooks" / "02_training.py"
    first = tmp_path / "first"  # a run of the notebook's smoke scene; made in-process, only its files matter
    train(builtin_scene(**preset_scene("smoke"), cache_dir=cache), preset("smoke", iterations=3, backend=BACKEND),
          results_dir=first)  # fmt: skip
    assert (first / "checkpoint.pt").is_file()
    other = builtin_scene(**SCENE, cache_dir=cache).source["folder"]  # other images, fewer views

    args = [sys.executable, "-m", "gsworkbench.cli.main", "run", str(nb), "-p", "preset", "smoke", "-p", "iterations",
            "6", "-p", "backend", BACKEND, "--out", str(tmp_path / "again"), "-p", "resume", str(first),
            "-p", "scene_path", other]  # fmt: skip
    refused = subprocess.run(args, env=_env(cache), text=True, capture_output=True, timeout=600)
    assert refused.returncode == 1, refused.stderr
    assert f"ValueError: {first / 'checkpoint.pt'} was trained on other data (then scene " in refused.stderr
    assert "resume refused (resume_other_data=True goes on anyway)" in refused.stderr
    assert "IndexError" not in refused.stderr and "Traceback" not in refused.stderr
    # resume_other_data=True going on: tests/test_train_init.py, in-process
