# ---
# jupyter:
#   gsworkbench:
#     smoke_parameters:
#       min_run_time: 0.02
#       sweep_backends:
#       - ext
#       sweep_sizes:
#       - 100
#       - 1000
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
# # 06 · Comparisons you can trust
#
# A baseline against a candidate, case by case, with a significance test on the raw per-round samples
# (two-sided Mann–Whitney U at p < 0.002 plus a ratio threshold, as asv does, and a bootstrap interval of
# the ratio of medians); the suite's history over commits; scaling plots with fitted exponents; and a
# small parameter sweep run on Dask. The logic lives in `gsworkbench.bench` (compare, history, scaling,
# sweep); the same comparison is `gsworkbench compare`. Timings on a shared or loaded machine are only
# as good as the interleaving makes them: read the verdict column, not the third digit.

# %%
from gsworkbench.jupyter import ParameterGuard

guard = ParameterGuard(
    suite={"choices": ["field", "transforms", "render"], "help": "the benchmark suite to compare"},
    compare_by={"choices": ["backends", "revisions"], "help": "baseline/candidate: backends of one run, or revisions"},
    baseline={"help": "a backend (torch) or a git revision (HEAD~1)"},
    candidate={"help": "a backend (ext) or a git revision (HEAD)"},
    min_run_time={"gt": 0.0, "help": "seconds of timing per case (and revision)"},
    threshold={"gt": 0.0, "lt": 1.0, "help": "smallest slow-down that counts (0.05 = 5%)"},
    sweep_sizes={"ge": 1, "min_len": 2, "help": "Gaussian counts N of the field sweep"},
    sweep_backends={"choices": ["loop", "vectorized", "torch", "ext"], "help": "backends of the field sweep"},
    converge_results={"path": "dir", "help": "a `gsworkbench bench converge` run folder to plot; '' = none"},
)

# %% tags=["parameters"]
suite = "field"
compare_by = "backends"
baseline = "torch"
candidate = "ext"
quick = True
min_run_time = 0.3
threshold = 0.05
sweep_sizes = [100, 1000, 4096]
sweep_backends = ["torch", "ext"]
converge_results = ""
results_dir = ""

# %%
params = guard.check(globals())

import matplotlib.pyplot as plt
import torch
from IPython.display import display

import gsworkbench.studies.suites  # noqa: F401  (registers the built-in suites)
from gsworkbench.bench import run_suite, save_run
from gsworkbench.bench.compare import compare_runs
from gsworkbench.bench.history import history_table, plot_history
from gsworkbench.bench.scaling import SPECS, fit_table, plot_scaling
from gsworkbench.bench.store import find_bench_runs, load_bench_run
from gsworkbench.core.atomic import write_table
from gsworkbench.core.figures import add_footer, save_figure
from gsworkbench.core.provenance import machine_summary
from gsworkbench.jupyter.start import start_run
from gsworkbench.jupyter.sweep import run_sweep, suite_task
from gsworkbench.studies.converge import plot_converge_curves

run_dir = start_run("06_comparisons", params)
threads = torch.get_num_threads()
footer = machine_summary()
print("threads:", threads)

# %% [markdown]
# ## Baseline against candidate
#
# With `compare_by = "backends"` both backends are timed in the same interleaved rounds of one run;
# with `"revisions"` each revision is checked out in its own git worktree, built, and the two are timed
# case by case in alternating rounds, then judged paired (Wilcoxon signed-rank on the per-round ratios:
# the machine's drift over the run cancels in each round's ratio). Exit-code semantics of the CLI: any
# "slower" row fails.

# %%
if compare_by == "backends":
    table = run_suite(suite, quick=quick, threads=threads, min_run_time=min_run_time, progress=False)
    bench_dir = save_run(suite, table, {"suite": suite, "quick": quick, "threads": threads,
                                        "min_run_time": min_run_time}, root=run_dir)  # fmt: skip
    comparison = compare_runs(bench_dir, bench_dir, (baseline, candidate), threshold=threshold)
else:
    from gsworkbench.bench.revisions import compare_revisions

    dirs = compare_revisions(baseline, candidate, suite, quick=quick, threads=threads, min_run_time=min_run_time,
                             root=run_dir, progress=False)  # fmt: skip
    comparison = compare_runs(*dirs, threshold=threshold)
comparison.write(run_dir)
print(comparison.rule)
for warning in comparison.warnings:
    print("warning:", warning)
comparison.display_table().style.format(precision=4, na_rep="")

# %% [markdown]
# ## History of the suite
#
# Every stored run of the suite under `results/` (and this notebook's), median and quartiles per case;
# a triangle marks a significant change against the previous run by the same rule as above.

# %%
history = history_table(find_bench_runs(suite) + find_bench_runs(suite, run_dir))  # results/, then this run
write_table(run_dir / "history.csv", history)
fig = plot_history(history, max_cases=6, footer=footer)
save_figure(run_dir / "history.png", fig)
plt.show()

# %% [markdown]
# The latest run of each case with its share of the machine's roof (`pct_of_peak`: achieved over
# min(peak, intensity x bandwidth) at the run's measured ceilings; see docs/roofline.md).

# %%
roof = history.dropna(subset=["pct_of_peak"]).drop_duplicates("case", keep="last")
if len(roof):
    display(roof[["case", "commit", "median_s", "pct_of_peak"]])
else:
    print("no run of this suite has roofline columns (no work counts, or no ceilings)")

# %% [markdown]
# ## A sweep on Dask: field throughput against size
#
# One LocalCluster worker (benchmark runs must not share the machine), `threads` threads per run; each
# point of the grid is a task, its table gathered with the parameters as columns. Re-running resumes.

# %%
sweep = run_sweep(suite_task("field", min_run_time=min_run_time, mode="forward", covariance="full"),
                  {"N": sweep_sizes, "backend": sweep_backends}, run_dir / "sweep", workers=1,
                  run_threads=threads, progress=False)  # fmt: skip
print(f"{len(sweep.table)} rows, {len(sweep.errors)} failed runs")
sweep.table.filter(["N", "B", "backend", "compile", "median_s", "iqr_s", "pairs_per_s", "skipped"])

# %%
fig, ax = plt.subplots(figsize=(6.5, 4))
fits = plot_scaling(ax, sweep.table, SPECS["field"][0])
save_figure(run_dir / "sweep_scaling.png", fig)  # with the machine and commit footer
plt.show()
display(fit_table(fits))

# %% [markdown]
# ## Scaling in the latest full runs
#
# Log-log, one fitted exponent per series; (!) marks a departure from the exponent the work implies.
# Each suite's plots use its latest stored full run (`gsworkbench bench SUITE`).

# %%
for name, specs in SPECS.items():
    runs = [(r, r.metadata.get("parameters", {})) for r in find_bench_runs(name)]
    full = [r for r, p in runs if not p.get("quick") and not p.get("cases")]  # whole suites only
    if not full:
        print(f"{name}: no full run under results/ (run `gsworkbench bench {name}`)")
        continue
    fig, axes = plt.subplots(1, len(specs), figsize=(7 * len(specs), 4), squeeze=False)
    fits = [plot_scaling(ax, full[-1].table, spec) for ax, spec in zip(axes[0], specs)]
    add_footer(fig, text=f"{full[-1].path.name} | {footer}")
    fig.tight_layout()
    save_figure(run_dir / f"scaling_{name}.png", fig)
    plt.show()
    for table in fits:
        display(fit_table(table))

# %% [markdown]
# ## Time to a held-out PSNR
#
# With `converge_results` (the folder of a `gsworkbench bench converge` run): each variant's held-out
# PSNR against minutes of training, and the minutes to each target (NaN: not reached within the caps).
# Markers are evaluations on every test view; the line between them also follows the probe views.

# %%
if converge_results:
    converge = load_bench_run(converge_results)
    if converge.suite != "converge":
        raise ValueError(f"converge_results: {converge_results} is a {converge.suite!r} run, not a converge run")
    fig = plot_converge_curves(converge.table, footer=f"{converge.path.name} | {footer}")
    save_figure(run_dir / "converge_curves.png", fig)
    plt.show()
    minute_cols = [c for c in converge.table if c.startswith("minutes_to_")]
    display(converge.table.filter(["case", "preset", "schedule", "init_scale", *minute_cols, "final_test_psnr_db",
                                   "eval_share", "gaussians"]))  # fmt: skip
else:
    print("no converge_results given: run `gsworkbench bench converge` and pass its folder to plot its curves")
