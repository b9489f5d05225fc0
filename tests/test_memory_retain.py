"""gsworkbench.memory.retain_freed_memory / release_freed_memory: with retention on, a freed block of a
few MiB is reused by the next allocation of that size (its pages are not faulted in again); the
trainer turns retention on and its run() turns it off. Page faults are counted by getrusage (a count of
events, not a timing)."""

import platform
import resource

import pytest
import torch

from gsworkbench import memory

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
SIZES = (16 * 2**20, 8 * 2**20, 4 * 2**20)  # bytes: under the 32 MiB mmap threshold retain sets


def _faults_of_round() -> int:
    """Minor page faults of one "step": allocating, filling and freeing tensors of SIZES."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    ts = [torch.empty(n // 4, dtype=torch.float32) for n in SIZES]
    for t in ts:
        t.fill_(1.0)
    del ts, t
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


@pytest.mark.skipif(not GLIBC, reason="the heap policy is glibc's mallopt; elsewhere both calls return False")
def test_retained_blocks_are_reused_without_new_page_faults(monkeypatch):
    """Measured here over the four rounds: ~12,000 faults without retention (glibc maps and unmaps the
    blocks: about two faults per page of a round), ~1,000 with it (7,168 pages per round)."""
    monkeypatch.delenv("GSW_RETAIN_MEMORY", raising=False)
    pages = sum(SIZES) // resource.getpagesize()
    try:
        assert memory.retain_freed_memory()
        for _ in range(4):  # the heap grows to hold a round (posix_memalign's slack splits some blocks)
            _faults_of_round()
        assert sum(_faults_of_round() for _ in range(4)) < pages // 2  # without retention: ~12,000
    finally:
        assert memory.release_freed_memory()
    monkeypatch.setenv("GSW_RETAIN_MEMORY", "0")
    assert not memory.retain_freed_memory()


def test_off_glibc_or_switched_off_both_calls_say_so(monkeypatch):
    monkeypatch.setattr(memory, "_glibc", lambda: None)
    assert memory.retain_freed_memory() is False
    assert memory.release_freed_memory() is False


def test_the_trainer_retains_while_it_steps_and_its_run_releases(monkeypatch, tmp_path):
    from gsworkbench.scenes import builtin_scene
    from gsworkbench.train import Trainer, preset

    calls = []
    monkeypatch.setattr("gsworkbench.train.trainer.retain_freed_memory", lambda: calls.append("retain"))
    monkeypatch.setattr("gsworkbench.train.trainer.release_freed_memory", lambda: calls.append("release"))
    scene = builtin_scene("object", width=32, height=32, n_train=4, n_test=1, cache_dir=tmp_path)
    trainer = Trainer(scene, preset("smoke", iterations=2, progress=False))
    assert calls == ["retain"]
    trainer.run()
    assert calls == ["retain", "retain", "release"]
