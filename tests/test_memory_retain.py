"""gsworkbench.core.limits.retained_freed_memory: inside it, a freed block of a few MiB is reused by the next
allocation of that size (its pages are not faulted in again); on exit both malloc thresholds go back to
what was in effect before; a trainer's run() holds it and constructing a trainer leaves the policy
alone. Page faults are counted by getrusage (a count of events, not a timing); the thresholds, which
mallopt cannot read back, are checked through a fake libc that records the calls."""

import json
import platform
import resource
import subprocess
import sys

import pytest

from gsworkbench.core import limits

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
SIZES = (16 * 2**20, 8 * 2**20, 4 * 2**20)  # bytes: under the 32 MiB mmap threshold retention sets


class FakeLibc:
    """Records mallopt and malloc_trim calls as (name, args) and keeps the thresholds set."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[int, ...]]] = []
        self.thresholds: dict[int, int] = {}

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append(("mallopt", (param, value)))
        self.thresholds[param] = value
        return 1

    def malloc_trim(self, pad: int) -> int:
        self.calls.append(("malloc_trim", (pad,)))
        return 1

    def policy(self) -> limits.MallocPolicy:
        return limits.MallocPolicy(self.thresholds[limits._M_TRIM_THRESHOLD], self.thresholds[limits._M_MMAP_THRESHOLD])


@pytest.fixture
def fake_libc(monkeypatch):
    lib = FakeLibc()
    monkeypatch.setattr(limits, "_glibc", lambda: lib)
    monkeypatch.setattr(limits, "_policy_in_effect", limits.GLIBC_POLICY)
    monkeypatch.delenv("GSW_RETAIN_MEMORY", raising=False)
    return lib


# Run in a fresh interpreter: a pytest worker's heap, fragmented by the tests before, can split a freed
# block with a small allocation and so grow the heap by a block a round whatever the policy.
_ROUNDS = """
import json, resource, torch
from gsworkbench.core import limits
SIZES = (16 * 2**20, 8 * 2**20, 4 * 2**20)

def round_faults():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    ts = [torch.empty(n // 4, dtype=torch.float32) for n in SIZES]
    for t in ts:
        t.fill_(1.0)
    del ts, t
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

out = {}
with limits.retained_freed_memory() as retained:
    out["retained"] = retained
    for _ in range(4):  # the heap grows to hold a round (posix_memalign's slack splits some blocks)
        round_faults()
    out["with"] = [round_faults() for _ in range(4)]
out["policy_after"] = limits.malloc_policy_in_effect() == limits.GLIBC_POLICY
out["without"] = [round_faults() for _ in range(4)]
print(json.dumps(out))
"""


@pytest.mark.skipif(not GLIBC, reason="the heap policy is glibc's mallopt; elsewhere the context yields False")
def test_retained_blocks_are_reused_without_new_page_faults(monkeypatch):
    """Four rounds of 7,168 pages each way: without retention glibc maps and unmaps the blocks, so every
    round faults most of its pages; with it the blocks are reused, so rounds fault next to none. The
    best round of each is compared: the kernel may reclaim idle pages of a retained block between two
    rounds (a machine under memory pressure, or a reclaim daemon), which makes a round fault again
    whatever the policy (seen: 2,048 + 2,048 + 0 + 0 with retention)."""
    monkeypatch.delenv("GSW_RETAIN_MEMORY", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    done = subprocess.run([sys.executable, "-c", _ROUNDS], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    pages = sum(SIZES) // resource.getpagesize()
    assert out["retained"] and out["policy_after"]
    assert min(out["with"]) < pages // 8, out
    assert min(out["without"]) > pages // 2, out  # the policy is what saves the faults
    monkeypatch.setenv("GSW_RETAIN_MEMORY", "0")
    with limits.retained_freed_memory() as retained:
        assert not retained


def test_off_glibc_the_context_changes_nothing(monkeypatch):
    monkeypatch.setattr(limits, "_glibc", lambda: None)
    with limits.retained_freed_memory() as retained:
        assert retained is False
        assert limits.malloc_policy_in_effect() == limits.GLIBC_POLICY


def test_the_context_sets_both_thresholds_and_restores_them(fake_libc):
    with limits.retained_freed_memory() as retained:
        assert retained and fake_libc.policy() == limits.RETAIN_POLICY == limits.malloc_policy_in_effect()
        fake_libc.calls.clear()
    # both thresholds back to glibc's defaults (the mmap one too), then the free heap returned
    assert fake_libc.policy() == limits.GLIBC_POLICY == limits.malloc_policy_in_effect()
    assert fake_libc.calls[-1] == ("malloc_trim", (0,))
    params = {c[1][0] for c in fake_libc.calls if c[0] == "mallopt"}
    assert params == {limits._M_TRIM_THRESHOLD, limits._M_MMAP_THRESHOLD}


def test_the_context_restores_on_an_exception_and_when_nested(fake_libc):
    with pytest.raises(RuntimeError, match="boom"), limits.retained_freed_memory():
        raise RuntimeError("boom")
    assert fake_libc.policy() == limits.GLIBC_POLICY
    fake_libc.calls.clear()
    with limits.retained_freed_memory():
        with limits.retained_freed_memory():
            pass
        # the inner exit leaves the outer's policy, and its heap (no trim)
        assert fake_libc.policy() == limits.RETAIN_POLICY
        assert ("malloc_trim", (0,)) not in fake_libc.calls
    assert fake_libc.policy() == limits.GLIBC_POLICY and fake_libc.calls[-1] == ("malloc_trim", (0,))


def test_switched_off_by_the_environment(fake_libc, monkeypatch):
    monkeypatch.setenv("GSW_RETAIN_MEMORY", "0")
    with limits.retained_freed_memory() as retained:
        assert retained is False
    assert fake_libc.calls == []


def test_a_trainer_retains_only_while_its_run_steps(fake_libc, tmp_path):
    from gsworkbench.synthetic import builtin_scene
    from gsworkbench.train import Trainer, preset

    scene = builtin_scene("object", width=32, height=32, n_train=4, n_test=1, cache_dir=tmp_path)
    trainer = Trainer(scene, preset("smoke", iterations=2, progress=False))
    assert fake_libc.calls == []  # constructing a trainer leaves the process's malloc alone
    during: list[limits.MallocPolicy] = []
    trainer.run(stop=lambda: during.append(fake_libc.policy()) and False)
    assert during == [limits.RETAIN_POLICY] * 2
    assert fake_libc.policy() == limits.GLIBC_POLICY and fake_libc.calls[-1] == ("malloc_trim", (0,))
