# ---
# jupyter:
#   gsworkbench:
#     smoke_parameters:
#       preset: smoke
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
# # 02 · Training 3D Gaussian splats from images
#
# Trains a 3DGS scene from posed images with `gsworkbench.train.train` on the CPU (or CUDA): the
# rasterizer of notebook 03 renders each training view, the loss is 0.8 L1 + 0.2 (1 − SSIM), Adam
# steps the splats, and a densification strategy (adaptive density control, or MCMC) grows and prunes
# them. Defaults follow gsplat's `simple_trainer`; the presets (`smoke`, `micro`, `short`, `full7k`,
# `full30k`, and `nerf_synthetic` / `nerf_synthetic_400` / `nerf_synthetic_800`: the NeRF-synthetic
# protocol from random points in the object's visual hull at 200, 400 and 800 px, scored over white)
# set the schedule and the built-in scene. Without a
# point cloud, training starts where the cameras look (`init_rule`). The built-in scenes are rendered by Mitsuba 3, an
# independent renderer, so training is a real reconstruction problem. Held-out test views give PSNR and
# SSIM. Tables, plots, the checkpoint and the exported PLY go to `results/`.

# %%
from gsworkbench.jupyter import ParameterGuard

guard = ParameterGuard(
    preset={"choices": ["smoke", "micro", "short", "nerf_synthetic", "nerf_synthetic_400",
                       "nerf_synthetic_800", "full7k", "full30k"],
            "help": "schedule and built-in scene"},
    scene={"choices": ["object", "bricks", "room"], "help": "built-in scene (when scene_path is empty)"},
    scene_path={"path": "dir", "help": "a NeRF-synthetic, nerfstudio or COLMAP folder; '' = the built-in scene"},
    downsample={"ge": 1, "help": "scene_path images at 1/downsample size (images_N folders, else a box filter)"},
    strategy={"choices": ["default", "mcmc"], "help": "densification: adaptive density control or MCMC"},
    backend={"choices": ["ext", "torch"]},
    device={"choices": ["cpu", "cuda"]},
    iterations={"ge": 0, "help": "0 = the preset's"},
    seed={"ge": 0},
    checkpoint_every={"ge": 0, "help": "write checkpoint.pt every this many steps; 0 = only at the end"},
    resolution_schedule={"help": "coarse-to-fine 'until_step:factor,...' (e.g. '1000:4,2000:2'); '' = full size"},
    resume={"path": "dir", "help": "a results folder of an interrupted run to go on from; '' = start afresh"},
    live_every={"ge": 0, "help": "in JupyterLab, a live splat viewer follows the run every this many steps; 0 = off"},
    resume_other_data={"help": "resume even from a checkpoint trained on other data (refused otherwise)"},
)

# %% tags=["parameters"]
preset = "short"
scene = "object"
scene_path = ""
downsample = 1
strategy = "default"
backend = "ext"
device = "cpu"
iterations = 0
seed = 0
checkpoint_every = 0
resolution_schedule = ""
resume = ""
live_every = 100
resume_other_data = False
results_dir = ""

# %%
params = guard.check(globals())

import matplotlib.pyplot as plt
import torch
from IPython.display import display

from gsworkbench.core.atomic import write_table
from gsworkbench.core.figures import save_figure
from gsworkbench.io import read_ply
from gsworkbench.jupyter.display import metrics_table, result_link
from gsworkbench.jupyter.start import start_run
from gsworkbench.scenes import load_scene
from gsworkbench.synthetic import builtin_scene
from gsworkbench.train import preset as train_preset
from gsworkbench.train import preset_scene, train
from gsworkbench.train.plots import dataset_views, stage_bars, stage_table, test_views, training_curves

run_dir = start_run("02_training", params)
# progress: the bar below, whatever the preset says (the smoke preset turns it off for scripts)
overrides = {"strategy": strategy, "backend": backend, "device": device, "seed": seed, "progress": True}
if iterations:
    overrides["iterations"] = iterations
if checkpoint_every:
    overrides["checkpoint_every"] = checkpoint_every
if resolution_schedule:
    overrides["resolution_schedule"] = resolution_schedule
config = train_preset(preset, **overrides)
print("threads:", torch.get_num_threads())
print(config)

# %% [markdown]
# ## The dataset

# %%
if scene_path:
    data = load_scene(scene_path, downsample=downsample)
else:
    data = builtin_scene(**{**preset_scene(preset), "name": scene})
fig = dataset_views(data)
save_figure(run_dir / "dataset.png", fig, device=device)
plt.show()

# %% [markdown]
# ## Training
#
# The progress bar shows the loss, the PSNR of the step's training view and the Gaussian count. In
# JupyterLab a splat viewer follows the run every `live_every` steps (orbit it while it trains); run
# headless, there is none.
# Ctrl-C (or "interrupt kernel") stops after the current step and keeps the history, a checkpoint and
# the splats in the results folder; `resume` set to that folder goes on from there.

# %%
from gsworkbench.jupyter.display import headless
from gsworkbench.viewer import LiveViewer

live = None if headless() or not live_every else LiveViewer(data, background=data.background)
result = train(data, config, results_dir=run_dir, resume=resume or None, resume_other_data=resume_other_data,
               resume_hint="to go on, set resume = '{run_dir}' in the parameters cell and run the notebook again",
               watch=live, watch_every=live_every or 1)
metrics_table(result.metrics)

# %%
fig = training_curves(result.history)
save_figure(run_dir / "curves.png", fig, device=device)
plt.show()

# %% [markdown]
# ## Held-out test views: ground truth, render, error

# %%
print(result.evaluation.to_string(index=False))
fig = test_views(data, result.renders, result.evaluation)
save_figure(run_dir / "test_views.png", fig, device=device)
plt.show()

# %% [markdown]
# ## Where the time goes
#
# Median milliseconds per step and stage (the forward stages are timed inside `rasterize`; "backward"
# is the whole backward pass through every stage).

# %%
table = stage_table(result.history)
write_table(run_dir / "stages.csv", table)
print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
label = f"{backend}, {result.metrics['num_gaussians']} Gaussians at the end"
fig = stage_bars({label: table}, f"time per step, {data.width}x{data.height} px")
save_figure(run_dir / "stages.png", fig, device=device)
plt.show()

# %% [markdown]
# ## The exported splats
#
# `splats.ply` uses the Inria 3DGS layout, which splat viewers and `gsworkbench.io.read_ply` load.

# %%
ply = result.files["ply"]
back = read_ply(ply)
display(result_link(ply, results_dir, "splats"))
print(f"{ply.stat().st_size / 1e6:.1f} MB, {len(back)} splats, SH degree {back.sh_degree}")
display(result_link(result.files["checkpoint"], results_dir, "checkpoint"))

# %% [markdown]
# ## Look at it
#
# The splats in the browser (WebGL, Spark): drag to orbit, the button switches to fly (WASD), the menu
# jumps to any train or test view. `viewer.viewmat` and `viewer.K` are the view shown now, ready for
# `rasterize`. `viewer.html` opens in any browser with no server, at the first test view. Run headless
# (`gsworkbench run`, nbval), the cell writes the page and creates no widget.

# %%
from gsworkbench.viewer import SplatViewer, save_result_page

page = save_result_page(run_dir / "viewer.html", result, data)
if page is not None:
    display(result_link(page, results_dir, "viewer page"))
if headless():
    print("run headless: no live viewer; open the notebook in JupyterLab, or the viewer page in a browser")
else:
    viewer = SplatViewer(result, scene=data)
    display(viewer)
