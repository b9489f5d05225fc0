# ---
# jupyter:
#   gsworkbench:
#     smoke_parameters:
#       capture_height: 192
#       capture_spp: 16
#       capture_views: 23
#       capture_width: 256
#       iterations: 60
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
# # 07 · From photos to splats
#
# A folder of photos (or a video) with no poses becomes a trained splat scene, all on the CPU, in one
# call: `gsworkbench.capture.capture` runs COLMAP through pycolmap (SIFT features, matching, mapping
# with fallbacks until the photos register, undistortion), trains Gaussians from the SfM points with
# the `capture` preset, scores the held-out photos (every 8th), and writes `splats.ply`, `viewer.html`
# and `summary.html`. With `photos` empty, the input is the built-in capture scene's JPEG photos (a
# cluttered room through a distorted lens), without its poses or points.
#
# From a terminal: `gsworkbench capture PHOTOS` does the same; `gsworkbench reconstruct PHOTOS` only
# the poses; or this notebook with `gsworkbench run notebooks/07_capture.ipynb -p photos PHOTOS`.

# %%
from gsworkbench.jupyter import ParameterGuard

guard = ParameterGuard(
    photos={"help": "a folder of JPEG/PNG photos or a video file; '' = the built-in capture scene's photos"},
    capture_width={"ge": 64, "le": 4096, "help": "built-in photos: width in pixels"},
    capture_height={"ge": 48, "le": 4096, "help": "built-in photos: height in pixels"},
    capture_views={"ge": 6, "help": "built-in photos: how many"},
    capture_spp={"ge": 1, "help": "built-in photos: Mitsuba samples per pixel"},
    camera={"choices": ["per_lens", "per_size", "single", "per_image"],
            "help": "cameras shared per lens (sizes a few px apart cropped), per image size, by all, or one each"},
    camera_model={"choices": ["auto", "OPENCV", "SIMPLE_RADIAL", "RADIAL", "PINHOLE"],
                  "help": "COLMAP's lens model; auto: OPENCV for a camera of 10+ photos, else SIMPLE_RADIAL"},
    max_size={"ge": 64, "help": "long side of the working images (pixels)"},
    preset={"choices": ["capture", "short", "smoke"], "help": "training schedule"},
    iterations={"ge": 0, "help": "0 = the preset's"},
    seed={"ge": 0},
)

# %% tags=["parameters"]
photos = ""
capture_width = 320
capture_height = 240
capture_views = 28
capture_spp = 64
camera = "per_lens"
camera_model = "auto"
max_size = 1600
preset = "capture"
iterations = 0
seed = 0
results_dir = ""

# %%
params = guard.check(globals())

from pathlib import Path

import matplotlib.pyplot as plt
import pycolmap
import torch
from IPython.display import Image, display

from gsworkbench.capture import capture
from gsworkbench.core.figures import save_figure
from gsworkbench.jupyter.display import metrics_table, result_link
from gsworkbench.jupyter.start import start_run
from gsworkbench.scenes import load_scene
from gsworkbench.sfm.sfm_report import format_report, plot_cameras, read_report
from gsworkbench.synthetic import generate_scene
from gsworkbench.train.plots import training_curves

run_dir = start_run("07_capture", params)
print("threads:", torch.get_num_threads())
if photos:
    source = Path(photos)
else:  # the built-in capture's JPEGs: its poses and points stay behind
    n_test = max(1, capture_views // 7)
    built = generate_scene("capture", width=capture_width, height=capture_height,
                           n_train=capture_views - n_test, n_test=n_test, spp=capture_spp, seed=seed)
    source = built / "images"
print("photos:", source)

# %% [markdown]
# ## Photos to poses to splats
#
# Each stage shows a bar. Ctrl-C keeps what each stage finished (COLMAP's database, the training's
# checkpoint); running the cell again goes on from there.

# %%
result = capture(source, run_dir / "capture", preset=preset, iterations=iterations or None, seed=seed,
                 camera=camera, camera_model=camera_model, max_size=max_size, log=None)
display(result_link(result.summary, results_dir, "summary page"))

# %% [markdown]
# ## How good are the poses?
#
# The mean reprojection error should be well under a pixel and nearly every photo registered; the
# cameras should sit where the photos were taken. Strategies tried beyond the first mapping, photos
# left out (duplicates, panoramas) and photos that never registered are listed with the reason.

# %%
print(format_report(read_report(result.scene)))
fig = plot_cameras(pycolmap.Reconstruction(str(result.scene / "sparse" / "0")), "cameras and sparse points")
save_figure(run_dir / "cameras.png", fig)
plt.show()

# %% [markdown]
# ## Training and the held-out photos
#
# Every 8th registered photo is held out; training started from the sparse points. Each held-out
# photo is shown beside its render and the error (x 4).

# %%
data = load_scene(result.scene)
print(f"{len(data.train_ids)} train + {len(data.test_ids)} test photos at {data.width}x{data.height}, "
      f"{len(data.points)} SfM points; minutes per stage:",
      ", ".join(f"{k} {v / 60:.1f}" for k, v in result.seconds.items()))
metrics_table(result.metrics)

# %%
fig = training_curves(result.history)
save_figure(run_dir / "curves.png", fig)
plt.show()
print(result.evaluation.to_string(index=False))
for png in sorted((result.folder / "training").glob("test_*.png"))[:3]:
    display(Image(filename=str(png)))

# %% [markdown]
# ## The splats
#
# `splats.ply` uses the Inria 3DGS layout, which splat viewers and `gsworkbench.io.read_ply` load;
# `viewer.html` shows them in any browser with no server, at the first held-out photo's view; its link
# opens it in a new browser tab. In JupyterLab the viewer below orbits them about the scene's up axis,
# and `viewer.viewmat` and `viewer.K` are the view shown now, ready for `rasterize` (run headless, only
# the page is written).

# %%
from gsworkbench.jupyter.display import headless
from gsworkbench.viewer import SplatViewer

print(f"{result.splats}: {result.splats.stat().st_size / 1e6:.1f} MB")
display(result_link(result.splats, results_dir, "splats"))
if result.viewer is not None:
    display(result_link(result.viewer, results_dir, "viewer page"))
if headless():
    print("run headless: no live viewer; open the notebook in JupyterLab, or the viewer page in a browser")
else:
    viewer = SplatViewer(result.splats, scene=data)  # viewer.viewmat, viewer.K: the view shown now
    display(viewer)
