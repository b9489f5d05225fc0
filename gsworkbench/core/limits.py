"""Memory limits: what a call may allocate, checked before it allocates.

One place for the memory rules the workbench applies:

- :func:`memory_budget`: the bytes that a backend's *temporaries* may use (the field's vectorized and
  torch references chunk or refuse by it): ``$GSW_MEMORY_BUDGET``, else 2 GiB.
- :func:`check_fits`: a call whose estimated allocation exceeds the memory available (host RAM from
  ``/proc/meminfo`` and the cgroup limit, or free GPU memory) is refused up front with a
  :class:`MemoryBudgetError` naming the call, its size and the estimate, instead of swapping the
  machine to death or being killed by the kernel. ``$GSW_MEMORY_LIMIT`` (bytes) lowers the limit.
- :func:`retained_freed_memory`: a context (around a trainer's run) inside which glibc's malloc
  keeps freed memory in the process instead of handing it back to the kernel, so the step's large
  temporaries (images, gradients, tile lists: tens of MB, allocated and freed every step) do not fault
  in fresh zeroed pages each time. Intel's PyTorch CPU tuning guide gets the same from jemalloc or
  tcmalloc; this needs no preload. ``$GSW_RETAIN_MEMORY=0`` turns it off.
"""

from __future__ import annotations

import ctypes
import os
import platform
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

DEFAULT_MEMORY_BUDGET = 2 * 1024**3  # bytes


class MemoryBudgetError(ValueError):
    """A call would need more memory than it may use."""


def memory_budget(budget: int | None = None) -> int:
    """``budget``, else ``$GSW_MEMORY_BUDGET`` (bytes), else 2 GiB."""
    if budget is not None:
        return int(budget)
    return int(os.environ.get("GSW_MEMORY_BUDGET", DEFAULT_MEMORY_BUDGET))


def _read_int(path: str) -> int | None:
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _cgroup_headroom() -> int | None:
    """Bytes left under this process's cgroup memory limit (v2 or v1), None when unlimited."""
    for limit_file, usage_file in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ):
        limit, usage = _read_int(limit_file), _read_int(usage_file)
        if limit is not None and usage is not None and limit < 1 << 60:
            return max(limit - usage, 0)
    return None


def available_bytes(device: torch.device | str = "cpu") -> int:
    """Memory a new allocation on ``device`` can get: free GPU memory for CUDA; for the CPU the
    kernel's MemAvailable, capped by the cgroup's headroom. ``$GSW_MEMORY_LIMIT`` caps both."""
    free = _free_bytes(device)
    limit = os.environ.get("GSW_MEMORY_LIMIT")
    return min(free, int(limit)) if limit else free


def _free_bytes(device: torch.device | str) -> int:
    """:func:`available_bytes` without ``$GSW_MEMORY_LIMIT``."""
    device = torch.device(device)
    if device.type == "cuda":
        free = torch.cuda.mem_get_info(device)[0]
    else:
        free = None
        try:
            with open("/proc/meminfo") as f:
                for line in f:
                    if line.startswith("MemAvailable:"):
                        free = int(line.split()[1]) * 1024
                        break
        except OSError:
            pass
        headroom = _cgroup_headroom()
        if free is None:
            free = headroom if headroom is not None else 1 << 62  # unknown (not Linux): no limit
        elif headroom is not None:
            free = min(free, headroom)
    return free


def gib(n: float) -> str:
    """``n`` bytes as GiB, for messages."""
    return f"{n / 2**30:.1f} GiB"


ALWAYS_FITS = 64 * 2**20  # bytes: smaller calls skip the check (reading /proc would cost more than they do)


def check_fits(need: int, what: str, device: torch.device | str = "cpu", hint: str = "", allocated: int = 0) -> None:
    """MemoryBudgetError when ``need`` bytes exceed :func:`available_bytes` of ``device``. ``what``
    names the call and its size; ``hint`` says what to change. ``allocated``: bytes of ``need`` that
    the call already holds (a check part-way through it): the memory still free is compared with the
    rest, ``$GSW_MEMORY_LIMIT`` with the whole. Below :data:`ALWAYS_FITS` (and with no
    ``$GSW_MEMORY_LIMIT``) it returns at once, so tiny calls pay nothing for it."""
    if need < ALWAYS_FITS and "GSW_MEMORY_LIMIT" not in os.environ:
        return
    have = _free_bytes(device) + allocated
    limit = os.environ.get("GSW_MEMORY_LIMIT")
    if limit:
        have = min(have, int(limit))
    if need > have:
        where = "GPU memory" if torch.device(device).type == "cuda" else "memory"
        raise MemoryBudgetError(
            f"{what} would allocate about {gib(need)}, but only {gib(have)} of {where} is available"
            + (f"; {hint}" if hint else "")
        )


# glibc mallopt parameters (malloc.h), glibc's defaults, and the values retained_freed_memory sets
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
GLIBC_TRIM_THRESHOLD = GLIBC_MMAP_THRESHOLD = 128 * 1024  # bytes: glibc's defaults (malloc(3))
RETAIN_TRIM_THRESHOLD = 2**30  # bytes of free heap top kept before trimming (mallopt takes an int)
RETAIN_MMAP_THRESHOLD = 32 * 2**20  # bytes: smaller blocks come from the heap (glibc's largest allowed)


@dataclass(frozen=True)
class MallocPolicy:
    """glibc malloc's two thresholds in bytes: ``trim`` (free heap top kept before it is returned) and
    ``mmap`` (blocks at least this large get their own mapping)."""

    trim: int
    mmap: int


GLIBC_POLICY = MallocPolicy(GLIBC_TRIM_THRESHOLD, GLIBC_MMAP_THRESHOLD)
RETAIN_POLICY = MallocPolicy(RETAIN_TRIM_THRESHOLD, RETAIN_MMAP_THRESHOLD)
# mallopt cannot be read back, so the policy this module last set is remembered here (glibc's
# defaults until then); a context restores the one it found
_policy_in_effect = GLIBC_POLICY


def _glibc() -> ctypes.CDLL | None:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


def _set_malloc_policy(lib: ctypes.CDLL, policy: MallocPolicy) -> bool:
    """Sets both thresholds with ``mallopt``; True when glibc took both."""
    global _policy_in_effect
    ok = lib.mallopt(_M_MMAP_THRESHOLD, policy.mmap) == 1
    ok = lib.mallopt(_M_TRIM_THRESHOLD, policy.trim) == 1 and ok
    _policy_in_effect = policy
    return ok


def malloc_policy_in_effect() -> MallocPolicy:
    """The thresholds this module last set (glibc's defaults before any)."""
    return _policy_in_effect


@contextmanager
def retained_freed_memory() -> Iterator[bool]:
    """Inside the ``with``, glibc's malloc keeps freed memory in the process: blocks under 32 MiB come
    from the heap rather than their own mappings, and up to 1 GiB of free heap stays mapped. Yields True
    when it took effect; False off glibc or with ``$GSW_RETAIN_MEMORY=0`` (then nothing changes). On
    exit, also by an exception, both thresholds go back to the ones in effect before (glibc's defaults
    unless an outer context set others) and, unless an outer context retains, the free heap is
    returned to the kernel (``malloc_trim``).
    glibc stops adjusting its mmap threshold by itself once a program sets it; that cannot be undone.

    Why: a training step at 800^2 and 10^5 Gaussians allocates and frees ~100 MB of temporaries; by
    default most are fresh mappings, so every step faults in and zeroes thousands of pages (here
    ~3,000 page faults and ~5 ms of kernel time per step, 3-5% of the step)."""
    lib = _glibc()
    if lib is None or os.environ.get("GSW_RETAIN_MEMORY", "1") == "0":
        yield False
        return
    before = _policy_in_effect
    ok = _set_malloc_policy(lib, RETAIN_POLICY)
    try:
        yield ok
    finally:
        _set_malloc_policy(lib, before)
        if before != RETAIN_POLICY:  # an outer context still retains: its heap stays
            lib.malloc_trim(0)
