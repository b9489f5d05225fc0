// Per-pixel alpha-blending math of the tile rasterizer (gsplat conventions), shared by CPU and CUDA.
//
// For a pixel centre p and a projected Gaussian (mean2d m, conic (a, b, c), opacity o):
//   d = m - p, sigma = 0.5 (a dx^2 + c dy^2) + b dx dy, alpha = min(0.99, o exp(-sigma)).
// A Gaussian is skipped when sigma < 0 or alpha < 1/255. Front to back, colour += c alpha T and
// T *= 1 - alpha; compositing stops before the Gaussian that would take T to 1e-4 or below.
#pragma once

#include "gsw/common.h"

namespace gsw {
namespace splat {

constexpr float kAlphaMax = 0.99f;
constexpr float kAlphaMin = 1.0f / 255.0f;
constexpr float kTransmittanceMin = 1e-4f;

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

}  // namespace splat
}  // namespace gsw
