# ---
# jupyter:
#   gsworkbench:
#     smoke_parameters:
#       iterations: 3
#       preset: smoke
#       rate: 50
#       repeats: 2
#       sample_s: 0.5
#   jupytext:
#     notebook_metadata_filter: gsworkbench,kernelspec,-jupytext.text_representation.jupytext_version
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: gsworkbench (.venv)
#     language: python
#     name: gsworkbench
# ---

# %% [markdown]
# # 04 · Profiling: where the time goes
#
# Profiles one workload once per backend with `gsworkbench.profiling.profile` (what
# `gsworkbench profile WORKLOAD` runs) and compares the first backend's profile with the last one's
# (`gsworkbench profile diff BEFORE AFTER`). Each profile times the workload's stages over several runs,
# takes one run under `torch.profiler` (op table, chrome trace), samples runs with py-spy `--native`
# (flamegraph with the extension's C++ frames), and measures what each profiler costs. By default: the
# `micro` training preset, shortened to 10 steps, with the `torch` reference and the `ext` kernels.
# Timings on a shared or busy machine are indicative only.

# %%
from gsworkbench.jupyter import ParameterGuard

guard = ParameterGuard(
    workload={"choices": ["train", "render", "field"], "help": "what to profile"},
    preset={"choices": ["smoke", "micro", "short", "full7k", "full30k"], "help": "training preset (workload train)"},
    backends={"choices": ["torch", "ext"], "min_len": 1, "help": "one profile each; the diff compares first and last"},
    device={"choices": ["cpu", "cuda"]},
    iterations={"ge": 0, "help": "training steps per run; 0 = the preset's"},
    repeats={"ge": 1, "help": "timed runs per profile (7 or more for the diff's significance test)"},
    rate={"ge": 1, "help": "py-spy samples per second"},
    sample_s={"ge": 0.0, "help": "seconds of py-spy sampling after a first run (at least two runs)"},
)

# %% tags=["parameters"]
workload = "train"
preset = "micro"
backends = ["torch", "ext"]
device = "cpu"
iterations = 10
repeats = 7
rate = 100
sample_s = 2.0
results_dir = ""

# %%
params = guard.check(globals())

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import display

from gsworkbench.core.figures import save_figure
from gsworkbench.core.provenance import machine_summary
from gsworkbench.jupyter.display import readable, result_link, svg_view
from gsworkbench.jupyter.start import start_run
from gsworkbench.profiling import diff, plot_stages, profile
from gsworkbench.profiling.compare import frames_view, ops_view, stages_view
from gsworkbench.profiling.op_table import top_ops
from gsworkbench.profiling.workloads import workload_spec

run_dir = start_run("04_profiling", params)

# %% [markdown]
# ## One profile per backend
#
# Each writes its files to its own folder (`profile_<backend>/`, linked below); the cells after this
# one show the stage tables, the top ops and the profilers' overheads side by side.

# %%
runs = {}
for backend in backends:
    spec, wl_params = workload_spec(workload, preset, backend, device, iterations)
    runs[backend] = profile(
        spec, wl_params, repeats=repeats, rate=rate, sample_s=sample_s, out=run_dir / f"profile_{backend}",
        show_summary=False,
    )
for r in runs.values():
    display(result_link(r.run_dir, results_dir, r.label))

# %% [markdown]
# ## Stage breakdowns side by side
#
# Median seconds per run and stage over the repeats; "other" is the wall time no stage covers.

# %%
fig = plot_stages({r.label: r.stages for r in runs.values()}, f"{workload}: time per run", machine_summary(device))
save_figure(run_dir / "stages.png", fig)
plt.show()
table = pd.concat({r.label: r.stages.set_index("stage")[["median_s", "share"]] for r in runs.values()}, axis=1)
display(readable(table))

# %% [markdown]
# ## Top ops (torch.profiler, self time, one run)

# %%
for r in runs.values():
    print(r.label)
    display(readable(top_ops(r.ops, 15)))

# %% [markdown]
# ## Profiler overheads (wall seconds per run)

# %%
display(readable(pd.concat({r.label: r.overhead.set_index("mode") for r in runs.values()}, axis=0)))

# %% [markdown]
# ## Flamegraphs (py-spy `--native`)
#
# The samples of the thread that ran the workload (in JupyterLab, the kernel's main thread): the
# kernel's own threads (IOPub, heartbeat, control), idle in their waits, are left out, and the line
# under each graph's title says how many samples that was. Width is the share of samples; Python
# frames warm, the extension's C++ frames (`csrc/`) aqua, other native frames blue-grey. Hover a box
# for its samples; click a box to zoom to it and its callees, click `all` (or a caller) to zoom back
# out. The link under each graph opens its SVG file.
# `profile.speedscope.json` in each folder opens in speedscope.app for the time-ordered view.

# %%
for r in runs.values():
    svg = r.file("flamegraph")
    if svg.is_file():
        display(svg_view(svg, results_dir))
    else:
        print(f"{r.label}: no flamegraph ({r.metadata['pyspy']})")

# %% [markdown]
# ## The difference: first backend -> last backend
#
# Stage ratios with their significance, judged by the workbench's one rule (as `gsworkbench compare`
# judges; the line above the table names it: Mann–Whitney U over the repeats at p < 0.002, which needs
# 7 repeats a side), the ops' gains and losses (self milliseconds), the frames whose share of the
# samples changed most, and the differential flamegraph: the second profile's flamegraph coloured by
# the change in each frame's share of the samples (red: more, blue: less).

# %%
first, last = runs[backends[0]], runs[backends[-1]]
result = diff(first, last, out=run_dir / "diff")
for warning in result.warnings:
    print("WARNING:", warning)
print(f"{first.label} -> {last.label}\nsignificance: {result.rule}")
display(readable(stages_view(result.stages)))
print("significant changes:", ", ".join(result.significant) or "none")
display(readable(ops_view(result.ops)))
if result.frames is not None:
    display(readable(frames_view(result.frames)))
if result.svg is not None:
    display(svg_view(run_dir / "diff" / "diff_flamegraph.svg", results_dir, svg=result.svg))
