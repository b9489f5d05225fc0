# ---
# jupyter:
#   gsworkbench:
#     smoke_parameters:
#       bench_min_run_time: 0.02
#       bench_sizes:
#       - 1000
#       - 10000
#       num_splats: 2000
#       plot_points: 500
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
# # 05 · Splat transforms, SH rotation and PLY I/O
#
# Moves, rotates and scales a 3DGS splat set with `gsworkbench.transforms.transform`, rotating the
# spherical-harmonics (SH) coefficients with the scene, and checks numerically that a splat seen from a
# camera moved by the same rigid transform keeps its colour. Writes and re-reads an Inria-format PLY,
# then times every backend (`numpy`, `numba`, `torch`, `ext`) against a parallel memory copy of the same
# bytes. Tables and plots go to `results/`.

# %%
from gsworkbench.jupyter import ParameterGuard

guard = ParameterGuard(
    num_splats={"ge": 1},
    sh_degree={"ge": 0, "le": 3},
    ply_path={"path": "file", "help": "an Inria-layout PLY to load instead of synthetic splats"},
    seed={"ge": 0},
    plot_points={"ge": 1},
    bench_sizes={"ge": 1, "help": "splat counts of the benchmark"},
    bench_backends={"choices": ["numpy", "numba", "torch", "ext"]},
    bench_min_run_time={"gt": 0.0, "help": "seconds of timing per case"},
)

# %% tags=["parameters"]
num_splats = 200000
sh_degree = 3
ply_path = ""
seed = 0
plot_points = 4000
bench_sizes = [10000, 100000, 1000000]
bench_backends = ["numpy", "numba", "torch", "ext"]
bench_min_run_time = 0.3
results_dir = ""

# %%
params = guard.check(globals())

import math

import matplotlib.pyplot as plt
import pandas as pd
import torch

from gsworkbench._ext import has_ext
from gsworkbench.bench import get_suite, run_cases
from gsworkbench.core import gaussians
from gsworkbench.core.atomic import write_table
from gsworkbench.core.figures import save_figure
from gsworkbench.core.splats import synthetic_splats
from gsworkbench.io import read_ply, write_ply
from gsworkbench.jupyter.start import start_run
from gsworkbench.studies.suites.transforms import sweep_cases
from gsworkbench.transforms import compose, inverse, make_frames, transform
from gsworkbench.transforms.plots import throughput

run_dir = start_run("05_transforms", params)
print("threads:", torch.get_num_threads(), "| extension built:", has_ext())

# %% [markdown]
# ## Splats: loaded from a PLY or generated, and a PLY round trip

# %%
splats = read_ply(ply_path) if ply_path else synthetic_splats(num_splats, sh_degree, seed=seed)
print(f"{len(splats)} splats, SH degree {splats.sh_degree}, dtype {splats.means.dtype}")
subset = splats[: min(len(splats), 10000)]
path = write_ply(run_dir / "subset.ply", subset)
back = read_ply(path)
exact = all(torch.equal(getattr(back, f).view(torch.int32), getattr(subset, f).view(torch.int32))
            for f in ("means", "quats", "log_scales", "opacity_logits", "sh_dc", "sh_rest"))
print(f"PLY round trip of {len(subset)} splats ({path.stat().st_size / 1e6:.1f} MB): bit-exact = {exact}")
assert exact

# %% [markdown]
# ## Transform: rotate about a pivot, scale, translate
#
# `x -> s R (x - c) + c + t`: quaternions are left-multiplied by R's quaternion, log-scales shifted by
# log s, SH bands 1..3 multiplied by their rotation matrices. A non-uniform scale (a 3-vector) instead
# re-decomposes each covariance `A Sigma A^T` (A = diag(s) R) and rotates the SH by the rotation part of
# A (its polar factor).

# %%
angle = math.radians(60)
rotation = [math.cos(angle / 2), 0.3 * math.sin(angle / 2), 0.0, 0.95 * math.sin(angle / 2)]
center = splats.means.mean(0).tolist()
moved = transform(splats, rotation=rotation, translation=[1.5, 0.0, 0.5], scale=1.5, center=center)
squashed = transform(splats, scale=[1.0, 1.0, 0.4], center=center)

def colours(s, n):
    rgb = gaussians.sh_to_color(s.sh[:n], s.means[:n] - torch.tensor([0.0, -4.0, 1.0]), s.sh_degree)
    return rgb.clamp(0, 1).numpy()

n = min(plot_points, len(splats))
idx = torch.randperm(len(splats), generator=torch.Generator().manual_seed(seed))[:n]
fig, axes = plt.subplots(1, 3, figsize=(13, 4.2), sharex=True, sharey=True)
views = [("before", splats), ("rotated + scaled + moved", moved), ("non-uniform scale z x0.4", squashed)]
for ax, (title, s) in zip(axes, views):
    sub = s[idx]
    ax.scatter(sub.means[:, 0], sub.means[:, 2], s=2, c=colours(sub, n))
    ax.set(title=title, xlabel="x", aspect="equal")
axes[0].set_ylabel("z")
save_figure(run_dir / "before_after.png", fig)
plt.show()

# %% [markdown]
# ## The SH rotation property, numerically
#
# Splats and camera moved by the same rigid transform: the colour of every splat (its SH evaluated along
# the camera-to-splat direction) must not change. Leaving the SH unrotated, as simpler tools do, breaks
# this as soon as the SH degree is above 0.

# %%
s64 = splats[:20000].to(torch.float64)
frames = make_frames(rotation=rotation, translation=[1.5, 0.0, 0.5], center=center)
R, t = torch.from_numpy(frames.A[0]), torch.from_numpy(frames.b[0])
rows = []
for backend in [b for b in ("numpy", "numba", "torch", "ext") if b != "ext" or has_ext()]:
    out = transform(s64, frames, backend=backend)
    for cam in ([0.0, -4.0, 1.0], [3.0, 2.0, 0.5]):
        p = torch.tensor(cam, dtype=torch.float64)
        before = gaussians.eval_sh(s64.sh, s64.means - p, s64.sh_degree)
        after = gaussians.eval_sh(out.sh, out.means - (R @ p + t), s64.sh_degree)
        unrotated = gaussians.eval_sh(s64.sh, out.means - (R @ p + t), s64.sh_degree)
        rows.append(
            {
                "backend": backend,
                "camera": str(cam),
                "max_abs_colour_change": float((after - before).abs().max()),
                "without_sh_rotation": float((unrotated - before).abs().max()),
            }
        )
sh_check = pd.DataFrame(rows)
write_table(run_dir / "sh_rotation_check.csv", sh_check)
assert (sh_check.max_abs_colour_change < 1e-9).all()
sh_check

# %%
# composition and orthogonality of the band matrices, and an inverse round trip (float32)
g = torch.Generator().manual_seed(seed)
R1, R2 = (gaussians.quat_to_rotmat(torch.randn(4, generator=g, dtype=torch.float64)) for _ in range(2))


def D(r):
    return gaussians.sh_rotation_matrix(r, 3)


print("max |D(R1 R2) - D(R1) D(R2)| =", float((D(R1 @ R2) - D(R1) @ D(R2)).abs().max()))
print("max |D D^T - I|              =", float((D(R1) @ D(R1).T - torch.eye(15, dtype=torch.float64)).abs().max()))
f = make_frames(rotation=rotation, translation=[1.5, 0.0, 0.5], scale=[1.0, 2.0, 0.5], center=center)
round_trip = transform(transform(splats, f), inverse(f))


def rel(a, b):
    return float((a - b).norm() / b.norm())


print(
    f"inverse round trip (non-uniform scale): means rel. error {rel(round_trip.means, splats.means):.2e}, "
    f"covariances {rel(round_trip.covariances, splats.covariances):.2e}, "
    f"SH {rel(round_trip.sh_rest, splats.sh_rest):.2e}"
)
both = transform(splats, compose(inverse(f), f))
print(f"compose(inverse(f), f) moves means by at most {float((both.means - splats.means).abs().max()):.2e}")

# %% [markdown]
# ## Throughput of every backend against the memory-copy bandwidth
#
# Each backend transforms N splats (a similarity transform) with SH degree 0 (means, quaternions and
# scales only) and 3, into fresh tensors (`out=False`) or preallocated buffers (`out=True`). The `copy`
# rows time torch's multithreaded `copy_` of the same number of bytes on the same threads.

# %%
suite = get_suite("transforms")
cases = sweep_cases(bench_sizes, backends=tuple(bench_backends))
table = suite.summarize(run_cases(cases, min_run_time=bench_min_run_time, progress=False))
write_table(run_dir / "bench_transforms.csv", table)
cols = ["backend", "n", "sh_degree", "out", "median_s", "iqr_pct", "gaussians_per_s", "gb_per_s", "frac_of_copy"]
cols += ["speedup_vs_numpy", "threads"]
show = table[[c for c in cols if c in table]].copy()
show

# %%
fig = throughput(table)
save_figure(run_dir / "throughput.png", fig)
plt.show()
