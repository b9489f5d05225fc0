// Per-pixel alpha-blending math of the tile rasterizer (gsplat conventions), shared by CPU and CUDA.
//
// For a pixel centre p and a projected Gaussian (mean2d m, conic (a, b, c), opacity o):
//   d = m - p, sigma = 0.5 (a dx^2 + c dy^2) + b dx dy, alpha = min(0.99, o exp(-sigma)).
// A Gaussian is skipped when sigma < 0 or alpha < 1/255. Front to back, colour += c alpha T and
// T *= 1 - alpha; compositing stops before the Gaussian that would take T to 1e-4 or below.
#pragma once

#include "gsw/common.h"

#include <cmath>

namespace gsw {
namespace splat {

using std::log;
using std::sqrt;

// Double, so that T(k) is the exact threshold for double data too (a float constant widened to double
// sits 6e-8 above 1/255 and moves alphas that close to it to the other side of the cut).
constexpr double kAlphaMax = 0.99;
constexpr double kAlphaMin = 1.0 / 255.0;
constexpr double kTransmittanceMin = 1e-4;

template <typename T>
GSW_HD T blend_sigma(T dx, T dy, T ca, T cb, T cc) {
  return T(0.5) * (ca * dx * dx + cc * dy * dy) + cb * dx * dy;
}

// Gradients of one Gaussian's alpha at one pixel, given dL/dalpha (zero when alpha was clamped).
// Adds to v_mean2d[2], v_conic[3] and v_opacity.
template <typename T>
GSW_HD void blend_alpha_vjp(T dx, T dy, T ca, T cb, T cc, T opacity, T vis, T v_alpha, T& vmx, T& vmy, T& vca,
                            T& vcb, T& vcc, T& vop) {
  // alpha = o vis, vis = exp(-sigma)
  const T v_sigma = -opacity * vis * v_alpha;
  vca += T(0.5) * v_sigma * dx * dx;
  vcb += v_sigma * dx * dy;
  vcc += T(0.5) * v_sigma * dy * dy;
  vmx += v_sigma * (ca * dx + cb * dy);
  vmy += v_sigma * (cb * dx + cc * dy);
  vop += vis * v_alpha;
}

// ---- Support of alpha >= 1/255 (where a Gaussian can contribute at all) ------------------------------
// alpha = o exp(-sigma) >= 1/255  <=>  sigma <= log(255 o). Kernels use the support to skip pixels a
// Gaussian cannot reach; the per-pixel test above still decides, so the support only has to contain
// every contributing pixel. Its threshold is relaxed by 2% + 0.02 for that: float rounding of sigma in
// the per-pixel test is far below it for the Gaussians the row-interval test is used on (see
// alpha_row_interval_exact).

// Relaxed sigma threshold of the support; negative when alpha never reaches 1/255.
template <typename T>
GSW_HD T alpha_sigma_max(T opacity) {
  return opacity * T(255) >= T(1) ? log(T(255) * opacity) * T(1.02) + T(0.02) : T(-1);
}

// Half-height of the support: rows with |dy| > extent cannot be reached at any x (the minimum over dx
// of sigma at offset dy is dy^2 det / (2 a) = dy^2 / (2 cov_yy)). Negative: empty support; infinite:
// a degenerate conic (no culling).
template <typename T>
GSW_HD T alpha_row_extent(T ca, T cb, T cc, T smax) {
  const T det = ca * cc - cb * cb;
  if (!(smax >= T(0))) return T(-1);
  if (!(det > T(0)) || !(ca > T(0))) return T(1) / T(0);
  return sqrt(T(2) * smax * ca / det);
}

// True when the row interval below is numerically safe for this conic: the per-pixel sigma suffers
// cancellation of order a c / det, so very elongated Gaussians are only culled by rows.
template <typename T>
GSW_HD bool alpha_row_interval_exact(T ca, T cb, T cc) {
  const T det = ca * cc - cb * cb;
  return ca > T(0) && det > T(0) && ca * cc <= T(1e4) * det;
}

// The support on the row at offset dy = mean_y - y: pixel x within offset +- half of mean_x, where
// sigma(dx, dy) = 0.5 a dx^2 + b dx dy + 0.5 c dy^2 <= smax (dx = mean_x - x). Returns the
// discriminant: negative when the row misses the support. Branch-free (vectorizes); needs a > 0.
template <typename T>
GSW_HD T alpha_row_interval(T dy, T ca, T cb, T cc, T smax, T& offset, T& half) {
  const T bdy = cb * dy;
  const T disc = bdy * bdy - ca * (cc * dy * dy - T(2) * smax);
  offset = bdy / ca;
  half = sqrt(disc > T(0) ? disc : T(0)) / ca;
  return disc;
}

}  // namespace splat
}  // namespace gsw
