# ---
# jupyter:
#   gsworkbench:
#     smoke_parameters:
#       bench_min_run_time: 0.02
#       bench_nums:
#       - 500
#       - 2000
#       bench_sizes:
#       - 64
#       bench_torch_max_num: 500
#       height: 48
#       num_gaussians: 500
#       orbit_views: 4
#       width: 64
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
# # 03 · Rendering 3D Gaussian splats on the CPU
#
# Renders a synthetic splat scene with the differentiable tile rasterizer `gsworkbench.splat.rasterize`
# (gsplat conventions): an orbit of views, their expected depth and alpha, then a notebook-sized run of the
# `render` benchmark (ext against the pure-torch reference): the per-stage time breakdown and frames per
# second against Gaussian count and resolution. The last cell is an interactive camera (ipywidgets); run
# headless, it renders its default view once. Tables and plots go to `results/`.

# %%
from gsworkbench.jupyter import ParameterGuard

guard = ParameterGuard(
    num_gaussians={"ge": 1},
    sh_degree={"ge": 0, "le": 3},
    width={"ge": 1, "le": 8192, "help": "image width in pixels"},
    height={"ge": 1, "le": 8192, "help": "image height in pixels"},
    orbit_views={"ge": 1},
    distance={"gt": 0.0, "help": "camera distance from the scene centre"},
    elevation={"ge": -89.0, "le": 89.0, "help": "camera elevation in degrees"},
    backend={"choices": ["ext", "torch"]},
    seed={"ge": 0},
    bench_nums={"ge": 1, "help": "Gaussian counts of the benchmark"},
    bench_sizes={"ge": 1, "le": 8192, "help": "square image sizes of the benchmark (pixels)"},
    bench_backends={"choices": ["ext", "torch"]},
    bench_torch_max_num={"ge": 0},
    bench_torch_max_size={"ge": 0},
    bench_min_run_time={"gt": 0.0, "help": "seconds of timing per case"},
)

# %% tags=["parameters"]
num_gaussians = 20000
sh_degree = 3
width = 256
height = 256
orbit_views = 8
distance = 3.0
elevation = 20.0
backend = "ext"
seed = 0
bench_nums = [2000, 20000, 100000]
bench_sizes = [128, 256, 512]
bench_backends = ["ext", "torch"]
bench_torch_max_num = 2000
bench_torch_max_size = 256
bench_min_run_time = 0.3
results_dir = ""

# %%
params = guard.check(globals())

import matplotlib.pyplot as plt
import torch
from IPython.display import display

from gsworkbench.bench import run_cases
from gsworkbench.core.atomic import write_table
from gsworkbench.core.figures import save_figure
from gsworkbench.core.splats import synthetic_splats
from gsworkbench.jupyter.display import headless
from gsworkbench.jupyter.start import start_run
from gsworkbench.splat import orbit_cameras, rasterize
from gsworkbench.splat.plots import depth_alpha, fps_plot, spread_views, stage_breakdown
from gsworkbench.studies.suites.render import STAGES, render_cases, summarize_render

run_dir = start_run("03_rendering", params, seed=seed)
print("threads:", torch.get_num_threads())

# %% [markdown]
# ## An orbit of views (one call, all cameras)

# %%
scene = synthetic_splats(num_gaussians, sh_degree, seed=seed)
viewmats, Ks = orbit_cameras(orbit_views, width, height, distance=distance, elevation_deg=elevation)
with torch.no_grad():
    img, alpha, meta = rasterize(
        scene.means, scene.quats, scene.scales, scene.opacities, scene.sh, viewmats, Ks, width, height,
        sh_degree=sh_degree, render_mode="RGB+ED", backend=backend,
    )
rgb, depth = img[..., :3].clamp(0, 1), img[..., 3]
print(f"{num_gaussians} Gaussians, {orbit_views} views of {width}x{height}:",
      f"{meta['n_isects']} tile intersections")
cols = min(4, orbit_views)
rows = (orbit_views + cols - 1) // cols
fig, axes = plt.subplots(rows, cols, figsize=(3 * cols, 3 * rows * height / width), squeeze=False)
for i, ax in enumerate(axes.flat):
    ax.axis("off")
    if i < orbit_views:
        ax.imshow(rgb[i].numpy())
        ax.set_title(f"azimuth {360 * i / orbit_views:.0f}°", fontsize=9)
save_figure(run_dir / "orbit.png", fig)
plt.show()

# %% [markdown]
# ## Expected depth and alpha

# %%
fig = depth_alpha(depth, alpha, spread_views(orbit_views, 3), orbit_views)
save_figure(run_dir / "depth_alpha.png", fig)
plt.show()

# %% [markdown]
# ## Benchmark: ext against the torch reference (a notebook-sized `render` grid)
#
# Reading the FPS plot: with many Gaussians the frame time follows the tile intersections (`n_isects`),
# and when most Gaussians cover a single 16-pixel tile at both sizes these barely change with the
# resolution (100k Gaussians: about 186.5k intersections at 128² and 187.5k at 256²). FPS is then nearly
# flat in resolution, and a 128² frame can come out slower than a 256² one by the run-to-run spread of a
# shared machine (the error bars) or because its 64 tiles share the threads less evenly than 256 tiles.

# %%
sizes = [(s, s) for s in bench_sizes]

def skip(p):
    if p["backend"] == "torch" and (p["num"] > bench_torch_max_num or p["width"] > bench_torch_max_size):
        return "torch reference: outside the notebook's size limits"
    return None

cases = render_cases(bench_nums, sizes, [sh_degree], bench_backends, STAGES, skip=skip)
bench = summarize_render(run_cases(cases, min_run_time=bench_min_run_time, progress=False))
write_table(run_dir / "render_bench.csv", bench)
show = bench[bench.stage.isin(["forward", "forward+backward"])].dropna(subset=["median_s"])
cols = ["backend", "num", "width", "height", "stage", "median_s", "fps", "n_isects", "first_call_peak_rss_mib"]
cols += ["speedup_vs_torch"]
show[cols]

# %%
fig = stage_breakdown(bench, bench_backends, sh_degree)
save_figure(run_dir / "stage_breakdown.png", fig)
plt.show()

# %%
fig = fps_plot(bench)
save_figure(run_dir / "fps.png", fig)
plt.show()

# %% [markdown]
# ## Roofline: how far each stage is from the machine's ceilings
#
# The machine's float32 FMA peak and triad bandwidth, measured at this notebook's threads, bound what a
# kernel of a given arithmetic intensity (flop/byte) can reach. One point per ext forward stage of the
# largest scene and size above; the rasterizer's flops assume every pixel of a tile is evaluated for
# each intersection (an upper bound), and project and isect count bytes only (no point). See
# docs/roofline.md for the counts and what they leave out.

# %%
from gsworkbench.bench.ceilings import ceilings_unavailable, run_ceilings
from gsworkbench.bench.roofline import add_roofline_columns, plot_roofline

ceilings = run_ceilings(torch.get_num_threads())
largest = bench[(bench.backend == "ext") & (bench.num == max(bench_nums)) & (bench.width == max(bench_sizes))
                & bench.stage.isin(["sh", "rasterize", "forward"])]  # fmt: skip
if ceilings is None:
    print("no ceilings:", ceilings_unavailable() or "GSW_CEILINGS=0")
else:
    roof = add_roofline_columns(largest, ceilings)
    roof = roof.assign(label=[f"{r.stage} ({r.num} splats, {r.width}x{r.height})" for r in roof.itertuples()])
    display(roof[["label", "intensity", "gflops", "gbs", "pct_of_peak"]])
    fig = plot_roofline(roof, ceilings, label="label")
    save_figure(run_dir / "roofline.png", fig)
    plt.show()

# %% [markdown]
# ## Interactive camera
#
# Drag the sliders to orbit the scene (needs a live kernel with ipywidgets). The default view is also
# drawn as a plain image (and saved as `camera_default_view.png`), so the executed notebook shows it in any
# viewer; run headless (`gsworkbench run`, `make test`'s nbval: `GSW_HEADLESS=1`), the cell creates no
# widget and shows only that image.

# %%
from gsworkbench.splat import intrinsics_from_fov, look_at, orbit_eye

K1 = intrinsics_from_fov(width, height, 60.0)[None]



def view_figure(azimuth=30.0, elevation=20.0, distance=3.0):
    vm = look_at(orbit_eye(azimuth, elevation, distance))[None]
    with torch.no_grad():
        im, _, _ = rasterize(scene.means, scene.quats, scene.scales, scene.opacities, scene.sh, vm, K1,
                             width, height, sh_degree=sh_degree, backend=backend)
    fig, ax = plt.subplots(figsize=(4, 4 * height / width))
    ax.imshow(im[0].clamp(0, 1).numpy())
    ax.set_title(f"azimuth {azimuth:.0f}°, elevation {elevation:.0f}°, distance {distance:.1f}", fontsize=9)
    ax.axis("off")
    return fig


def render_view(azimuth=30.0, elevation=20.0, distance=3.0):
    view_figure(azimuth, elevation, distance)
    plt.show()


save_figure(run_dir / "camera_default_view.png", view_figure())
plt.show()  # the static image, beside the widget below
try:
    import ipywidgets as widgets
    from IPython.display import display
except ImportError:
    widgets = None
if headless():  # no frontend to show sliders: the default view above is the cell's output
    print("run headless: no sliders; open the notebook in JupyterLab to orbit the camera")
elif widgets is not None:
    slider = dict(continuous_update=False)
    display(widgets.interactive(
        render_view,
        azimuth=widgets.FloatSlider(value=30.0, min=0.0, max=360.0, step=5.0, **slider),
        elevation=widgets.FloatSlider(value=20.0, min=-80.0, max=80.0, step=5.0, **slider),
        distance=widgets.FloatSlider(value=3.0, min=1.5, max=8.0, step=0.1, **slider),
    ))
