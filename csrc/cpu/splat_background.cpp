// CPU kernel of the rasterizer's background compositing (torch reference:
// gsworkbench/splat/_torch_impl.py composite_background): out = colours + (1 - alpha) background on the
// first nc channels, in one pass over the image instead of the five tensor ops (and their backward's
// four) it replaces. The backward returns dL/dalpha and dL/dbackground; dL/dcolours is dL/dout itself.
// Bound to the ops by splat_cpu.cpp.
#include "gsw/aten_ops.h"  // first: before any ATen header

#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "splat.h"

namespace gsw {
namespace splat {
namespace cpu {
namespace {

constexpr int64_t kGrain = 1 << 14;  // pixels per task

// RGB over an RGB background (the trainer's case), with the channel count known to the compiler so the
// loop vectorizes.
template <typename T>
void composite_rgb(const T* col, const T* alpha, const T* bc, int64_t b, int64_t e, T* out) {
  const T b0 = bc[0], b1 = bc[1], b2 = bc[2];
#pragma omp simd
  for (int64_t p = b; p < e; ++p) {
    const T t = T(1) - alpha[p];
    out[3 * p] = col[3 * p] + t * b0;
    out[3 * p + 1] = col[3 * p + 1] + t * b1;
    out[3 * p + 2] = col[3 * p + 2] + t * b2;
  }
}

}  // namespace

template <typename T>
void composite_kernel(const BgDims& d, const T* col, const T* alpha, const T* bg, T* out) {
  at::parallel_for(0, d.C * d.P, kGrain, [&](int64_t b, int64_t e) {
    if (d.D == 3 && d.nc == 3) {
      for (int64_t p = b; p < e;) {  // runs of one camera's pixels
        const int64_t cam = p / d.P, stop = std::min(e, (cam + 1) * d.P);
        composite_rgb(col, alpha, bg + cam * 3, p, stop, out);
        p = stop;
      }
      return;
    }
    for (int64_t p = b; p < e; ++p) {
      const T* bc = bg + (p / d.P) * d.nc;
      const T t = T(1) - alpha[p];
      const T* c = col + p * d.D;
      T* o = out + p * d.D;
      for (int64_t ch = 0; ch < d.nc; ++ch) o[ch] = c[ch] + t * bc[ch];
      for (int64_t ch = d.nc; ch < d.D; ++ch) o[ch] = c[ch];
    }
  });
}

template <typename T>
void composite_backward_kernel(const BgDims& d, const T* v, const T* alpha, const T* bg, T* v_alpha, T* v_bg) {
  const int64_t blocks = (d.P + kGrain - 1) / kGrain, ntasks = d.C * blocks;
  std::vector<double> partial(static_cast<size_t>(ntasks * d.nc), 0.0);
  at::parallel_for(0, ntasks, 1, [&](int64_t tb, int64_t te) {
    for (int64_t task = tb; task < te; ++task) {
      const int64_t cam = task / blocks, b = cam * d.P + (task % blocks) * kGrain;
      const int64_t e = std::min(cam * d.P + d.P, b + kGrain);
      const T* bc = bg + cam * d.nc;
      double* acc = partial.data() + task * d.nc;
      if (d.D == 3 && d.nc == 3 && !v_bg) {  // the trainer's case: channel count known, vectorizes
        const T b0 = bc[0], b1 = bc[1], b2 = bc[2];
#pragma omp simd
        for (int64_t p = b; p < e; ++p) v_alpha[p] = -(v[3 * p] * b0 + v[3 * p + 1] * b1 + v[3 * p + 2] * b2);
        continue;
      }
      for (int64_t p = b; p < e; ++p) {
        const T* vp = v + p * d.D;
        T s = 0;
        for (int64_t ch = 0; ch < d.nc; ++ch) s += vp[ch] * bc[ch];
        v_alpha[p] = -s;
        if (v_bg) {
          const T t = T(1) - alpha[p];
          for (int64_t ch = 0; ch < d.nc; ++ch) acc[ch] += double(vp[ch] * t);
        }
      }
    }
  });
  if (!v_bg) return;
  for (int64_t cam = 0; cam < d.C; ++cam)
    for (int64_t ch = 0; ch < d.nc; ++ch) {
      double s = 0;
      for (int64_t k = 0; k < blocks; ++k) s += partial[(cam * blocks + k) * d.nc + ch];
      v_bg[cam * d.nc + ch] = T(s);
    }
}

template void composite_kernel<float>(const BgDims&, const float*, const float*, const float*, float*);
template void composite_kernel<double>(const BgDims&, const double*, const double*, const double*, double*);
template void composite_backward_kernel<float>(const BgDims&, const float*, const float*, const float*, float*,
                                               float*);
template void composite_backward_kernel<double>(const BgDims&, const double*, const double*, const double*, double*,
                                                double*);

}  // namespace cpu
}  // namespace splat
}  // namespace gsw
