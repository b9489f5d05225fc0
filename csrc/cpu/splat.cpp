// CPU kernels of the 3DGS tile rasterizer: projection, SH to colour, tile intersection, rasterization,
// and the analytic backward of each. Per-Gaussian math: gsw/projection.h, gsw/sh.h; per-pixel math:
// gsw/blend.h (shared with the CUDA kernels in csrc/cuda/splat.cu).
//
// Rasterization runs OpenMP over tiles; the pixels of a tile are SIMD lanes (structure-of-arrays
// scratch per thread). The forward keeps each pixel's final transmittance and the index of its last
// contributing intersection, so the backward walks the tile's list back to front and recovers every
// intermediate transmittance by division, without storing the blends.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <omp.h>
#include <torch/library.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <vector>

#include "gsw/blend.h"
#include "gsw/projection.h"
#include "gsw/sh.h"

namespace gsw {
namespace splat {
namespace {

using at::Tensor;

// exp(-s) for s >= 0 (callers pass max(s, 0)): gsw::exp_nonpos, vectorizable in masked loops.
inline float exp_neg(float s) { return exp_nonpos(-s); }
inline double exp_neg(double s) { return exp_nonpos(-s); }

void check_float(const Tensor& x, const char* name, at::ScalarType dtype) {
  TORCH_CHECK(x.scalar_type() == dtype, "splat: ", name, " must have dtype ", dtype, ", got ", x.scalar_type());
  TORCH_CHECK(x.device().is_cpu(), "splat: ", name, " must be on the CPU");
}

template <typename T>
std::vector<Camera<T>> load_cameras(const Tensor& viewmats, const Tensor& Ks) {
  const int64_t C = viewmats.size(0);
  std::vector<Camera<T>> cams(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c)
    cams[c] = load_camera(viewmats.data_ptr<T>() + 16 * c, Ks.data_ptr<T>() + 9 * c);
  return cams;
}

void check_projection_inputs(const Tensor& means, const Tensor& quats, const Tensor& scales, const Tensor& viewmats,
                             const Tensor& Ks) {
  TORCH_CHECK(means.dim() == 2 && means.size(1) == 3, "splat_project: means must be [N,3]");
  const int64_t N = means.size(0);
  TORCH_CHECK(quats.dim() == 2 && quats.size(0) == N && quats.size(1) == 4, "splat_project: quats must be [N,4]");
  TORCH_CHECK(scales.dim() == 2 && scales.size(0) == N && scales.size(1) == 3, "splat_project: scales must be [N,3]");
  TORCH_CHECK(viewmats.dim() == 3 && viewmats.size(1) == 4 && viewmats.size(2) == 4,
              "splat_project: viewmats must be [C,4,4]");
  TORCH_CHECK(Ks.dim() == 3 && Ks.size(0) == viewmats.size(0) && Ks.size(1) == 3 && Ks.size(2) == 3,
              "splat_project: Ks must be [C,3,3]");
  const auto dt = means.scalar_type();
  TORCH_CHECK(dt == at::kFloat || dt == at::kDouble, "splat_project: dtype must be float32 or float64");
  check_float(quats, "quats", dt);
  check_float(scales, "scales", dt);
  check_float(viewmats, "viewmats", dt);
  check_float(Ks, "Ks", dt);
}

// ---- 1. projection ---------------------------------------------------------------------------------

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> project_cpu(const Tensor& means_, const Tensor& quats_,
                                                               const Tensor& scales_, const Tensor& viewmats_,
                                                               const Tensor& Ks_, int64_t width, int64_t height,
                                                               double eps2d, double near_plane, double far_plane) {
  check_projection_inputs(means_, quats_, scales_, viewmats_, Ks_);
  const auto means = means_.contiguous(), quats = quats_.contiguous(), scales = scales_.contiguous();
  const auto viewmats = viewmats_.contiguous(), Ks = Ks_.contiguous();
  const int64_t N = means.size(0), C = viewmats.size(0);
  const auto opt = means.options();
  auto radii = at::empty({C, N}, opt.dtype(at::kInt));
  auto means2d = at::empty({C, N, 2}, opt);
  auto depths = at::empty({C, N}, opt);
  auto conics = at::empty({C, N, 3}, opt);
  auto comps = at::empty({C, N}, opt);
  AT_DISPATCH_FLOATING_TYPES(means.scalar_type(), "splat_project_cpu", [&] {
    using T = scalar_t;
    const auto cams = load_cameras<T>(viewmats, Ks);
    const T* mu = means.data_ptr<T>();
    const T* q = quats.data_ptr<T>();
    const T* s = scales.data_ptr<T>();
    int32_t* r = radii.data_ptr<int32_t>();
    T* m2 = means2d.data_ptr<T>();
    T* d = depths.data_ptr<T>();
    T* co = conics.data_ptr<T>();
    T* cp = comps.data_ptr<T>();
    at::parallel_for(0, C * N, 1024, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t c = i / N, n = i % N;
        Projected<T> o;
        const bool ok = project_forward<T>(mu + 3 * n, q + 4 * n, s + 3 * n, cams[c], width, height, T(eps2d),
                                           T(near_plane), T(far_plane), o);
        store_projected(ok, o, i, r, m2, d, co, cp);
      }
    });
  });
  return {radii, means2d, depths, conics, comps};
}

template <typename T>
void project_backward_kernel(const Tensor& means, const Tensor& quats, const Tensor& scales, const Tensor& viewmats,
                             const Tensor& Ks, int64_t width, int64_t height, double eps2d, double near_plane,
                             double far_plane, const Tensor& radii, const Tensor& v_means2d, const Tensor& v_depths,
                             const Tensor& v_conics, const Tensor& v_comps, Tensor& v_means, Tensor& v_quats,
                             Tensor& v_scales, Tensor& v_viewmats) {
  const int64_t N = means.size(0), C = viewmats.size(0);
  const auto cams = load_cameras<T>(viewmats, Ks);
  const T* mu = means.data_ptr<T>();
  const T* q = quats.data_ptr<T>();
  const T* s = scales.data_ptr<T>();
  const int32_t* r = radii.data_ptr<int32_t>();
  const T* vm2 = v_means2d.data_ptr<T>();
  const T* vd = v_depths.data_ptr<T>();
  const T* vco = v_conics.data_ptr<T>();
  const T* vcp = v_comps.data_ptr<T>();
  T* gm = v_means.data_ptr<T>();
  T* gq = v_quats.data_ptr<T>();
  T* gs = v_scales.data_ptr<T>();
  const int nthreads = omp_get_max_threads();
  std::vector<double> vview(static_cast<size_t>(nthreads) * C * 12, 0.0);
#pragma omp parallel num_threads(nthreads)
  {
    double* my = vview.data() + static_cast<size_t>(omp_get_thread_num()) * C * 12;
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t c = 0; c < C; ++c) {
        const int64_t i = c * N + n;
        if (r[i] <= 0) continue;
        Projected<T> o;
        if (!project_forward<T>(mu + 3 * n, q + 4 * n, s + 3 * n, cams[c], width, height, T(eps2d),
                                T(near_plane), T(far_plane), o))
          continue;
        T vW[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0}, vt[3] = {0, 0, 0};
        project_backward<T>(mu + 3 * n, q + 4 * n, s + 3 * n, cams[c], T(eps2d), o, vm2 + 2 * i, vd[i],
                            vco + 3 * i, vcp[i], gm + 3 * n, gq + 4 * n, gs + 3 * n, vW, vt);
        for (int k = 0; k < 9; ++k) my[12 * c + k] += vW[k];
        for (int k = 0; k < 3; ++k) my[12 * c + 9 + k] += vt[k];
      }
    }
  }
  T* gv = v_viewmats.data_ptr<T>();
  for (int64_t c = 0; c < C; ++c) {
    double acc[12] = {0};
    for (int t = 0; t < nthreads; ++t)
      for (int k = 0; k < 12; ++k) acc[k] += vview[(static_cast<size_t>(t) * C + c) * 12 + k];
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) gv[16 * c + 4 * i + j] = static_cast<T>(acc[3 * i + j]);
      gv[16 * c + 4 * i + 3] = static_cast<T>(acc[9 + i]);
    }
  }
}

std::tuple<Tensor, Tensor, Tensor, Tensor> project_backward_cpu(
    const Tensor& means_, const Tensor& quats_, const Tensor& scales_, const Tensor& viewmats_, const Tensor& Ks_,
    int64_t width, int64_t height, double eps2d, double near_plane, double far_plane, const Tensor& radii_,
    const Tensor& v_means2d_, const Tensor& v_depths_, const Tensor& v_conics_, const Tensor& v_comps_) {
  check_projection_inputs(means_, quats_, scales_, viewmats_, Ks_);
  const auto means = means_.contiguous(), quats = quats_.contiguous(), scales = scales_.contiguous();
  const auto viewmats = viewmats_.contiguous(), Ks = Ks_.contiguous();
  const int64_t N = means.size(0), C = viewmats.size(0);
  const auto dt = means.scalar_type();
  TORCH_CHECK(radii_.sizes() == at::IntArrayRef({C, N}) && radii_.scalar_type() == at::kInt,
              "splat_project_backward: radii must be int32 [C,N]");
  const auto radii = radii_.contiguous();
  const auto v_means2d = v_means2d_.to(dt).contiguous(), v_depths = v_depths_.to(dt).contiguous();
  const auto v_conics = v_conics_.to(dt).contiguous(), v_comps = v_comps_.to(dt).contiguous();
  TORCH_CHECK(v_means2d.numel() == C * N * 2 && v_depths.numel() == C * N && v_conics.numel() == C * N * 3 &&
                  v_comps.numel() == C * N,
              "splat_project_backward: gradient shapes do not match [C,N]");
  auto v_means = at::zeros({N, 3}, means.options());
  auto v_quats = at::zeros({N, 4}, means.options());
  auto v_scales = at::zeros({N, 3}, means.options());
  auto v_viewmats = at::zeros({C, 4, 4}, means.options());
  AT_DISPATCH_FLOATING_TYPES(dt, "splat_project_backward_cpu", [&] {
    project_backward_kernel<scalar_t>(means, quats, scales, viewmats, Ks, width, height, eps2d, near_plane,
                                      far_plane, radii, v_means2d, v_depths, v_conics, v_comps, v_means, v_quats,
                                      v_scales, v_viewmats);
  });
  return {v_means, v_quats, v_scales, v_viewmats};
}

// ---- 2. SH to colour -------------------------------------------------------------------------------

void check_sh_inputs(const Tensor& coeffs, const Tensor& dirs, int64_t degree) {
  TORCH_CHECK(degree >= 0 && degree <= 3, "splat_sh_to_color: degree must be in 0..3, got ", degree);
  TORCH_CHECK(coeffs.dim() == 3 && coeffs.size(2) == 3 && coeffs.size(1) >= (degree + 1) * (degree + 1),
              "splat_sh_to_color: coeffs must be [N,K,3] with K >= (degree+1)^2");
  TORCH_CHECK(dirs.dim() == 3 && dirs.size(1) == coeffs.size(0) && dirs.size(2) == 3,
              "splat_sh_to_color: dirs must be [C,N,3]");
  const auto dt = coeffs.scalar_type();
  TORCH_CHECK(dt == at::kFloat || dt == at::kDouble, "splat_sh_to_color: dtype must be float32 or float64");
  check_float(dirs, "dirs", dt);
}

Tensor sh_to_color_cpu(const Tensor& coeffs_, const Tensor& dirs_, int64_t degree) {
  check_sh_inputs(coeffs_, dirs_, degree);
  const auto coeffs = coeffs_.contiguous(), dirs = dirs_.contiguous();
  const int64_t C = dirs.size(0), N = dirs.size(1), K = coeffs.size(1);
  auto out = at::empty({C, N, 3}, coeffs.options());
  AT_DISPATCH_FLOATING_TYPES(coeffs.scalar_type(), "splat_sh_to_color_cpu", [&] {
    using T = scalar_t;
    const T* co = coeffs.data_ptr<T>();
    const T* d = dirs.data_ptr<T>();
    T* o = out.data_ptr<T>();
    at::parallel_for(0, C * N, 1024, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        sh_to_color_forward<T>(static_cast<int>(degree), co + (i % N) * K * 3, d + 3 * i, o + 3 * i);
    });
  });
  return out;
}

std::tuple<Tensor, Tensor> sh_to_color_backward_cpu(const Tensor& v_colors_, const Tensor& coeffs_,
                                                    const Tensor& dirs_, int64_t degree) {
  check_sh_inputs(coeffs_, dirs_, degree);
  const auto coeffs = coeffs_.contiguous(), dirs = dirs_.contiguous();
  const auto v_colors = v_colors_.to(coeffs.scalar_type()).contiguous();
  const int64_t C = dirs.size(0), N = dirs.size(1), K = coeffs.size(1);
  TORCH_CHECK(v_colors.numel() == C * N * 3, "splat_sh_to_color_backward: v_colors must be [C,N,3]");
  auto v_coeffs = at::zeros_like(coeffs);
  auto v_dirs = at::zeros_like(dirs);
  AT_DISPATCH_FLOATING_TYPES(coeffs.scalar_type(), "splat_sh_to_color_backward_cpu", [&] {
    using T = scalar_t;
    const T* co = coeffs.data_ptr<T>();
    const T* d = dirs.data_ptr<T>();
    const T* vc = v_colors.data_ptr<T>();
    T* gco = v_coeffs.data_ptr<T>();
    T* gd = v_dirs.data_ptr<T>();
    const int k = static_cast<int>((degree + 1) * (degree + 1));
    at::parallel_for(0, N, 256, [&](int64_t n0, int64_t n1) {
      T tmp[48];
      for (int64_t n = n0; n < n1; ++n) {
        T* g = gco + n * K * 3;
        for (int64_t c = 0; c < C; ++c) {
          const int64_t i = c * N + n;
          sh_to_color_backward<T>(static_cast<int>(degree), co + n * K * 3, d + 3 * i, vc + 3 * i, tmp, gd + 3 * i);
          for (int j = 0; j < 3 * k; ++j) g[j] += tmp[j];
        }
      }
    });
  });
  return {v_coeffs, v_dirs};
}

// ---- 3. tile intersection --------------------------------------------------------------------------

inline uint32_t depth_key(float d) {  // order-preserving for d >= 0 (visible depths are > near > 0)
  uint32_t u;
  std::memcpy(&u, &d, sizeof(u));
  return u;
}

std::tuple<Tensor, Tensor, Tensor, Tensor> isect_tiles_cpu(const Tensor& means2d_, const Tensor& radii_,
                                                           const Tensor& depths_, int64_t tile_size,
                                                           int64_t tile_width, int64_t tile_height) {
  TORCH_CHECK(means2d_.dim() == 3 && means2d_.size(2) == 2, "splat_isect_tiles: means2d must be [C,N,2]");
  const int64_t C = means2d_.size(0), N = means2d_.size(1);
  TORCH_CHECK(radii_.sizes() == at::IntArrayRef({C, N}) && radii_.scalar_type() == at::kInt,
              "splat_isect_tiles: radii must be int32 [C,N]");
  TORCH_CHECK(depths_.sizes() == at::IntArrayRef({C, N}), "splat_isect_tiles: depths must be [C,N]");
  TORCH_CHECK(tile_size > 0 && tile_width >= 0 && tile_height >= 0, "splat_isect_tiles: bad tile grid");
  TORCH_CHECK(C * N < (int64_t(1) << 31), "splat_isect_tiles: C*N must fit in int32");
  const auto radii = radii_.contiguous();
  const auto depths = depths_.to(at::kFloat).contiguous();
  const auto means2d = means2d_.contiguous();
  const int64_t ntiles = tile_width * tile_height;
  auto tiles_per_gauss = at::zeros({C, N}, radii.options());
  std::vector<int32_t> box(static_cast<size_t>(C * N) * 4);
  AT_DISPATCH_FLOATING_TYPES(means2d.scalar_type(), "splat_isect_tiles_cpu", [&] {
    using T = scalar_t;
    const T* m = means2d.data_ptr<T>();
    const int32_t* r = radii.data_ptr<int32_t>();
    int32_t* cnt = tiles_per_gauss.data_ptr<int32_t>();
    at::parallel_for(0, C * N, 4096, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        int32_t* b = box.data() + 4 * i;
        b[0] = b[1] = b[2] = b[3] = 0;
        if (r[i] <= 0) continue;
        const T rad = T(r[i]), ts = T(tile_size);
        auto clampi = [](T v, int64_t hi) {
          return static_cast<int32_t>(v < T(0) ? T(0) : (v > T(hi) ? T(hi) : v));
        };
        b[0] = clampi(std::floor((m[2 * i] - rad) / ts), tile_width);
        b[1] = clampi(std::floor((m[2 * i + 1] - rad) / ts), tile_height);
        b[2] = clampi(std::ceil((m[2 * i] + rad) / ts), tile_width);
        b[3] = clampi(std::ceil((m[2 * i + 1] + rad) / ts), tile_height);
        cnt[i] = (b[2] - b[0]) * (b[3] - b[1]);
      }
    });
  });
  // Counting sort by tile (stable in Gaussian order), then each tile's run by (depth, Gaussian id).
  // nth contiguous parts of the Gaussians: per-part tile histograms, then per-part write cursors
  // (tile start + the counts of the parts before), so the parallel scatter keeps Gaussian order.
  const int32_t* cnt = tiles_per_gauss.data_ptr<int32_t>();
  const int64_t CT = C * ntiles, CN = C * N;
  const int nth = std::max(1, omp_get_max_threads());
  std::vector<int64_t> hist(static_cast<size_t>(nth) * CT, 0);
  auto for_boxes = [&](int64_t i, auto&& fn) {
    const int32_t* b = box.data() + 4 * i;
    const int64_t base = (i / N) * ntiles;
    for (int32_t ty = b[1]; ty < b[3]; ++ty)
      for (int32_t tx = b[0]; tx < b[2]; ++tx) fn(base + ty * tile_width + tx);
  };
#pragma omp parallel num_threads(nth)
  {
    // nth fixed parts, whatever the team size: part p's histogram is also its write cursor below
    for (int p = omp_get_thread_num(); p < nth; p += omp_get_num_threads()) {
      int64_t* h = hist.data() + static_cast<size_t>(p) * CT;
      for (int64_t i = CN * p / nth; i < CN * (p + 1) / nth; ++i)
        if (cnt[i] != 0) for_boxes(i, [&](int64_t t) { ++h[t]; });
    }
  }
  std::vector<int64_t> start(static_cast<size_t>(CT) + 1, 0);
  for (int64_t t = 0; t < CT; ++t) {
    int64_t run = start[t];
    for (int th = 0; th < nth; ++th) {  // hist becomes each thread's write cursor
      const int64_t n = hist[static_cast<size_t>(th) * CT + t];
      hist[static_cast<size_t>(th) * CT + t] = run;
      run += n;
    }
    start[t + 1] = run;
  }
  const int64_t M = start[CT];
  TORCH_CHECK(M < (int64_t(1) << 31), "splat_isect_tiles: more than 2^31 intersections");
  auto isect_ids = at::empty({M}, radii.options().dtype(at::kLong));
  auto flatten_ids = at::empty({M}, radii.options());
  auto tile_offsets = at::empty({C, tile_height, tile_width}, radii.options());
  int32_t* fid = flatten_ids.data_ptr<int32_t>();
#pragma omp parallel num_threads(nth)
  {
    for (int p = omp_get_thread_num(); p < nth; p += omp_get_num_threads()) {
      int64_t* pos = hist.data() + static_cast<size_t>(p) * CT;
      for (int64_t i = CN * p / nth; i < CN * (p + 1) / nth; ++i)
        if (cnt[i] != 0) for_boxes(i, [&](int64_t t) { fid[pos[t]++] = static_cast<int32_t>(i); });
    }
  }
  const float* d = depths.data_ptr<float>();
  int64_t* iid = isect_ids.data_ptr<int64_t>();
  int32_t* toff = tile_offsets.data_ptr<int32_t>();
  at::parallel_for(0, C * ntiles, 16, [&](int64_t t0, int64_t t1) {
    std::vector<uint64_t> keys;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t s = start[t], e = start[t + 1];
      toff[t] = static_cast<int32_t>(s);
      keys.resize(static_cast<size_t>(e - s));
      for (int64_t k = s; k < e; ++k)
        keys[k - s] = (static_cast<uint64_t>(depth_key(d[fid[k]])) << 32) | static_cast<uint32_t>(fid[k]);
      std::sort(keys.begin(), keys.end());
      for (int64_t k = s; k < e; ++k) {
        const uint64_t key = keys[k - s];
        fid[k] = static_cast<int32_t>(key & 0xffffffffu);
        iid[k] = (t << 32) | static_cast<int64_t>(key >> 32);
      }
    }
  });
  return {tiles_per_gauss, isect_ids, flatten_ids, tile_offsets};
}

// ---- 4. rasterization ------------------------------------------------------------------------------

struct RasterDims {
  int64_t C, N, D, W, H, ts, tw, th, M;
};

RasterDims check_raster_inputs(const Tensor& means2d, const Tensor& conics, const Tensor& colors,
                               const Tensor& opacities, int64_t width, int64_t height, int64_t tile_size,
                               const Tensor& tile_offsets, const Tensor& flatten_ids) {
  TORCH_CHECK(means2d.dim() == 3 && means2d.size(2) == 2, "splat_rasterize: means2d must be [C,N,2]");
  const int64_t C = means2d.size(0), N = means2d.size(1);
  TORCH_CHECK(conics.dim() == 3 && conics.size(0) == C && conics.size(1) == N && conics.size(2) == 3,
              "splat_rasterize: conics must be [C,N,3]");
  TORCH_CHECK(colors.dim() == 3 && colors.size(0) == C && colors.size(1) == N && colors.size(2) >= 1,
              "splat_rasterize: colors must be [C,N,D]");
  TORCH_CHECK(opacities.dim() == 2 && opacities.size(0) == C && opacities.size(1) == N,
              "splat_rasterize: opacities must be [C,N]");
  TORCH_CHECK(width > 0 && height > 0 && tile_size > 0, "splat_rasterize: width, height, tile_size must be > 0");
  const int64_t tw = (width + tile_size - 1) / tile_size, th = (height + tile_size - 1) / tile_size;
  TORCH_CHECK(tile_offsets.sizes() == at::IntArrayRef({C, th, tw}) && tile_offsets.scalar_type() == at::kInt,
              "splat_rasterize: tile_offsets must be int32 [C, ceil(H/tile), ceil(W/tile)]");
  TORCH_CHECK(flatten_ids.dim() == 1 && flatten_ids.scalar_type() == at::kInt,
              "splat_rasterize: flatten_ids must be int32 [M]");
  const auto dt = means2d.scalar_type();
  TORCH_CHECK(dt == at::kFloat || dt == at::kDouble, "splat_rasterize: dtype must be float32 or float64");
  check_float(conics, "conics", dt);
  check_float(colors, "colors", dt);
  check_float(opacities, "opacities", dt);
  return {C, N, colors.size(2), width, height, tile_size, tw, th, flatten_ids.size(0)};
}

// Pixels are processed in chunks of kLanes consecutive pixels of a tile (row-major in the tile): the
// chunk's state (transmittance, colour sums, last contributor) stays in registers while the chunk
// walks the tile's depth-sorted list, and stops as soon as all its pixels are done.
constexpr int kLanes = 16;

// True when any of the kLanes (16) int32 flags at m (64-byte aligned) is non-zero. GCC turns the plain
// loop into lane extracts; the intrinsics test all lanes at once.
static_assert(kLanes == 16, "any_lane tests 16 int32 lanes");
inline bool any_lane(const int32_t* m) {
#if defined(__AVX512F__)
  const __m512i v = _mm512_load_si512(reinterpret_cast<const void*>(m));
  return _mm512_test_epi32_mask(v, v) != 0;
#elif defined(__AVX2__)
  const __m256i a = _mm256_load_si256(reinterpret_cast<const __m256i*>(m));
  const __m256i b = _mm256_load_si256(reinterpret_cast<const __m256i*>(m + 8));
  const __m256i o = _mm256_or_si256(a, b);
  return !_mm256_testz_si256(o, o);
#else
  int32_t r = 0;
  for (int j = 0; j < kLanes; ++j) r |= m[j];
  return r != 0;
#endif
}

// Half-height of the region where a Gaussian's alpha can reach 1/255: rows farther than this from
// mean2d.y cannot get alpha >= 1/255 at any x (min over x of sigma at offset dy is dy^2 / (2 cov_yy)).
// Negative: the Gaussian never reaches 1/255. A 1% + 0.01 px margin keeps the test conservative.
template <typename T>
std::vector<T> alpha_row_extents(const T* conics, const T* opac, int64_t CN) {
  std::vector<T> ext(static_cast<size_t>(CN));
  at::parallel_for(0, CN, 4096, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const T ca = conics[3 * i], cb = conics[3 * i + 1], cc = conics[3 * i + 2];
      const T det = ca * cc - cb * cb;
      const T smax = std::log(T(255) * opac[i]);  // alpha = o exp(-s) >= 1/255  <=>  s <= log(255 o)
      if (!(opac[i] * T(255) >= T(1))) {
        ext[i] = T(-1);
      } else if (!(det > T(0)) || !(ca > T(0))) {
        ext[i] = std::numeric_limits<T>::infinity();
      } else {
        const T cov_yy = ca / det;
        ext[i] = std::sqrt(T(2) * std::max(smax, T(0)) * cov_yy) * T(1.01) + T(0.01);
      }
    }
  });
  return ext;
}

// Pixel coordinates of lane j of chunk q of tile (tx, ty); inside = within the image.
struct ChunkGeom {
  int64_t x[kLanes], y[kLanes];
  bool inside[kLanes];
  int64_t ymin, ymax;
  bool any_inside;
};

inline void chunk_geometry(int64_t tx, int64_t ty, int64_t q, int64_t ts, int64_t W, int64_t H, ChunkGeom& cg) {
  cg.ymin = INT64_MAX;
  cg.ymax = INT64_MIN;
  cg.any_inside = false;
  for (int j = 0; j < kLanes; ++j) {
    const int64_t p = q * kLanes + j;
    const bool in_tile = p < ts * ts;
    cg.x[j] = tx * ts + (in_tile ? p % ts : 0);
    cg.y[j] = ty * ts + (in_tile ? p / ts : 0);
    cg.inside[j] = in_tile && cg.x[j] < W && cg.y[j] < H;
    if (cg.inside[j]) {
      cg.any_inside = true;
      cg.ymin = std::min(cg.ymin, cg.y[j]);
      cg.ymax = std::max(cg.ymax, cg.y[j]);
    }
  }
}

// Distance from y to the interval of pixel centres [ymin + 0.5, ymax + 0.5].
template <typename T>
inline T row_distance(T y, int64_t ymin, int64_t ymax) {
  const T lo = T(ymin) + T(0.5), hi = T(ymax) + T(0.5);
  return y < lo ? lo - y : (y > hi ? y - hi : T(0));
}

template <typename T>
void rasterize_forward_kernel(const RasterDims& g, const T* means2d, const T* conics, const T* colors,
                              const T* opac, const int32_t* toff, const int32_t* fid, T* out_color, T* out_alpha,
                              T* out_T, int32_t* out_last) {
  const int64_t D = g.D, ntiles = g.tw * g.th;
  const int64_t nchunks = (g.ts * g.ts + kLanes - 1) / kLanes;
  const std::vector<T> yext = alpha_row_extents(conics, opac, g.C * g.N);
#pragma omp parallel
  {
    DenormalsOff ftz;
    std::vector<T> acc_buf(static_cast<size_t>(D * kLanes));
    T* acc = acc_buf.data();
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < g.C * ntiles; ++t) {
      const int64_t c = t / ntiles, tt = t % ntiles, ty = tt / g.tw, tx = tt % g.tw;
      const int64_t s = toff[t];
      const int64_t e = (t + 1 < g.C * ntiles) ? toff[t + 1] : g.M;
      for (int64_t q = 0; q < nchunks; ++q) {
        ChunkGeom cg;
        chunk_geometry(tx, ty, q, g.ts, g.W, g.H, cg);
        if (!cg.any_inside) continue;
        alignas(64) T px[kLanes], py[kLanes], Tr[kLanes], done[kLanes], w[kLanes];
        alignas(64) int32_t last[kLanes];
        for (int j = 0; j < kLanes; ++j) {
          px[j] = T(cg.x[j]) + T(0.5);
          py[j] = T(cg.y[j]) + T(0.5);
          Tr[j] = T(1);
          done[j] = cg.inside[j] ? T(0) : T(1);
          last[j] = -1;
        }
        std::fill(acc, acc + D * kLanes, T(0));
        for (int64_t k = s; k < e; ++k) {
          const int64_t i = fid[k];
          const T mx = means2d[2 * i], my = means2d[2 * i + 1];
          if (row_distance(my, cg.ymin, cg.ymax) > yext[i]) continue;
          const T ca = conics[3 * i], cb = conics[3 * i + 1], cc = conics[3 * i + 2], op = opac[i];
          const int32_t kk = static_cast<int32_t>(k);
          alignas(64) int32_t conm[kLanes], actm[kLanes];
#pragma omp simd
          for (int j = 0; j < kLanes; ++j) {
            // Conditions as 0/1 floats combined by products: GCC does not vectorize chains of
            // boolean && here (mixed mask widths) under -fno-trapping-math.
            const T dx = mx - px[j], dy = my - py[j];
            const T sg = blend_sigma(dx, dy, ca, cb, cc);
            T a = op * exp_neg(sg > T(0) ? sg : T(0));
            a = a < T(kAlphaMax) ? a : T(kAlphaMax);
            const T okf = (sg >= T(0) ? T(1) : T(0)) * (a >= T(kAlphaMin) ? T(1) : T(0)) * (T(1) - done[j]);
            const T nT = Tr[j] * (T(1) - a);
            const T termf = okf * (nT <= T(kTransmittanceMin) ? T(1) : T(0));
            const T conf = okf - termf;
            done[j] += termf;
            w[j] = (a * Tr[j]) * conf;
            Tr[j] = conf > T(0) ? nT : Tr[j];
            last[j] = conf > T(0) ? kk : last[j];
            conm[j] = conf > T(0) ? 1 : 0;
            actm[j] = done[j] == T(0) ? 1 : 0;
          }
          if (any_lane(conm)) {
            for (int64_t ch = 0; ch < D; ++ch) {
              const T col = colors[D * i + ch];
              T* a = acc + ch * kLanes;
#pragma omp simd
              for (int j = 0; j < kLanes; ++j) a[j] += w[j] * col;
            }
          }
          if (!any_lane(actm)) break;
        }
        for (int j = 0; j < kLanes; ++j) {
          if (!cg.inside[j]) continue;
          const int64_t pix = (c * g.H + cg.y[j]) * g.W + cg.x[j];
          for (int64_t ch = 0; ch < D; ++ch) out_color[pix * D + ch] = acc[ch * kLanes + j];
          out_alpha[pix] = T(1) - Tr[j];
          out_T[pix] = Tr[j];
          out_last[pix] = last[j];
        }
      }
    }
  }
}

std::tuple<Tensor, Tensor, Tensor, Tensor> rasterize_cpu(const Tensor& means2d_, const Tensor& conics_,
                                                         const Tensor& colors_, const Tensor& opacities_,
                                                         int64_t width, int64_t height, int64_t tile_size,
                                                         const Tensor& tile_offsets_, const Tensor& flatten_ids_) {
  const RasterDims g = check_raster_inputs(means2d_, conics_, colors_, opacities_, width, height, tile_size,
                                           tile_offsets_, flatten_ids_);
  const auto means2d = means2d_.contiguous(), conics = conics_.contiguous(), colors = colors_.contiguous();
  const auto opac = opacities_.contiguous(), toff = tile_offsets_.contiguous(), fid = flatten_ids_.contiguous();
  const auto opt = means2d.options();
  auto out_color = at::empty({g.C, g.H, g.W, g.D}, opt);
  auto out_alpha = at::empty({g.C, g.H, g.W, 1}, opt);
  auto out_T = at::empty({g.C, g.H, g.W}, opt);
  auto out_last = at::empty({g.C, g.H, g.W}, opt.dtype(at::kInt));
  AT_DISPATCH_FLOATING_TYPES(means2d.scalar_type(), "splat_rasterize_cpu", [&] {
    using T = scalar_t;
    rasterize_forward_kernel<T>(g, means2d.data_ptr<T>(), conics.data_ptr<T>(), colors.data_ptr<T>(),
                                opac.data_ptr<T>(), toff.data_ptr<int32_t>(), fid.data_ptr<int32_t>(),
                                out_color.data_ptr<T>(), out_alpha.data_ptr<T>(), out_T.data_ptr<T>(),
                                out_last.data_ptr<int32_t>());
  });
  return {out_color, out_alpha, out_T, out_last};
}

template <typename T>
void rasterize_backward_kernel(const RasterDims& g, const T* means2d, const T* conics, const T* colors,
                               const T* opac, const int32_t* toff, const int32_t* fid, const T* Tfinal,
                               const int32_t* lastids, const T* v_color, const T* v_alpha, T* g_means2d,
                               T* g_conics, T* g_colors, T* g_opac) {
  // Gaussian-major: each Gaussian of a tile (back to front) visits every chunk of the tile, so its
  // gradient is summed lane-wise over the chunks and reduced across lanes once per tile.
  const int64_t D = g.D, ntiles = g.tw * g.th, CN = g.C * g.N;
  const int64_t nchunks = (g.ts * g.ts + kLanes - 1) / kLanes;
  const int64_t P = nchunks * kLanes;
  const int64_t K = 6 + D;  // per-Gaussian accumulators: mean2d (2), conic (3), opacity (1), colour (D)
  const std::vector<T> yext = alpha_row_extents(conics, opac, CN);
  const int nthreads = omp_get_max_threads();
  std::vector<T> sums(static_cast<size_t>(nthreads) * CN * K);
#pragma omp parallel num_threads(nthreads)
  {
    DenormalsOff ftz;
    T* my = sums.data() + static_cast<size_t>(omp_get_thread_num()) * CN * K;
    std::fill(my, my + CN * K, T(0));
    // per-pixel state of one tile (structure of arrays, P = nchunks * kLanes lanes)
    struct alignas(64) Lanes {
      T v[kLanes];
    };
    std::vector<Lanes> s_px(nchunks), s_py(nchunks), s_Tr(nchunks), s_Tf(nchunks), s_va(nchunks);
    std::vector<Lanes> s_vr(nchunks * D), s_buf(nchunks * D), s_gcol(D);
    struct alignas(64) ILanes {
      int32_t v[kLanes];
    };
    std::vector<ILanes> s_last(nchunks);
    std::vector<ChunkGeom> geo(nchunks);
    std::vector<int32_t> chunk_last(nchunks);
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < g.C * ntiles; ++t) {
      const int64_t c = t / ntiles, tt = t % ntiles, ty = tt / g.tw, tx = tt % g.tw;
      const int64_t s = toff[t];
      int32_t maxlast = -1;
      for (int64_t q = 0; q < nchunks; ++q) {
        ChunkGeom& cg = geo[q];
        chunk_geometry(tx, ty, q, g.ts, g.W, g.H, cg);
        int32_t cl = -1;
        for (int j = 0; j < kLanes; ++j) {
          s_px[q].v[j] = T(cg.x[j]) + T(0.5);
          s_py[q].v[j] = T(cg.y[j]) + T(0.5);
          const bool in = cg.inside[j];
          const int64_t pix = (c * g.H + cg.y[j]) * g.W + cg.x[j];
          s_Tr[q].v[j] = in ? Tfinal[pix] : T(1);
          s_Tf[q].v[j] = s_Tr[q].v[j];
          s_last[q].v[j] = in ? lastids[pix] : -1;
          s_va[q].v[j] = in ? v_alpha[pix] : T(0);
          for (int64_t ch = 0; ch < D; ++ch) {
            s_vr[q * D + ch].v[j] = in ? v_color[pix * D + ch] : T(0);
            s_buf[q * D + ch].v[j] = T(0);
          }
          cl = s_last[q].v[j] > cl ? s_last[q].v[j] : cl;
        }
        chunk_last[q] = cl;
        maxlast = cl > maxlast ? cl : maxlast;
      }
      (void)P;
      for (int64_t k = maxlast; k >= s; --k) {
        const int64_t i = fid[k];
        const T mx = means2d[2 * i], my_ = means2d[2 * i + 1];
        const T ca = conics[3 * i], cb = conics[3 * i + 1], cc = conics[3 * i + 2], op = opac[i];
        const int32_t kk = static_cast<int32_t>(k);
        alignas(64) T gmx[kLanes] = {}, gmy[kLanes] = {}, gca[kLanes] = {}, gcb[kLanes] = {}, gcc[kLanes] = {},
                      gop[kLanes] = {};
        bool touched = false;
        for (int64_t q = 0; q < nchunks; ++q) {
          const ChunkGeom& cg = geo[q];
          if (kk > chunk_last[q] || row_distance(my_, cg.ymin, cg.ymax) > yext[i]) continue;
          const T* px = s_px[q].v;
          const T* py = s_py[q].v;
          T* Tr = s_Tr[q].v;
          const T* Tf = s_Tf[q].v;
          const T* va = s_va[q].v;
          const int32_t* last = s_last[q].v;
          alignas(64) T fac[kLanes], ra[kLanes], Ti[kLanes], vA[kLanes], visv[kLanes], dxv[kLanes], dyv[kLanes];
          alignas(64) int32_t validm[kLanes];
#pragma omp simd
          for (int j = 0; j < kLanes; ++j) {
            const T dx = mx - px[j], dy = my_ - py[j];
            const T sg = blend_sigma(dx, dy, ca, cb, cc);
            const T vis = exp_neg(sg > T(0) ? sg : T(0));
            T a = op * vis;
            a = a < T(kAlphaMax) ? a : T(kAlphaMax);
            const T validf = (kk <= last[j] ? T(1) : T(0)) * (sg >= T(0) ? T(1) : T(0)) *
                             (a >= T(kAlphaMin) ? T(1) : T(0));  // 0/1 (see the forward)
            dxv[j] = dx;
            dyv[j] = dy;
            visv[j] = vis;
            validm[j] = validf > T(0) ? 1 : 0;
            const T r = T(1) / (T(1) - a);
            const T tb = Tr[j] * r;
            Tr[j] = validf > T(0) ? tb : Tr[j];
            Ti[j] = tb * validf;
            ra[j] = r * validf;
            fac[j] = (a * tb) * validf;
            vA[j] = (Tf[j] * r * va[j]) * validf;
          }
          if (!any_lane(validm)) continue;
          if (!touched) {
            for (int64_t ch = 0; ch < D; ++ch) std::fill(s_gcol[ch].v, s_gcol[ch].v + kLanes, T(0));
            touched = true;
          }
          for (int64_t ch = 0; ch < D; ++ch) {
            const T col = colors[D * i + ch];
            T* b = s_buf[q * D + ch].v;
            const T* v = s_vr[q * D + ch].v;
            T* gc = s_gcol[ch].v;
#pragma omp simd
            for (int j = 0; j < kLanes; ++j) {
              vA[j] += (col * Ti[j] - b[j] * ra[j]) * v[j];
              gc[j] += fac[j] * v[j];
              b[j] += col * fac[j];
            }
          }
#pragma omp simd
          for (int j = 0; j < kLanes; ++j) {
            const T vis = visv[j];
            const T v = op * vis < T(kAlphaMax) ? vA[j] : T(0);
            blend_alpha_vjp(dxv[j], dyv[j], ca, cb, cc, op, vis, v, gmx[j], gmy[j], gca[j], gcb[j], gcc[j], gop[j]);
          }
        }
        if (!touched) continue;
        T* acc = my + i * K;
        T r0 = 0, r1 = 0, r2 = 0, r3 = 0, r4 = 0, r5 = 0;
        for (int j = 0; j < kLanes; ++j) {
          r0 += gmx[j];
          r1 += gmy[j];
          r2 += gca[j];
          r3 += gcb[j];
          r4 += gcc[j];
          r5 += gop[j];
        }
        acc[0] += r0;
        acc[1] += r1;
        acc[2] += r2;
        acc[3] += r3;
        acc[4] += r4;
        acc[5] += r5;
        for (int64_t ch = 0; ch < D; ++ch) {
          T sc = 0;
          for (int j = 0; j < kLanes; ++j) sc += s_gcol[ch].v[j];
          acc[6 + ch] += sc;
        }
      }
    }
  }
  at::parallel_for(0, CN, 1024, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      for (int64_t k = 0; k < K; ++k) {
        T v = 0;
        for (int th = 0; th < nthreads; ++th) v += sums[(static_cast<size_t>(th) * CN + i) * K + k];
        if (k < 2) g_means2d[2 * i + k] = v;
        else if (k < 5) g_conics[3 * i + k - 2] = v;
        else if (k == 5) g_opac[i] = v;
        else g_colors[D * i + k - 6] = v;
      }
    }
  });
}

std::tuple<Tensor, Tensor, Tensor, Tensor> rasterize_backward_cpu(
    const Tensor& means2d_, const Tensor& conics_, const Tensor& colors_, const Tensor& opacities_, int64_t width,
    int64_t height, int64_t tile_size, const Tensor& tile_offsets_, const Tensor& flatten_ids_,
    const Tensor& transmittances_, const Tensor& last_ids_, const Tensor& v_colors_, const Tensor& v_alphas_) {
  const RasterDims g = check_raster_inputs(means2d_, conics_, colors_, opacities_, width, height, tile_size,
                                           tile_offsets_, flatten_ids_);
  const auto dt = means2d_.scalar_type();
  TORCH_CHECK(transmittances_.numel() == g.C * g.H * g.W && last_ids_.numel() == g.C * g.H * g.W &&
                  last_ids_.scalar_type() == at::kInt,
              "splat_rasterize_backward: transmittances/last_ids must be [C,H,W]");
  TORCH_CHECK(v_colors_.numel() == g.C * g.H * g.W * g.D && v_alphas_.numel() == g.C * g.H * g.W,
              "splat_rasterize_backward: gradient shapes do not match the image");
  const auto means2d = means2d_.contiguous(), conics = conics_.contiguous(), colors = colors_.contiguous();
  const auto opac = opacities_.contiguous(), toff = tile_offsets_.contiguous(), fid = flatten_ids_.contiguous();
  const auto Tf = transmittances_.to(dt).contiguous(), last = last_ids_.contiguous();
  const auto vc = v_colors_.to(dt).contiguous(), va = v_alphas_.to(dt).contiguous();
  auto g_means2d = at::empty_like(means2d);
  auto g_conics = at::empty_like(conics);
  auto g_colors = at::empty_like(colors);
  auto g_opac = at::empty_like(opac);
  AT_DISPATCH_FLOATING_TYPES(dt, "splat_rasterize_backward_cpu", [&] {
    using T = scalar_t;
    rasterize_backward_kernel<T>(g, means2d.data_ptr<T>(), conics.data_ptr<T>(), colors.data_ptr<T>(),
                                 opac.data_ptr<T>(), toff.data_ptr<int32_t>(), fid.data_ptr<int32_t>(),
                                 Tf.data_ptr<T>(), last.data_ptr<int32_t>(), vc.data_ptr<T>(), va.data_ptr<T>(),
                                 g_means2d.data_ptr<T>(), g_conics.data_ptr<T>(), g_colors.data_ptr<T>(),
                                 g_opac.data_ptr<T>());
  });
  return {g_means2d, g_conics, g_colors, g_opac};
}

}  // namespace
}  // namespace splat
}  // namespace gsw

TORCH_LIBRARY_IMPL(gsworkbench, CPU, m) {
  m.impl("splat_project", &gsw::splat::project_cpu);
  m.impl("splat_project_backward", &gsw::splat::project_backward_cpu);
  m.impl("splat_sh_to_color", &gsw::splat::sh_to_color_cpu);
  m.impl("splat_sh_to_color_backward", &gsw::splat::sh_to_color_backward_cpu);
  m.impl("splat_isect_tiles", &gsw::splat::isect_tiles_cpu);
  m.impl("splat_rasterize", &gsw::splat::rasterize_cpu);
  m.impl("splat_rasterize_backward", &gsw::splat::rasterize_backward_cpu);
}
