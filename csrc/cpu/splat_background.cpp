// CPU kernel of the rasterizer's background compositing (torch reference:
// gsworkbench/splat/_torch_impl.py composite_background): out = colours + (1 - alpha) background on the
// first nc channels, in one pass over the image instead of the five tensor ops (and their backward's
// four) it replaces. The backward returns dL/dalpha and dL/dbackground; dL/dcolours is dL/dout itself.
// Per-operator ATen headers only: <ATen/ATen.h> (every operator, most of the compile time) then fails.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

namespace gsw {
namespace splat {
namespace cpu {
namespace {

using at::Tensor;

struct BgDims {
  int64_t C, P, D, nc;  // cameras, pixels per camera, channels, background channels
};

BgDims check_background(const Tensor& colors, const Tensor& alphas, const Tensor& bg, const char* op) {
  TORCH_CHECK(colors.dim() == 4 && alphas.dim() == 4 && alphas.size(3) == 1 &&
                  colors.sizes().slice(0, 3) == alphas.sizes().slice(0, 3),
              op, ": colors must be [C,H,W,D] and alphas [C,H,W,1], got ", colors.sizes(), " and ", alphas.sizes());
  TORCH_CHECK(bg.dim() == 2 && bg.size(0) == colors.size(0) && bg.size(1) <= colors.size(3), op,
              ": backgrounds must be [C,nc] with nc <= D, got ", bg.sizes(), " for colors ", colors.sizes());
  TORCH_CHECK(colors.scalar_type() == alphas.scalar_type() && colors.scalar_type() == bg.scalar_type() &&
                  (colors.scalar_type() == at::kFloat || colors.scalar_type() == at::kDouble),
              op, ": colors, alphas and backgrounds must share one float dtype");
  TORCH_CHECK(colors.device().is_cpu() && alphas.device().is_cpu() && bg.device().is_cpu(), op,
              ": CPU tensors expected");
  return {colors.size(0), colors.size(1) * colors.size(2), colors.size(3), bg.size(1)};
}

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

// v_alpha[p] = -sum_ch v[p][ch] bg[cam][ch]; with v_bg (else nullptr), v_bg[cam][ch] = sum over the
// camera's pixels of v[p][ch] (1 - alpha[p]), summed in double per task of one camera's pixels.
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

Tensor composite_background_cpu(const Tensor& colors_, const Tensor& alphas_, const Tensor& bg_) {
  const BgDims d = check_background(colors_, alphas_, bg_, "splat_composite_background");
  const auto colors = colors_.contiguous(), alphas = alphas_.contiguous(), bg = bg_.contiguous();
  auto out = at::empty_like(colors);
  AT_DISPATCH_FLOATING_TYPES(colors.scalar_type(), "splat_composite_background_cpu", [&] {
    using T = scalar_t;
    composite_kernel<T>(d, colors.data_ptr<T>(), alphas.data_ptr<T>(), bg.data_ptr<T>(), out.data_ptr<T>());
  });
  return out;
}

std::tuple<Tensor, Tensor> composite_background_backward_cpu(const Tensor& v_out_, const Tensor& alphas_,
                                                             const Tensor& bg_, bool bg_grad) {
  const BgDims d = check_background(v_out_, alphas_, bg_, "splat_composite_background_backward");
  const auto v = v_out_.contiguous(), alphas = alphas_.contiguous(), bg = bg_.contiguous();
  auto v_alpha = at::empty_like(alphas);
  auto v_bg = bg_grad ? at::empty_like(bg) : at::empty({0}, bg.options());
  AT_DISPATCH_FLOATING_TYPES(v.scalar_type(), "splat_composite_background_backward_cpu", [&] {
    using T = scalar_t;
    composite_backward_kernel<T>(d, v.data_ptr<T>(), alphas.data_ptr<T>(), bg.data_ptr<T>(), v_alpha.data_ptr<T>(),
                                 bg_grad ? v_bg.data_ptr<T>() : nullptr);
  });
  return {v_alpha, v_bg};
}

}  // namespace
}  // namespace cpu
}  // namespace splat
}  // namespace gsw

TORCH_LIBRARY_IMPL(gsworkbench, CPU, m) {
  m.impl("splat_composite_background", &gsw::splat::cpu::composite_background_cpu);
  m.impl("splat_composite_background_backward", &gsw::splat::cpu::composite_background_backward_cpu);
}
