"""Peak memory of one call, as the operating system sees it (resident set size).

:func:`peak_rss_increase_mib` measures how far the process's resident set rises above its level just
before ``fn()``, at the highest point during the call. To make that level a fair baseline, memory that
earlier work freed is first handed back to the OS (``gc.collect()`` and glibc's ``malloc_trim(0)``),
so the call cannot silently reuse it; the kernel's high-water mark (``VmHWM``) is then reset to the
current size (``/proc/self/clear_refs``, Linux >= 4.0) and read after the call. No sampling thread, so
short peaks are not missed. It counts everything the call touches (torch tensors, the extension's own
scratch buffers, Python objects), not only torch's allocator. Where this is unavailable (not Linux,
or no glibc) the result is NaN, never a guess.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import math
from collections.abc import Callable
from typing import Any


@functools.lru_cache(maxsize=1)
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        return libc.malloc_trim if libc is not None else None  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


def _status_kib(key: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_high_water_mark() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def rss_measurable() -> bool:
    """True where :func:`peak_rss_increase_mib` gives numbers (Linux with glibc)."""
    return _malloc_trim() is not None and _status_kib("VmHWM") is not None and _reset_high_water_mark()


def peak_rss_increase_mib(fn: Callable[[], Any]) -> float:
    """Peak resident-set increase (MiB) during one call of ``fn()`` over the level just before it;
    NaN where it cannot be measured (see the module docstring)."""
    trim = _malloc_trim()
    gc.collect()
    if trim is not None:
        trim(0)
    if trim is None or not _reset_high_water_mark():
        fn()
        return math.nan
    base = _status_kib("VmRSS")
    fn()
    peak = _status_kib("VmHWM")
    if base is None or peak is None:
        return math.nan
    return max(0, peak - base) / 1024
