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

import contextlib
import ctypes
import ctypes.util
import functools
import gc
import math
from collections.abc import Callable, Iterator
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


class StagePeaks:
    """Peak resident memory per stage of one call, for code timed by a stage timer.

    Wraps ``timer`` (anything with ``stage(name)`` returning a context manager, e.g.
    :class:`gsworkbench.train.timers.StageTimer`; every other attribute is the timer's): each stage
    still runs inside ``timer.stage(name)``, and around it the kernel's high-water mark is reset at
    the stage's start and read at its end. :meth:`measure` runs ``fn()`` once with the baseline set as
    :func:`peak_rss_increase_mib` sets it and returns the call's peak increase (MiB). Then ``peaks``
    maps each stage to the highest resident set during it, in MiB above that baseline (a stage that
    runs twice keeps its higher peak; a stage's peak includes what earlier stages still hold, e.g.
    the forward's autograd state during the backward), and ``peak_total_mib`` is the highest resident
    set of the whole process during the call (MiB, absolute). Memory taken between two stages counts
    only after the last stage. Empty and NaN where RSS cannot be measured. Stages must not nest.
    """

    def __init__(self, timer: Any) -> None:
        self.timer = timer
        self.peaks: dict[str, float] = {}
        self.peak_total_mib = math.nan
        self._base_kib: int | None = None  # set while measure() runs

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["timer"], name)

    def _record(self, stage: str | None) -> None:
        peak = _status_kib("VmHWM")
        if peak is None or self._base_kib is None:
            return
        self.peak_total_mib = max(0.0 if math.isnan(self.peak_total_mib) else self.peak_total_mib, peak / 1024)
        if stage is not None:
            self.peaks[stage] = max(self.peaks.get(stage, 0.0), max(0, peak - self._base_kib) / 1024)

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        measuring = self._base_kib is not None
        if measuring:
            self._record(None)  # what ran since the previous stage
            _reset_high_water_mark()
        try:
            with self.timer.stage(name):
                yield
        finally:
            if measuring:
                self._record(name)

    def measure(self, fn: Callable[[], Any]) -> float:
        """Runs ``fn()`` once, recording the stage peaks; returns its peak increase (MiB) or NaN."""
        trim = _malloc_trim()
        gc.collect()
        if trim is not None:
            trim(0)
        self.peaks, self.peak_total_mib = {}, math.nan
        base = _status_kib("VmRSS")
        if trim is None or base is None or not _reset_high_water_mark():
            fn()
            return math.nan
        self._base_kib = base
        try:
            fn()
            self._record(None)  # after the last stage
        finally:
            self._base_kib = None
        return max(0.0, self.peak_total_mib - base / 1024)
