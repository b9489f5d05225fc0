# ---
# jupyter:
#   gsworkbench:
#     smoke_parameters:
#       batch_size: 1024
#       iterations: 30
#       num_gaussians: 32
#       timing_batch: 256
#       timing_gaussians: 16
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
# # 01 · Fitting a 3D Gaussian field
#
# Trains a sum of N weighted 3D Gaussians to match a target density volume, end to end, with one of the
# evaluation backends (`loop`, `vectorized`, `torch`, `numba`, `ext`). Shows the loss curve, target-against-fit
# slices and the time per training iteration of each backend. Tables and plots go to `results/`.

# %%
from gsworkbench.jupyter import ParameterGuard

guard = ParameterGuard(
    num_gaussians={"ge": 1, "help": "Gaussians in the field"},
    covariance={"choices": ["full", "diag"]},
    backend={"choices": ["loop", "vectorized", "torch", "numba", "ext"], "help": "evaluation backend for training"},
    iterations={"ge": 1},
    batch_size={"ge": 1, "help": "points sampled per iteration"},
    target={"choices": ["torus", "shell", "mixture"]},
    seed={"ge": 0},
    timing_backends={"choices": ["loop", "vectorized", "torch", "numba", "ext"], "help": "backends timed at the end"},
    timing_gaussians={"ge": 1},
    timing_batch={"ge": 1},
)

# %% tags=["parameters"]
num_gaussians = 512
covariance = "full"
backend = "ext"
iterations = 1500
batch_size = 8192
target = "torus"
seed = 0
timing_backends = ["loop", "vectorized", "torch", "numba", "ext"]
timing_gaussians = 256
timing_batch = 2048
results_dir = ""

# %%
params = guard.check(globals())

import matplotlib.pyplot as plt
import torch

from gsworkbench import field
from gsworkbench.bench import run_cases
from gsworkbench.core.atomic import write_table
from gsworkbench.core.figures import save_figure
from gsworkbench.field.plots import field_slices
from gsworkbench.jupyter.display import readable
from gsworkbench.jupyter.start import start_run
from gsworkbench.studies.suites.field import summarize as summarize_field_bench
from gsworkbench.studies.suites.field import train_step_cases

run_dir = start_run("01_gaussian_field", params, seed=seed)
print("threads:", torch.get_num_threads())

# %% [markdown]
# ## Train

# %%
tgt = field.make_target(target, seed=seed)
model = field.GaussianField(num_gaussians, covariance, backend=backend, seed=seed)
result = field.train_field(model, tgt, field.FieldTrainConfig(iterations=iterations, batch_size=batch_size, seed=seed))
history = result.history.assign(backend=backend, covariance=covariance, num_gaussians=num_gaussians)
write_table(run_dir / "history.csv", history)
print(f"held-out relative RMSE: {result.final_error:.4f}   MSE: {result.final_loss:.3e}")
print(f"median step: {history.time_s.median() * 1e3:.2f} ms")

# %%
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.semilogy(history.iteration, history.loss)
ax.set(xlabel="iteration", ylabel="MSE", title=f"{target}: N={num_gaussians}, {covariance}, {backend}")
save_figure(run_dir / "loss.png", fig)
plt.show()

# %% [markdown]
# ## Target against fit: slices through the volume

# %%
fig = field_slices(tgt, model)
save_figure(run_dir / "slices.png", fig)
plt.show()

# %% [markdown]
# ## Time per training iteration, by backend
#
# The `field` benchmark suite's `train-step` cases (sample a batch, MSE, backward, Adam: the trainer's own
# step), the backends timed in interleaved rounds by the benchmark runner: median and IQR over the rounds.

# %%
cases = train_step_cases(tgt, timing_gaussians, covariance, timing_batch, timing_backends, seed=seed)
summary = summarize_field_bench(run_cases(cases, progress=False)).drop(columns="samples_s")
write_table(run_dir / "step_times.csv", summary)
fig, ax = plt.subplots(figsize=(6, 3))
ax.barh(summary.backend, summary.median_s * 1e3, xerr=summary.iqr_s.fillna(0) * 1e3)
ax.set(xscale="log", xlabel="ms per iteration (median, IQR)", title=f"N={timing_gaussians}, batch={timing_batch}")
save_figure(run_dir / "step_times.png", fig)
plt.show()
readable(summary)
