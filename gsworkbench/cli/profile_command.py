"""``gsworkbench profile WORKLOAD [-p NAME VALUE]...`` and ``gsworkbench profile diff BEFORE AFTER``.

The command line parses; this module checks the arguments and calls :func:`profile` or :func:`diff`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# Imports inside the command, as in gsworkbench.cli.main: profiling loads when a profile runs.

USAGE = "gsworkbench profile WORKLOAD [-p NAME VALUE]...  |  gsworkbench profile diff BEFORE AFTER"


def profile_command(target: Sequence[str], params: Mapping[str, Any], options: Mapping[str, Any]) -> int:
    """``target``: ``[WORKLOAD]`` or ``["diff", BEFORE, AFTER]``. ``options``: repeats, warmup, rate,
    sample_s, pyspy_enabled, native, record_shapes, out, top, alpha, min_change. Returns the exit code."""
    from gsworkbench.profiling.compare import diff, diff_summary
    from gsworkbench.profiling.run import profile

    if target and target[0] == "diff":
        if len(target) != 3:
            raise ValueError(f"profile diff needs two run folders, BEFORE and AFTER; usage: {USAGE}")
        if params:
            raise ValueError("profile diff takes no -p parameters")
        result = diff(Path(target[1]), Path(target[2]), out=options.get("out"), alpha=options["alpha"],
                      min_change=options["min_change"], top=options["top"])  # fmt: skip
        print(diff_summary(result, options["top"]))
        return 0
    if len(target) != 1:
        raise ValueError(f"profile takes one workload (got {len(target)}: {' '.join(target)}); usage: {USAGE}")
    keys = ("repeats", "warmup", "rate", "sample_s", "pyspy_enabled", "native", "record_shapes", "out", "top")
    profile(target[0], params, **{k: options[k] for k in keys})
    return 0
