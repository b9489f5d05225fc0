"""Whether hardware performance counters (``perf stat``: cycles, instructions, cache misses) can be read
on this machine, and if not, why: a profile records the answer, so a kernel far below its roofline
ceiling is not left looking as if its counters were simply not asked for.

Counters need three things: the ``perf`` tool, a kernel that lets this user open events
(``/proc/sys/kernel/perf_event_paranoid``: 2 and below allow a user's own processes, without kernel
events), and a CPU performance-monitoring unit exposed to the kernel (``/sys/bus/event_source/devices/cpu``
or ``cpu_core``/``cpu_atom``; virtual machines often expose none, and ``perf stat`` then reports
``<not supported>`` for every hardware event).
"""

from __future__ import annotations

import shutil
from pathlib import Path

EVENT_SOURCES = Path("/sys/bus/event_source/devices")
PARANOID = Path("/proc/sys/kernel/perf_event_paranoid")


def hardware_counters_status(event_sources: Path = EVENT_SOURCES, paranoid: Path = PARANOID) -> tuple[bool, str]:
    """(available, why): whether ``perf stat`` can count hardware events for this user's processes, with
    the reason in one sentence."""
    if shutil.which("perf") is None:
        return False, "hardware counters unavailable: the perf tool is not installed (Debian: linux-perf)"
    try:
        level = int(paranoid.read_text().strip())
    except (OSError, ValueError):
        return False, f"hardware counters unavailable: {paranoid} cannot be read (no perf events in this kernel)"
    if level > 2:
        return False, f"hardware counters unavailable: perf_event_paranoid is {level} (user events need <= 2)"
    pmus = [name for name in ("cpu", "cpu_core", "cpu_atom") if (event_sources / name).exists()]
    if not pmus:
        return False, ("hardware counters unavailable: the kernel exposes no CPU performance-monitoring unit "
                       f"(no cpu device under {event_sources}; usual in a virtual machine), so perf stat "
                       "reports every hardware event as <not supported>")  # fmt: skip
    return True, f"hardware counters available (perf, perf_event_paranoid {level}, PMU {', '.join(pmus)})"
