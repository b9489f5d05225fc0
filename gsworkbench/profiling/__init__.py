"""Profiling: where the time goes, in one command.

>>> from gsworkbench.profiling import profile, diff
>>> before = profile("render", {"backend": "torch", "num": 2000})  # doctest: +SKIP
>>> after = profile("render", {"backend": "ext", "num": 2000})  # doctest: +SKIP
>>> print(diff_summary(diff(before, after)))  # doctest: +SKIP

Modules: :mod:`~gsworkbench.profiling.workloads` (what runs), :mod:`~gsworkbench.profiling.stages`
(stage breakdown), :mod:`~gsworkbench.profiling.op_table` (torch.profiler op table and trace),
:mod:`~gsworkbench.profiling.pyspy` (sampling with py-spy), :mod:`~gsworkbench.profiling.flamegraph`
(SVG and differential flamegraphs), :mod:`~gsworkbench.profiling.run` (``profile``),
:mod:`~gsworkbench.profiling.compare` (``diff``), :mod:`~gsworkbench.cli.profile_command` (the CLI).
"""

from gsworkbench.profiling.compare import ProfileDiff, diff, diff_summary
from gsworkbench.profiling.flamegraph import diff_flamegraph_svg, flamegraph_svg, frame_changes, read_folded
from gsworkbench.profiling.pyspy import PySpyUnavailable
from gsworkbench.profiling.run import ProfileRun, load_profile, profile, summary
from gsworkbench.profiling.stages import plot_stages
from gsworkbench.profiling.workloads import (
    Workload,
    callable_workload,
    field_workload,
    make_workload,
    render_workload,
    train_workload,
)

__all__ = [
    "ProfileDiff",
    "ProfileRun",
    "PySpyUnavailable",
    "Workload",
    "callable_workload",
    "diff",
    "diff_flamegraph_svg",
    "diff_summary",
    "field_workload",
    "flamegraph_svg",
    "frame_changes",
    "load_profile",
    "make_workload",
    "plot_stages",
    "profile",
    "read_folded",
    "render_workload",
    "summary",
    "train_workload",
]
