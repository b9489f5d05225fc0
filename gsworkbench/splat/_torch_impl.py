"""Pure-torch reference of each rasterizer stage (gsplat conventions); differentiable by autograd.

Readable rather than fast: projection, SH and tile intersection are vectorized over Gaussians and
cameras; rasterization is vectorized over intersections x the pixels of their tile (no Python loop
over tiles, so every stage traces whole under torch.compile). The ``ext`` kernels (csrc/cpu/splat_*.cpp)
are tested against these functions.

Shapes: N Gaussians, C cameras, D colour channels, M tile intersections, images H x W (pixels).
"""

from __future__ import annotations

import math

import torch

from gsworkbench.core import gaussians
from gsworkbench.core.compile import data_dependent_size
from gsworkbench.splat.memory_estimate import check_torch_pairs

ALPHA_MAX = 0.99
ALPHA_MIN = 1.0 / 255.0
TRANSMITTANCE_MIN = 1e-4
RADIUS_MAX = 1 << 30  # the ext kernel's clamp of a projected radius (pixels), so it fits int32


def project_gaussians(
    means: torch.Tensor,
    quats: torch.Tensor,
    scales: torch.Tensor,
    viewmats: torch.Tensor,
    Ks: torch.Tensor,
    width: int,
    height: int,
    eps2d: float = 0.3,
    near_plane: float = 0.01,
    far_plane: float = 1e10,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """EWA projection of N Gaussians into C pinhole cameras.

    Returns radii [C,N] int32 (0: culled), means2d [C,N,2] (pixels), depths [C,N] (camera z),
    conics [C,N,3] (inverse blurred 2D covariance: xx, xy, yy) and compensations [C,N]
    (sqrt(det cov2d / det blurred), for the antialiased mode). Culled entries are 0.
    """
    W = viewmats[:, :3, :3]  # [C,3,3]
    t = viewmats[:, :3, 3]  # [C,3]
    p = torch.einsum("cij,nj->cni", W, means) + t[:, None, :]  # [C,N,3]
    x, y, z = p.unbind(-1)
    in_depth = (z >= near_plane) & (z <= far_plane)
    zs = torch.where(in_depth, z, torch.ones_like(z))  # keeps culled pairs finite (and their grads zero)
    cov = gaussians.covariance_from_scales_quats(scales, quats)  # [N,3,3]
    covc = W[:, None] @ cov[None] @ W.transpose(-1, -2)[:, None]  # [C,N,3,3]
    fx, fy = Ks[:, 0, 0, None], Ks[:, 1, 1, None]  # [C,1]
    cx, cy = Ks[:, 0, 2, None], Ks[:, 1, 2, None]
    tan_fovx, tan_fovy = 0.5 * width / fx, 0.5 * height / fy
    lim_xp, lim_xn = (width - cx) / fx + 0.3 * tan_fovx, cx / fx + 0.3 * tan_fovx
    lim_yp, lim_yn = (height - cy) / fy + 0.3 * tan_fovy, cy / fy + 0.3 * tan_fovy
    tx = zs * torch.minimum(torch.maximum(x / zs, -lim_xn), lim_xp)
    ty = zs * torch.minimum(torch.maximum(y / zs, -lim_yn), lim_yp)
    zero = torch.zeros_like(zs)
    J = torch.stack([fx / zs, zero, -fx * tx / zs**2, zero, fy / zs, -fy * ty / zs**2], dim=-1).reshape(
        *zs.shape, 2, 3
    )
    # Pairs whose 2D covariance or its determinant overflow (huge scales) are culled, as in the ext
    # kernel. Their camera covariance is replaced by zeros before use, so that no inf reaches the
    # backward, where 0 * inf would make NaN gradients.
    with torch.no_grad():
        probe = J @ covc @ J.transpose(-1, -2)
        pa, pb, pc = probe[..., 0, 0] + eps2d, probe[..., 0, 1], probe[..., 1, 1] + eps2d
        finite = torch.isfinite(probe).all(-1).all(-1) & torch.isfinite(pa * pc - pb * pb)
    covc = torch.where(finite[..., None, None], covc, torch.zeros_like(covc))
    cov2 = J @ covc @ J.transpose(-1, -2)  # [C,N,2,2]
    a0, b0, c0 = cov2[..., 0, 0], cov2[..., 0, 1], cov2[..., 1, 1]
    det_orig = a0 * c0 - b0 * b0
    a, c = a0 + eps2d, c0 + eps2d
    det = a * c - b0 * b0
    ok_det = (det > 0) & finite
    dets = torch.where(ok_det, det, torch.ones_like(det))
    ratio = det_orig / dets
    pos = ratio > 0
    comp = torch.where(
        pos, torch.sqrt(torch.where(pos, ratio, torch.ones_like(ratio))), torch.zeros_like(ratio)
    )
    conics = torch.stack([c / dets, -b0 / dets, a / dets], dim=-1)
    bm = 0.5 * (a + c)
    v1 = bm + torch.sqrt(torch.clamp_min(bm * bm - dets, 0.01))
    radius = torch.ceil(3.0 * torch.sqrt(v1.detach())).clamp_max(RADIUS_MAX)  # int32-safe, as in ext
    u = fx * x / zs + cx
    v = fy * y / zs + cy
    means2d = torch.stack([u, v], dim=-1)
    valid = in_depth & ok_det & (radius > 0)
    ud, vd = u.detach(), v.detach()
    valid &= (ud + radius > 0) & (ud - radius < width) & (vd + radius > 0) & (vd - radius < height)
    radii = torch.where(valid, radius, torch.zeros_like(radius)).to(torch.int32)
    vm = valid[..., None]
    return (
        radii,
        torch.where(vm, means2d, torch.zeros_like(means2d)),
        torch.where(valid, z, torch.zeros_like(z)),
        torch.where(vm, conics, torch.zeros_like(conics)),
        torch.where(valid, comp, torch.zeros_like(comp)),
    )


def view_dirs(means: torch.Tensor, viewmats: torch.Tensor) -> torch.Tensor:
    """SH view directions [C,N,3]: each mean [N,3] minus each camera centre (-R^T t of the world-to-camera
    viewmats [C,4,4]), computed as means + t^T R (one matmul, broadcast over the means; few autograd nodes,
    which a tiny call pays for in both directions)."""
    top = viewmats.narrow(1, 0, 3)  # [C,3,4]: R | t
    return means + top.narrow(2, 3, 1).mT @ top.narrow(2, 0, 3)  # [N,3] + [C,1,3] -> [C,N,3]


def sh_to_color(
    coeffs: torch.Tensor, dirs: torch.Tensor, degree: int, coeffs_rest: torch.Tensor | None = None
) -> torch.Tensor:
    """Colours [C,N,3] of SH coefficients [N,K,3] seen along dirs [C,N,3] (camera to mean); with
    coeffs_rest [N,K-1,3], coeffs is the DC row [N,1,3] and the coefficients are the two along dim 1."""
    if coeffs_rest is not None:
        coeffs = torch.cat([coeffs, coeffs_rest], dim=1)
    return gaussians.sh_to_color(coeffs[None].expand(dirs.shape[0], *coeffs.shape), dirs, degree)


def sh_colors_from_cameras(
    coeffs: torch.Tensor,
    means: torch.Tensor,
    viewmats: torch.Tensor,
    degree: int,
    coeffs_rest: torch.Tensor | None = None,
) -> torch.Tensor:
    """Colours [C,N,3] of SH coefficients [N,K,3] (or the DC row [N,1,3] and coeffs_rest [N,K-1,3]) at
    means [N,3] seen from the cameras viewmats [C,4,4]."""
    return sh_to_color(coeffs, view_dirs(means, viewmats), degree, coeffs_rest)


def tile_bounds(
    means2d: torch.Tensor, radii: torch.Tensor, tile_size: int, tile_width: int, tile_height: int
) -> torch.Tensor:
    """Tile bounding boxes [C,N,4] (x0, y0, x1, y1; half-open) of each Gaussian's 3-sigma square."""
    r = radii.to(means2d.dtype)
    m = means2d.detach()
    x0 = torch.floor((m[..., 0] - r) / tile_size).clamp(0, tile_width)
    y0 = torch.floor((m[..., 1] - r) / tile_size).clamp(0, tile_height)
    x1 = torch.ceil((m[..., 0] + r) / tile_size).clamp(0, tile_width)
    y1 = torch.ceil((m[..., 1] + r) / tile_size).clamp(0, tile_height)
    box = torch.stack([x0, y0, x1, y1], dim=-1).to(torch.int64)
    return torch.where((radii > 0)[..., None], box, torch.zeros_like(box))


def log_upper(x: torch.Tensor) -> torch.Tensor:
    """An upper bound of ln(x) for float64 x >= 1 (csrc/include/gsw/tile_cover.h): x = 2^e m, m in [1, 2),
    ln(1 + t) <= t - t^2/2 + t^3/3 with t = m - 1; at most 0.14 above ln(x)."""
    mant, exp = torch.frexp(x)  # x = mant 2^exp, mant in [0.5, 1): m = 2 mant exactly
    t = 2.0 * mant - 1.0
    return (exp - 1).to(torch.float64) * 0.6931471805599453 + t * (1.0 + t * (-0.5 + t * (1.0 / 3.0)))


def _support_ellipse(m: torch.Tensor, co: torch.Tensor, opacities: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """A Gaussian's alpha support as the cuts take it, float64 means [...,2], conics [...,3] and
    opacities [...]: the ellipse sigma <= smax, smax = 1.02 log_upper(255 o) + 0.02 (the rasterizer's
    relaxed threshold, csrc/include/gsw/blend.h, at an upper bound of the log). Returns faint (alpha
    never reaches 1/255), usable (not faint, a positive-definite conic, a finite mean), cut_x (usable
    and a c <= 10^4 det: culled in x too), and sa, sc, sd (a, c, det; 1 where not usable) and smax. The
    reference of support_ellipse (csrc/include/gsw/tile_cover.h)."""
    mx, my, a, b, c = m[..., 0], m[..., 1], co[..., 0], co[..., 1], co[..., 2]
    x = opacities * 255.0
    faint = ~(x >= 1.0)
    det = a * c - b * b
    usable = ~faint & (a > 0) & (c > 0) & (det > 0) & torch.isfinite(det) & torch.isfinite(mx) & torch.isfinite(my)
    cut_x = usable & (a * c <= 1e4 * det)
    one = torch.ones_like(det)
    sa, sc, sd = torch.where(usable, a, one), torch.where(usable, c, one), torch.where(usable, det, one)
    smax = log_upper(torch.where(usable, x, one)) * 1.02 + 0.02
    return faint, usable, cut_x, sa, sc, sd, smax


def _entry_inputs(
    gid: torch.Tensor, means2d: torch.Tensor, conics: torch.Tensor, opacities: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each intersection's Gaussian's mean [M,2], conic [M,3] and opacity [M] in float64 (``gid`` [M]:
    c*N + n into means2d [C,N,2], conics [C,N,3], opacities [C,N])."""
    f64 = torch.float64
    return (
        means2d.detach().to(f64).reshape(-1, 2)[gid],
        conics.detach().to(f64).reshape(-1, 3)[gid],
        opacities.detach().to(f64).reshape(-1)[gid],
    )


def _tile_corner(
    tile: torch.Tensor, tile_size: int, tile_width: int, tile_height: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The pixel corner (x, y) of each global tile id in ``tile`` [M], float64 [M] each."""
    local = tile % (tile_width * tile_height)
    tx = (local % tile_width).to(torch.float64)
    ty = torch.div(local, tile_width, rounding_mode="floor").to(torch.float64)
    return tx * tile_size, ty * tile_size


def support_tile_bounds(
    box: torch.Tensor, means2d: torch.Tensor, conics: torch.Tensor, opacities: torch.Tensor, tile_size: int
) -> torch.Tensor:
    """Tile boxes [...,4] (from :func:`tile_bounds`) cut to the bounding box of each Gaussian's alpha
    support (means2d [...,2], conics [...,3], opacities [...]): sigma <= 1.02 log_upper(255 o) + 0.02,
    the rasterizer's relaxed threshold (csrc/include/gsw/blend.h) at an upper bound of the log, so no
    tile with a contributing pixel is cut. Half-extents sqrt(2 smax c / det) in x and sqrt(2 smax a /
    det) in y; tile t holds pixel centres [t ts + 0.5, t ts + ts - 0.5]. Opacities below 1/255 give an
    empty box; conics that are not positive definite keep the box; very elongated ones (a c > 10^4
    det) are cut in y only. The reference of csrc/include/gsw/tile_cover.h."""
    m, co = means2d.detach().to(torch.float64), conics.detach().to(torch.float64)
    mx, my = m[..., 0], m[..., 1]
    faint, usable, cut_x, sa, sc, sd, smax = _support_ellipse(m, co, opacities.detach().to(torch.float64))
    ts = float(tile_size)

    def cut(centre: torch.Tensor, ext: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> tuple:
        f0 = torch.ceil((centre - ext + 0.5) / ts - 1.0)
        f1 = torch.floor((centre + ext - 0.5) / ts) + 1.0
        lo2 = torch.maximum(lo.to(torch.float64), f0).clamp(max=hi.to(torch.float64))
        hi2 = torch.minimum(hi.to(torch.float64), f1).clamp(min=lo2)
        return lo2.to(torch.int64), hi2.to(torch.int64)

    y0, y1 = cut(torch.where(usable, my, 0.0), torch.sqrt(2.0 * smax * sa / sd), box[..., 1], box[..., 3])
    x0, x1 = cut(torch.where(usable, mx, 0.0), torch.sqrt(2.0 * smax * sc / sd), box[..., 0], box[..., 2])
    # very elongated ones are cut in y only, as the rasterizer culls them by rows only
    x0, x1 = torch.where(cut_x, x0, box[..., 0]), torch.where(cut_x, x1, box[..., 2])
    out = torch.stack([x0, y0, x1, y1], dim=-1)
    out = torch.where(usable[..., None], out, box)
    empty = faint | (out[..., 0] >= out[..., 2]) | (out[..., 1] >= out[..., 3])
    return torch.where(empty[..., None], torch.zeros_like(out), out)


# The bound of csrc/include/gsw/tile_saturation.h: alpha bounds scaled by SATURATION_MARGIN, lists ended
# once every quarter's transmittance bound is below SATURATION_T, conics with a c > SATURATION_ROUNDNESS
# det left out.
SATURATION_MARGIN = 0.99
SATURATION_T = 0.5e-4
SATURATION_ROUNDNESS = 100.0


def exp_lower(s: torch.Tensor) -> torch.Tensor:
    """A lower bound of exp(-s) for s >= 0 (csrc/include/gsw/tile_saturation.h): p(s/4)^4 with
    p(x) = 1 - x + x^2/2 - x^3/6, zero past s = 6."""
    x = 0.25 * s
    p = 1.0 - x * (1.0 - x * (0.5 - x * (1.0 / 6.0)))
    return torch.where(x <= 1.5, p**4, torch.zeros_like(p))


def saturation_keep(
    tile: torch.Tensor,
    gid: torch.Tensor,
    means2d: torch.Tensor,
    conics: torch.Tensor,
    opacities: torch.Tensor,
    tile_size: int,
    tile_width: int,
    tile_height: int,
    margin: float = SATURATION_MARGIN,
) -> torch.Tensor:
    """Which intersections a tile's list keeps when it ends at saturation, in float64: bool [M] for
    intersections sorted by (tile, depth) with global tile ids ``tile`` [M] and Gaussian indices ``gid``
    [M] (c*N + n into means2d [C,N,2], conics [C,N,3], opacities [C,N]).

    Each quarter of a tile (pixels [0, h) or [ts - h, ts) on each axis, h = ceil(ts / 2)) bounds every
    pixel's transmittance by prod (1 - a_k): a_k = margin min(0.99, o exp_lower(s)), s the largest
    sigma at the quarter's four corner pixel centres (its largest over the quarter: sigma is convex),
    counted where a_k >= 1/255 and the conic is positive definite with a c <= SATURATION_ROUNDNESS det.
    A list keeps its entries up to the first after which all four bounds are below SATURATION_T: past
    it, the rasterizer reads nothing (every pixel stops before taking its transmittance to 1e-4). The
    reference of csrc/include/gsw/tile_saturation.h; ``margin`` (the kernel's 0.99) lets tests bracket
    its float32 rounding."""
    f64 = torch.float64
    m, co, o = _entry_inputs(gid, means2d, conics, opacities)
    a, b, c = co[:, 0], co[:, 1], co[:, 2]
    det = a * c - b * b
    ok = (a > 0) & (c > 0) & (det > 0) & (a * c <= SATURATION_ROUNDNESS * det)
    ok &= torch.isfinite(m).all(1) & (o * 0.99 * 255.0 >= 1.0) & (o <= 1.0)
    px, py = _tile_corner(tile, tile_size, tile_width, tile_height)
    h = (tile_size + 1) // 2
    edges = torch.tensor([0.5, h - 0.5, tile_size - h + 0.5, tile_size - 0.5], dtype=f64, device=tile.device)
    dx = m[:, 0, None] - (px[:, None] + edges)  # [M, 4] over x edges
    dy = m[:, 1, None] - (py[:, None] + edges)  # [M, 4] over y edges
    sig = 0.5 * (a[:, None, None] * dx[:, None, :] ** 2 + c[:, None, None] * dy[:, :, None] ** 2)
    sig = sig + b[:, None, None] * dx[:, None, :] * dy[:, :, None]  # [M, 4 (y), 4 (x)]
    quarters = sig.reshape(-1, 2, 2, 2, 2).amax(dim=(2, 4)).reshape(-1, 4)  # [M, (qy, qx)]
    alpha = margin * (o[:, None] * exp_lower(quarters)).clamp(max=0.99)
    counted = ok[:, None] & (alpha >= 1.0 / 255.0)
    logt = torch.where(counted, torch.log1p(-torch.where(counted, alpha, 0.0)), 0.0)
    cum = torch.cumsum(logt, 0)
    first = torch.searchsorted(tile, tile, side="left")  # each entry's tile start
    before = torch.where((first > 0)[:, None], cum[(first - 1).clamp_min(0)], 0.0)
    prior = cum - logt - before  # the bounds' logs before each entry, within its tile
    return ~(prior < math.log(SATURATION_T)).all(1)


def row_support_reach(
    tile: torch.Tensor,
    gid: torch.Tensor,
    means2d: torch.Tensor,
    conics: torch.Tensor,
    opacities: torch.Tensor,
    tile_size: int,
    tile_width: int,
    tile_height: int,
    margin: float = 0.0,
) -> torch.Tensor:
    """Whether each intersection's Gaussian reaches its tile on the tile's own rows, in float64: bool [M]
    for global tile ids ``tile`` [M] and Gaussian indices ``gid`` [M] (c*N + n into means2d [C,N,2],
    conics [C,N,3], opacities [C,N]).

    :func:`support_tile_bounds`'s ellipse (sigma <= smax), over the tile's rows of pixel centres y in
    [ty ts + 0.5, ty ts + ts - 0.5]: its x extent there (the left edge's minimum and the right edge's
    maximum, at the ellipse's leftmost and rightmost points' rows clamped to the tile's rows), widened by
    ``margin`` pixels, against the tile's pixel centres in x. True where the box is not cut in x (a conic
    that is not positive definite, or a c > 10^4 det). The reference of cut_row_to_support
    (csrc/include/gsw/tile_cover.h), which the CPU lists cut at saturation take too, with a margin of
    0.01 pixels."""
    m, co, o = _entry_inputs(gid, means2d, conics, opacities)
    mx, my = m[:, 0], m[:, 1]
    _, _, on, sa, sc, sd, smax = _support_ellipse(m, co, o)
    sb = torch.where(on, co[:, 1], 0.0)
    lean = sb / sc * torch.sqrt(2.0 * smax * sc / sd)  # the leftmost point's row offset
    ts = float(tile_size)
    px, py = _tile_corner(tile, tile_size, tile_width, tile_height)
    y0 = py + 0.5 - my
    y1 = y0 + ts - 1.0

    def edge(dy: torch.Tensor, sign: float) -> torch.Tensor:
        w = (2.0 * sa * smax - sd * dy * dy).clamp_min(0.0)
        return mx + (-sb * dy + sign * torch.sqrt(w)) / sa

    xl = edge(torch.minimum(torch.maximum(lean, y0), y1), -1.0)
    xr = edge(torch.minimum(torch.maximum(-lean, y0), y1), 1.0)
    reach = (xl - margin <= px + ts - 0.5) & (xr + margin >= px + 0.5)
    return ~on | reach


@torch.library.custom_op("gsworkbench_torch::repeat_indices", mutates_args=())
def repeat_indices(counts: torch.Tensor) -> torch.Tensor:
    """Each index i of counts [n] repeated counts[i] times: ``torch.repeat_interleave(counts)``, [sum(counts)].

    An op of its own so that its fake kernel can declare the data-dependent length as an unbacked size
    (:func:`gsworkbench.core.compile.data_dependent_size`): torch's ``repeat_interleave`` breaks the graph there
    unless ``torch._dynamo.config.capture_dynamic_output_shape_ops`` is set. ``isect_tiles`` calls it
    while torch.compile traces; eager calls skip its dispatch (~10 us)."""
    return torch.repeat_interleave(counts)


@repeat_indices.register_fake
def _repeat_indices_fake(counts: torch.Tensor) -> torch.Tensor:
    return counts.new_empty(data_dependent_size(counts))


def isect_tiles(
    means2d: torch.Tensor,
    radii: torch.Tensor,
    depths: torch.Tensor,
    tile_size: int,
    tile_width: int,
    tile_height: int,
    conics: torch.Tensor | None = None,
    opacities: torch.Tensor | None = None,
    cut_saturated: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Tile intersections sorted by (camera, tile, depth), vectorized (no loop over Gaussians).

    Each Gaussian meets the tiles of its 3-sigma box; given conics [C,N,3] and opacities [C,N] (both or
    neither), the box cut to its alpha >= 1/255 support (:func:`support_tile_bounds`): the rasterizer
    would skip the Gaussian at every pixel of the tiles cut, so renders and gradients are unchanged.
    ``cut_saturated`` (with conics and opacities): each tile's list ends where all its pixels have surely
    stopped compositing (:func:`saturation_keep`), and keeps only the Gaussians whose support reaches
    the tile on its own rows (:func:`row_support_reach`), which leaves renders and gradients unchanged
    too; tiles_per_gauss still counts the whole boxes.

    Returns tiles_per_gauss [C,N] int32, isect_ids [M] int64 (global tile id << 32 | float32 depth
    bits), flatten_ids [M] int32 (index c*N + n) and tile_offsets [C,tile_height,tile_width] int32
    (start of each tile's run in the sorted list).
    """
    if (conics is None) != (opacities is None):
        raise ValueError("isect_tiles: pass conics and opacities together, or neither")
    if cut_saturated and conics is None:
        raise ValueError("isect_tiles: cut_saturated needs conics and opacities")
    C, N = radii.shape
    ntiles = tile_width * tile_height
    box = tile_bounds(means2d, radii, tile_size, tile_width, tile_height)
    if conics is not None and opacities is not None:
        box = support_tile_bounds(box, means2d, conics, opacities, tile_size)
    box = box.reshape(C * N, 4)
    bw = box[:, 2] - box[:, 0]
    bh = box[:, 3] - box[:, 1]
    counts = bw * bh
    dev = radii.device
    # under torch.compile an op whose fake kernel declares the data-dependent length M (no config flag)
    gid = repeat_indices(counts) if torch.compiler.is_compiling() else torch.repeat_interleave(counts)
    first = torch.cumsum(counts, 0) - counts
    local = torch.arange(gid.numel(), device=dev) - first[gid]
    tx = box[gid, 0] + local % bw[gid].clamp_min(1)
    ty = box[gid, 1] + local // bw[gid].clamp_min(1)
    tile = (gid // N) * ntiles + ty * tile_width + tx
    dbits = depths.detach().to(torch.float32).reshape(-1)[gid].view(torch.int32).to(torch.int64)
    # sort by (tile, depth, gid): stable sorts from the last key to the first
    order = torch.argsort(dbits, stable=True)
    order = order[torch.argsort(tile[order], stable=True)]
    tile, gid, dbits = tile[order], gid[order], dbits[order]
    if cut_saturated and conics is not None and opacities is not None:
        grid = (tile_size, tile_width, tile_height)
        keep = saturation_keep(tile, gid, means2d, conics, opacities, *grid)
        keep &= row_support_reach(tile, gid, means2d, conics, opacities, *grid)
        tile, gid, dbits = tile[keep], gid[keep], dbits[keep]
    isect_ids = (tile << 32) | dbits
    tile_offsets = torch.searchsorted(tile, torch.arange(C * ntiles, device=dev)).to(torch.int32)
    return (
        counts.reshape(C, N).to(torch.int32),
        isect_ids,
        gid.to(torch.int32),
        tile_offsets.reshape(C, tile_height, tile_width),
    )


def _absgrad_hooks(means2d: torch.Tensor, ids: torch.Tensor, dx: torch.Tensor, dy: torch.Tensor) -> None:
    """Hooks adding the per-pixel |dL/dx|, |dL/dy| of intersections [M,P] to ``means2d.absgrad``."""
    C, N = means2d.shape[:2]

    def add(axis: int) -> object:
        def hook(grad: torch.Tensor) -> None:
            if getattr(means2d, "absgrad", None) is None:
                means2d.absgrad = means2d.new_zeros(C, N, 2)
            means2d.absgrad.view(C * N, 2)[:, axis].index_add_(0, ids, grad.abs().sum(1))

        return hook

    dx.register_hook(add(0))
    dy.register_hook(add(1))


# Intersections per chunk of tiles in eager mode (bounds the [M,P] temporaries; a tile is never split).
CHUNK_ISECTS = 1 << 15


def _tile_chunks(tile_offsets: torch.Tensor, M: int) -> list[tuple[int, int, int, int]]:
    """Runs of whole tiles [t0, t1), intersections [s, e), with at most CHUNK_ISECTS intersections each
    (or one tile). Under torch.compile one run holds every tile: splitting would read the offsets, a
    data-dependent Python decision (a graph break)."""
    T = tile_offsets.numel()
    if torch.compiler.is_compiling():
        return [(0, T, 0, M)]
    offs = tile_offsets.reshape(-1).tolist() + [M]
    chunks, t0 = [], 0
    while t0 < T:
        t1 = t0 + 1
        while t1 < T and offs[t1 + 1] - offs[t0] <= CHUNK_ISECTS:
            t1 += 1
        chunks.append((t0, t1, offs[t0], offs[t1]))
        t0 = t1
    return chunks


class _CumsumRows(torch.autograd.Function):
    """``x.cumsum(0)`` with its backward written out (reversed cumsum). torch's own backward asks
    whether the size is 1, which torch.compile cannot answer for a data-dependent number of rows."""

    @staticmethod
    def forward(x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        return x.cumsum(0)

    @staticmethod
    def setup_context(ctx: object, inputs: tuple, output: torch.Tensor) -> None:  # noqa: D102
        pass

    @staticmethod
    def backward(ctx: object, grad: torch.Tensor) -> torch.Tensor:  # noqa: D102
        return grad.flip(0).cumsum(0).flip(0)


def _segment_cumsum(x: torch.Tensor, start: torch.Tensor, inclusive: bool) -> torch.Tensor:
    """Cumulative sums of x [M,P] along dim 0 that restart at each run; start [M]: first row of each
    row's run."""
    cs = _CumsumRows.apply(torch.cat([x.new_zeros(1, x.shape[1]), x]))  # cs[i]: sum of the rows before i
    excl = cs[:-1]
    return (cs[1:] if inclusive else excl) - excl[start]


def rasterize_to_pixels(
    means2d: torch.Tensor,
    conics: torch.Tensor,
    colors: torch.Tensor,
    opacities: torch.Tensor,
    width: int,
    height: int,
    tile_size: int,
    tile_offsets: torch.Tensor,
    flatten_ids: torch.Tensor,
    absgrad: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Front-to-back alpha compositing per tile: colours [C,H,W,D] and alphas [C,H,W,1].

    Each pixel blends the depth-sorted Gaussians of its tile: alpha = min(0.99, o exp(-sigma)),
    skipped when sigma < 0 or alpha < 1/255, stopping before transmittance would reach 1e-4.
    With ``absgrad`` (and ``means2d`` requiring grad), the backward sets ``means2d.absgrad`` [C,N,2], the
    sum over pixels of |dL/dmean2d| per component (gsplat's convention).

    Vectorized over intersections x tile pixels [M,P]: the transmittance before each intersection is
    exp of a cumulative sum of log(1 - alpha) restarting at each tile's run (float64 sums), so there
    is no loop over tiles and the function traces whole under torch.compile. Eager mode processes runs
    of tiles of at most CHUNK_ISECTS intersections to bound memory.
    """
    C, N, D = colors.shape
    th, tw = tile_offsets.shape[1:]
    M = flatten_ids.shape[0]
    dev, dtype = means2d.device, means2d.dtype
    flat_m, flat_c = means2d.reshape(C * N, 2), conics.reshape(C * N, 3)
    flat_col, flat_o = colors.reshape(C * N, D), opacities.reshape(C * N)
    all_offs = tile_offsets.reshape(-1).to(torch.int64)
    ar = torch.arange(tile_size, device=dev)
    ly, lx = torch.meshgrid(ar, ar, indexing="ij")
    lx, ly = lx.reshape(-1).to(dtype) + 0.5, ly.reshape(-1).to(dtype) + 0.5  # pixel centres in a tile [P]
    P = tile_size * tile_size
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in (means2d, conics, colors, opacities))
    chunks = _tile_chunks(tile_offsets, M)
    if not torch.compiler.is_compiling():
        # autograd keeps every chunk's [m,P] tensors until the backward; without it, one chunk's at a time
        check_torch_pairs(M if grad else max((e - s for _, _, s, e in chunks), default=0), P, dev, grad)
    log_t_min = math.log(TRANSMITTANCE_MIN)
    tiles_c, tiles_a = [], []
    for t0, t1, s, e in chunks:
        ids = flatten_ids[s:e].to(torch.int64)
        offs = all_offs[t0:t1] - s
        tile = torch.searchsorted(offs, torch.arange(ids.shape[0], device=dev), right=True) - 1  # [m]
        start = offs[tile]
        local = (t0 + tile) % (th * tw)
        px = (local % tw * tile_size).to(dtype)[:, None] + lx  # [m,P]
        py = (local // tw * tile_size).to(dtype)[:, None] + ly
        m, cn, o = flat_m[ids], flat_c[ids], flat_o[ids]
        dx = m[:, 0:1] - px
        dy = m[:, 1:2] - py
        if absgrad and dx.requires_grad:
            _absgrad_hooks(means2d, ids, dx, dy)
        sigma = 0.5 * (cn[:, 0:1] * dx * dx + cn[:, 2:3] * dy * dy) + cn[:, 1:2] * dx * dy
        alpha = torch.clamp_max(o[:, None] * torch.exp(-sigma.clamp_min(0)), ALPHA_MAX)
        alpha = torch.where((sigma >= 0) & (alpha >= ALPHA_MIN), alpha, torch.zeros_like(alpha))
        log_t = torch.log1p(-alpha.detach().double())
        keep = _segment_cumsum(log_t, start, inclusive=True) > log_t_min  # a prefix of each run, per pixel
        alpha = alpha * keep
        log_t = torch.log1p(-alpha.double())
        w = alpha * torch.exp(_segment_cumsum(log_t, start, inclusive=False)).to(dtype)  # alpha T_before
        nt = t1 - t0
        tiles_c.append(means2d.new_zeros(nt, P, D).index_add(0, tile, w[:, :, None] * flat_col[ids][:, None, :]))
        log_final = log_t.new_zeros(nt, P).index_add(0, tile, log_t)
        tiles_a.append(1 - torch.exp(log_final).to(dtype))
    img_c = torch.cat(tiles_c).reshape(C, th, tw, tile_size, tile_size, D)
    img_a = torch.cat(tiles_a).reshape(C, th, tw, tile_size, tile_size, 1)
    img_c = img_c.permute(0, 1, 3, 2, 4, 5).reshape(C, th * tile_size, tw * tile_size, D)[:, :height, :width]
    img_a = img_a.permute(0, 1, 3, 2, 4, 5).reshape(C, th * tile_size, tw * tile_size, 1)[:, :height, :width]
    return img_c, img_a


def composite_background(colors: torch.Tensor, alphas: torch.Tensor, backgrounds: torch.Tensor) -> torch.Tensor:
    """colors [C,H,W,D] with (1 - alphas) [C,H,W,1] x backgrounds [C,nc] added to the first nc <= D
    channels (the reference of the ext op ``splat_composite_background``)."""
    nc = backgrounds.shape[-1]
    bg = (1 - alphas) * backgrounds[:, None, None, :]
    if nc == colors.shape[-1]:
        return colors + bg
    return torch.cat([colors[..., :nc] + bg, colors[..., nc:]], dim=-1)
