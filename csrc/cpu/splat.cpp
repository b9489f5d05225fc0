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
#include <type_traits>
#include <vector>

#include "gsw/blend.h"
#include "gsw/projection.h"
#include "gsw/sh.h"
#include "gsw/splat_op.h"

// GCC 12 reports "'__Y' may be used uninitialized" inside its own AVX-512 headers (the undefined
// pass-through operand of the shuffle/extract intrinsics) once they are inlined into OpenMP regions;
// a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace gsw {
namespace splat {
namespace {

using at::Tensor;

// exp(-s) for s >= 0 (callers pass max(s, 0)): gsw::exp_nonpos, vectorizable in masked loops.
inline float exp_neg(float s) { return exp_nonpos(-s); }
inline double exp_neg(double s) { return exp_nonpos(-s); }

template <typename T>
std::vector<Camera<T>> load_cameras(const Tensor& viewmats, const Tensor& Ks) {
  const int64_t C = viewmats.size(0);
  std::vector<Camera<T>> cams(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c)
    cams[c] = load_camera(viewmats.data_ptr<T>() + 16 * c, Ks.data_ptr<T>() + 9 * c);
  return cams;
}

// Below these sizes the per-Gaussian and per-intersection passes run serially (thread wake-up under
// OMP_WAIT_POLICY=PASSIVE costs tens of microseconds).
constexpr int64_t kSerialGaussians = 16384, kSerialIsects = 32768;

// ---- 1. projection ---------------------------------------------------------------------------------

// The projection loops run over Gaussians for one camera at a time with branch-free per-Gaussian math
// (gsw/projection.h), which the compiler vectorizes (ivdep: the Gaussians are independent).
template <typename T>
void project_forward_kernel(const T* mu, const T* q, const T* s, const std::vector<Camera<T>>& cams, int64_t N,
                            int64_t width, int64_t height, T eps2d, T near_plane, T far_plane, int32_t* r, T* m2,
                            T* d, T* co, T* cp) {
  at::parallel_for(0, N, kSerialGaussians, [&](int64_t n0, int64_t n1) {
    for (size_t c = 0; c < cams.size(); ++c) {
      const Camera<T> cam = cams[c];
      const int64_t off = static_cast<int64_t>(c) * N;
#pragma GCC ivdep
      for (int64_t n = n0; n < n1; ++n) {
        Projected<T> o;
        const bool ok =
            project_forward<T>(mu + 3 * n, q + 4 * n, s + 3 * n, cam, width, height, eps2d, near_plane, far_plane, o);
        store_projected(ok, o, off + n, r, m2, d, co, cp);
      }
    }
  });
}

// Gaussians [n0, n1) of one camera (n1 - n0 <= kProjBlock): adds their mean, quaternion and scale
// gradients, and writes their viewmat gradients to vw[k * kProjBlock + n - n0] (k < 12; 0 if culled).
constexpr int64_t kProjBlock = 256;

template <typename T>
void project_backward_block(const T* mu, const T* q, const T* s, const Camera<T>& cam, int64_t width, int64_t height,
                            T eps2d, T near_plane, T far_plane, const int32_t* r, const T* vm2, const T* vd,
                            const T* vco, const T* vcp, T* gm, T* gq, T* gs, T* vw, int64_t n0, int64_t n1,
                            int64_t off) {
#pragma GCC ivdep
  for (int64_t n = n0; n < n1; ++n) {
    const int64_t i = off + n;
    Projected<T> o;
    const T okf = (project_forward<T>(mu + 3 * n, q + 4 * n, s + 3 * n, cam, width, height, eps2d, near_plane,
                                      far_plane, o)
                       ? T(1)
                       : T(0)) *
                  T(r[i] > 0 ? 1 : 0);
    const bool ok = okf > T(0);
    T vW[9] = {}, vt[3] = {}, vmu[3] = {}, vq[4] = {}, vs[3] = {};
    project_backward<T>(mu + 3 * n, q + 4 * n, s + 3 * n, cam, eps2d, o, vm2 + 2 * i, vd[i], vco + 3 * i, vcp[i], vmu,
                        vq, vs, vW, vt);
    for (int k = 0; k < 3; ++k) gm[3 * n + k] += ok ? vmu[k] : T(0);
    for (int k = 0; k < 4; ++k) gq[4 * n + k] += ok ? vq[k] : T(0);
    for (int k = 0; k < 3; ++k) gs[3 * n + k] += ok ? vs[k] : T(0);
    for (int k = 0; k < 9; ++k) vw[k * kProjBlock + (n - n0)] = ok ? vW[k] : T(0);
    for (int k = 0; k < 3; ++k) vw[(9 + k) * kProjBlock + (n - n0)] = ok ? vt[k] : T(0);
  }
}

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
    project_forward_kernel<T>(means.data_ptr<T>(), quats.data_ptr<T>(), scales.data_ptr<T>(),
                              load_cameras<T>(viewmats, Ks), N, width, height, T(eps2d), T(near_plane), T(far_plane),
                              radii.data_ptr<int32_t>(), means2d.data_ptr<T>(), depths.data_ptr<T>(),
                              conics.data_ptr<T>(), comps.data_ptr<T>());
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
  const int nthreads = C * N >= kSerialGaussians ? omp_get_max_threads() : 1;
  std::vector<double> vview(static_cast<size_t>(nthreads) * C * 12, 0.0);
  const int64_t nblocks = (N + kProjBlock - 1) / kProjBlock;
#pragma omp parallel num_threads(nthreads)
  {
    double* my = vview.data() + static_cast<size_t>(omp_get_thread_num()) * C * 12;
    std::vector<T> vw(static_cast<size_t>(12 * kProjBlock));
#pragma omp for schedule(static)
    for (int64_t b = 0; b < nblocks; ++b) {
      const int64_t n0 = b * kProjBlock, n1 = std::min(N, n0 + kProjBlock);
      for (int64_t c = 0; c < C; ++c) {
        project_backward_block<T>(mu, q, s, cams[c], width, height, T(eps2d), T(near_plane), T(far_plane), r, vm2, vd,
                                  vco, vcp, gm, gq, gs, vw.data(), n0, n1, c * N);
        for (int k = 0; k < 12; ++k) {
          double sum = 0;
          for (int64_t j = 0; j < n1 - n0; ++j) sum += vw[k * kProjBlock + j];
          my[12 * c + k] += sum;
        }
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
  check_projection_grads(means_, viewmats_, radii_, v_means2d_, v_depths_, v_conics_, v_comps_);
  const auto radii = radii_.contiguous();
  const auto v_means2d = v_means2d_.to(dt).contiguous(), v_depths = v_depths_.to(dt).contiguous();
  const auto v_conics = v_conics_.to(dt).contiguous(), v_comps = v_comps_.to(dt).contiguous();
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

// Calls fn(std::integral_constant<int, degree>{}): the SH loops then have fixed trip counts and the
// loops over Gaussians below vectorize.
template <typename Fn>
void with_sh_degree(int64_t degree, Fn&& fn) {
  switch (degree) {
    case 0: return fn(std::integral_constant<int, 0>{});
    case 1: return fn(std::integral_constant<int, 1>{});
    case 2: return fn(std::integral_constant<int, 2>{});
    default: return fn(std::integral_constant<int, 3>{});
  }
}

template <typename T>
void sh_forward_kernel(int64_t degree, const T* co, const T* d, T* o, int64_t C, int64_t N, int64_t K) {
  with_sh_degree(degree, [&](auto deg) {
    at::parallel_for(0, N, 1024, [&](int64_t n0, int64_t n1) {
      for (int64_t c = 0; c < C; ++c) {
        const T* dc = d + 3 * c * N;
        T* oc = o + 3 * c * N;
#pragma omp simd
        for (int64_t n = n0; n < n1; ++n) sh_to_color_forward<T>(deg, co + n * K * 3, dc + 3 * n, oc + 3 * n);
      }
    });
  });
}

template <typename T>
void sh_backward_kernel(int64_t degree, const T* co, const T* d, const T* vc, T* gco, T* gd, int64_t C, int64_t N,
                        int64_t K) {
  with_sh_degree(degree, [&](auto deg) {
    at::parallel_for(0, N, 1024, [&](int64_t n0, int64_t n1) {
      // cameras in turn (a Gaussian's coefficient rows belong to one lane): the first writes the rows
      // the degree uses, the others add to them
#pragma omp simd
      for (int64_t n = n0; n < n1; ++n)
        sh_to_color_backward<T, true>(deg, co + n * K * 3, d + 3 * n, vc + 3 * n, gco + n * K * 3, gd + 3 * n);
      for (int64_t c = 1; c < C; ++c) {
        const int64_t off = 3 * c * N;
#pragma omp simd
        for (int64_t n = n0; n < n1; ++n)
          sh_to_color_backward<T>(deg, co + n * K * 3, d + off + 3 * n, vc + off + 3 * n, gco + n * K * 3,
                                  gd + off + 3 * n);
      }
    });
  });
}

Tensor sh_to_color_cpu(const Tensor& coeffs_, const Tensor& dirs_, int64_t degree) {
  check_sh_inputs(coeffs_, dirs_, degree);
  const auto coeffs = coeffs_.contiguous(), dirs = dirs_.contiguous();
  const int64_t C = dirs.size(0), N = dirs.size(1), K = coeffs.size(1);
  auto out = at::empty({C, N, 3}, coeffs.options());
  AT_DISPATCH_FLOATING_TYPES(coeffs.scalar_type(), "splat_sh_to_color_cpu", [&] {
    sh_forward_kernel<scalar_t>(degree, coeffs.data_ptr<scalar_t>(), dirs.data_ptr<scalar_t>(),
                                out.data_ptr<scalar_t>(), C, N, K);
  });
  return out;
}

std::tuple<Tensor, Tensor> sh_to_color_backward_cpu(const Tensor& v_colors_, const Tensor& coeffs_,
                                                    const Tensor& dirs_, int64_t degree) {
  check_sh_inputs(coeffs_, dirs_, degree);
  check_sh_grads(v_colors_, coeffs_, dirs_);
  const auto coeffs = coeffs_.contiguous(), dirs = dirs_.contiguous();
  const auto v_colors = v_colors_.to(coeffs.scalar_type()).contiguous();
  const int64_t C = dirs.size(0), N = dirs.size(1), K = coeffs.size(1);
  // rows the degree uses are written by the kernel; only unused rows (K > (degree + 1)^2) need zeros
  const bool all_rows = K == (degree + 1) * (degree + 1);
  auto v_coeffs = all_rows ? at::empty_like(coeffs) : at::zeros_like(coeffs);
  auto v_dirs = at::zeros_like(dirs);
  AT_DISPATCH_FLOATING_TYPES(coeffs.scalar_type(), "splat_sh_to_color_backward_cpu", [&] {
    using T = scalar_t;
    sh_backward_kernel<T>(degree, coeffs.data_ptr<T>(), dirs.data_ptr<T>(), v_colors.data_ptr<T>(),
                          v_coeffs.data_ptr<T>(), v_dirs.data_ptr<T>(), C, N, K);
  });
  return {v_coeffs, v_dirs};
}

// Sorts (depth key << 32 | Gaussian id) keys by depth key, ties in their incoming (ascending id)
// order: an LSD radix sort on the four bytes of the depth key, skipping bytes all keys share (no
// data-dependent branches, which mispredict heavily in a comparison sort of depths).
inline void sort_by_depth(std::vector<uint64_t>& keys, std::vector<uint64_t>& tmp) {
  const size_t n = keys.size();
  if (n < 2) return;
  tmp.resize(n);
  uint32_t count[256];
  for (int shift = 32; shift < 64; shift += 8) {
    std::fill(count, count + 256, 0u);
    for (size_t k = 0; k < n; ++k) ++count[(keys[k] >> shift) & 0xff];
    if (count[(keys[0] >> shift) & 0xff] == n) continue;  // one bucket: this byte orders nothing
    uint32_t run = 0;
    for (int b = 0; b < 256; ++b) {
      const uint32_t c = count[b];
      count[b] = run;
      run += c;
    }
    for (size_t k = 0; k < n; ++k) tmp[count[(keys[k] >> shift) & 0xff]++] = keys[k];
    keys.swap(tmp);
  }
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
  check_isect_inputs(means2d_, radii_, depths_, tile_size, tile_width, tile_height);
  const int64_t C = means2d_.size(0), N = means2d_.size(1);
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
    at::parallel_for(0, C * N, kSerialGaussians, [&](int64_t i0, int64_t i1) {
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
  // The visible Gaussians sorted once by depth (ties by index), then a counting sort by tile that is
  // stable in that order: each tile's run comes out sorted by (depth, Gaussian id), with no per-tile
  // sort. nth contiguous parts of the depth order: per-part tile histograms, then per-part write
  // cursors (tile start + the counts of the parts before), so the parallel scatter keeps the order.
  const int32_t* cnt = tiles_per_gauss.data_ptr<int32_t>();
  const float* d = depths.data_ptr<float>();
  const int64_t CT = C * ntiles, CN = C * N;
  std::vector<uint64_t> order, tmp;
  order.reserve(static_cast<size_t>(CN));
  for (int64_t i = 0; i < CN; ++i)
    if (cnt[i] != 0) order.push_back((static_cast<uint64_t>(depth_key(d[i])) << 32) | static_cast<uint32_t>(i));
  sort_by_depth(order, tmp);
  const int64_t V = static_cast<int64_t>(order.size());
  // small inputs run on one thread: waking a sleeping OpenMP thread costs more than the work
  const int nth = CN < kSerialGaussians ? 1 : std::max(1, omp_get_max_threads());
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
      for (int64_t j = V * p / nth; j < V * (p + 1) / nth; ++j)
        for_boxes(static_cast<int64_t>(order[j] & 0xffffffffu), [&](int64_t t) { ++h[t]; });
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
  int64_t* iid = isect_ids.data_ptr<int64_t>();
  int32_t* toff = tile_offsets.data_ptr<int32_t>();
  for (int64_t t = 0; t < CT; ++t) toff[t] = static_cast<int32_t>(start[t]);
#pragma omp parallel num_threads(nth)
  {
    for (int p = omp_get_thread_num(); p < nth; p += omp_get_num_threads()) {
      int64_t* pos = hist.data() + static_cast<size_t>(p) * CT;
      for (int64_t j = V * p / nth; j < V * (p + 1) / nth; ++j) {
        const int64_t i = static_cast<int64_t>(order[j] & 0xffffffffu);
        const int64_t dkey = static_cast<int64_t>(order[j] >> 32);
        for_boxes(i, [&](int64_t t) {
          const int64_t k = pos[t]++;
          fid[k] = static_cast<int32_t>(i);
          iid[k] = (t << 32) | dkey;
        });
      }
    }
  }
  return {tiles_per_gauss, isect_ids, flatten_ids, tile_offsets};
}

// ---- 4. rasterization ------------------------------------------------------------------------------

// Pixels are processed in chunks of kLanes consecutive pixels of a tile (row-major in the tile): the
// chunk's state (transmittance, colour sums, last contributor) stays in registers while the chunk
// walks the tile's depth-sorted list, and stops as soon as all its pixels are done.
constexpr int kLanes = 16;

// kLanes values of one chunk, 64-byte aligned (the unit of the kernels' per-tile scratch arrays).
template <typename V>
struct alignas(64) LaneBlock {
  V v[kLanes];
};

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

// Per-Gaussian support of alpha >= 1/255 (gsw/blend.h), in double, structure of arrays: the row
// half-extent, and for the row-interval test (xtest = 1 where it is safe for the conic) the terms of
// the support on the row at offset dy: x within mx + slope dy +- sqrt(disc) / a, where
// disc = two_a_smax - det dy^2 (alpha_row_interval with the per-Gaussian parts hoisted).
struct Support {
  double yext;
  float slope, two_a_smax, det, a2, xtest;  // float: see TileChunks::mark
};
using Supports = std::vector<Support>;  // one record per Gaussian: one cache line read per mark

template <typename T>
Supports alpha_supports(const T* conics, const T* opac, int64_t CN) {
  Supports sp(static_cast<size_t>(CN));
  at::parallel_for(0, CN, 8192, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const double ca = conics[3 * i], cb = conics[3 * i + 1], cc = conics[3 * i + 2];
      const double smax = alpha_sigma_max<double>(opac[i]);
      const bool xt = smax >= 0.0 && alpha_row_interval_exact<double>(ca, cb, cc);
      Support& r = sp[i];
      r.yext = alpha_row_extent<double>(ca, cb, cc, smax);
      r.xtest = xt ? 1.0f : 0.0f;
      r.slope = xt ? float(cb / ca) : 0.0f;
      r.two_a_smax = xt ? float(2.0 * ca * smax) : 0.0f;
      r.det = xt ? float(ca * cc - cb * cb) : 0.0f;
      r.a2 = xt ? float(ca * ca) : 0.0f;
    }
  });
  return sp;
}

// The pixel lanes of one tile's chunks: lane j of chunk q is pixel p = q kLanes + j of the tile (row
// major), at offset (p % ts, p / ts) from the tile corner; lanes with p >= ts^2 are padding.
struct ChunkLayout {
  int64_t nchunks;
  std::vector<int32_t> ox, oy, pad;  // [nchunks * kLanes]; pad: 1 for padding lanes
  ChunkLayout(int64_t ts) : nchunks((ts * ts + kLanes - 1) / kLanes) {
    ox.resize(nchunks * kLanes);
    oy.resize(nchunks * kLanes);
    pad.resize(nchunks * kLanes);
    for (int64_t p = 0; p < nchunks * kLanes; ++p) {
      pad[p] = p >= ts * ts;
      ox[p] = static_cast<int32_t>(pad[p] ? 0 : p % ts);
      oy[p] = static_cast<int32_t>(pad[p] ? 0 : p / ts);
    }
  }
};

// Pixel coordinates of the lanes of one chunk; in = 1 within the image (not padding). int32 lanes
// throughout, so the loops that fill and read them vectorize.
struct alignas(64) ChunkGeom {
  int32_t x[kLanes], y[kLanes], in[kLanes];
  bool any_inside;
};

// The chunks of one tile: lane geometry, and per chunk the box of its inside pixel centres (double,
// structure of arrays) against which a Gaussian's support is tested, all chunks of a row at once.
class TileChunks {
 public:
  TileChunks(const ChunkLayout& lay, int64_t ts)
      : lay_(lay), n_(lay.nchunks), ts_(ts), geo_(n_), ylo_(padded()), yhi_(padded()), xmid_(padded()),
        xhw_(padded()), row_(padded()), in_(padded()), flag_(padded()) {}

  void build(int64_t tx, int64_t ty, int64_t W, int64_t H) {
    y0_ = ty * ts_;
    rows_ = std::min(ts_, H - y0_);
    const int32_t x0t = static_cast<int32_t>(tx * ts_), y0t = static_cast<int32_t>(y0_);
    const int32_t w = static_cast<int32_t>(W), h = static_cast<int32_t>(H);
    for (int64_t q = 0; q < n_; ++q) {
      ChunkGeom& cg = geo_[q];
      const int32_t *ox = lay_.ox.data() + q * kLanes, *oy = lay_.oy.data() + q * kLanes;
      const int32_t* pad = lay_.pad.data() + q * kLanes;
      int32_t any = 0, x0 = INT32_MAX, x1 = INT32_MIN, y0 = INT32_MAX, y1 = INT32_MIN;
#pragma omp simd reduction(| : any) reduction(min : x0, y0) reduction(max : x1, y1)
      for (int j = 0; j < kLanes; ++j) {
        const int32_t x = x0t + ox[j], y = y0t + oy[j];
        const int32_t in = (1 - pad[j]) & (x < w ? 1 : 0) & (y < h ? 1 : 0);
        cg.x[j] = x;
        cg.y[j] = y;
        cg.in[j] = in;
        any |= in;
        x0 = std::min(x0, in ? x : INT32_MAX);
        x1 = std::max(x1, in ? x : INT32_MIN);
        y0 = std::min(y0, in ? y : INT32_MAX);
        y1 = std::max(y1, in ? y : INT32_MIN);
      }
      cg.any_inside = any != 0;
      in_[q] = any ? 1.0f : 0.0f;
      xmid_[q] = any ? 0.5f * (float(x0) + float(x1)) + 0.5f : 0.0f;  // pixel centres x0 + 0.5 .. x1 + 0.5
      xhw_[q] = any ? 0.5f * (float(x1) - float(x0)) : 0.0f;
      ylo_[q] = any ? float(y0) + 0.5f : 0.0f;
      yhi_[q] = any ? float(y1) + 0.5f : 0.0f;
      row_[q] = y0 == y1 ? 1.0f : 0.0f;
    }
  }

  const ChunkGeom& geo(int64_t q) const { return geo_[q]; }
  bool flagged(int64_t q) const { return flag_[q] != 0.0f; }

  // The chunks [qlo, qhi] holding the rows within Gaussian i's row extent (centre y my); false when
  // there are none.
  inline __attribute__((always_inline)) bool chunk_rows(double my, const Supports& sp, int64_t i, int64_t& qlo,
                                                        int64_t& qhi) const {
    const double yext = sp[i].yext;
    const double lo = my - yext - 0.5 - double(y0_), hi = my + yext - 0.5 - double(y0_);  // rows lo <= r <= hi
    if (!(hi >= 0.0) || !(lo <= double(rows_ - 1))) return false;
    const int64_t rlo = lo <= 0.0 ? 0 : static_cast<int64_t>(std::ceil(lo));
    const int64_t rhi = hi >= double(rows_ - 1) ? rows_ - 1 : static_cast<int64_t>(std::floor(hi));
    if (rlo > rhi) return false;
    qlo = rlo * ts_ / kLanes;
    qhi = std::min(n_ - 1, ((rhi + 1) * ts_ - 1) / kLanes);
    return true;
  }

  // Marks the chunks in [qlo, qhi] (from chunk_rows) that Gaussian i (centre mx, my) can reach:
  // flagged(q). The test runs in float, on whole blocks of kLanes chunks: its rounding (relative 1e-7
  // of terms bounded by the conditioning limit of alpha_row_interval_exact) is far inside the
  // support's relaxation.
  inline __attribute__((always_inline)) void mark_range(double mx, double my, const Supports& sp, int64_t i,
                                                        int64_t qlo, int64_t qhi) {
    const Support& su = sp[i];
    const float xt = su.xtest, slope = su.slope, tas = su.two_a_smax, det = su.det, a2 = su.a2;
    const float fx = float(mx), fy = float(my);
    const float fext = su.yext < 3e38 ? float(su.yext) : 3e38f;
    for (int64_t q0 = qlo - qlo % kLanes; q0 <= qhi; q0 += kLanes) {
      const float *ylo = ylo_.data() + q0, *yhi = yhi_.data() + q0, *xmid = xmid_.data() + q0;
      const float *xhw = xhw_.data() + q0, *row = row_.data() + q0, *in = in_.data() + q0;
      float* flag = flag_.data() + q0;
#pragma omp simd
      for (int j = 0; j < kLanes; ++j) {
        const float rd = fy < ylo[j] ? ylo[j] - fy : (fy > yhi[j] ? fy - yhi[j] : 0.0f);
        // one-row chunk: the support's x-interval on the row, centre mx + slope dy, half-width
        // sqrt(disc) / a, meets [xmid - xhw, xmid + xhw] (squared comparison: no sqrt, no division)
        const float dy = fy - ylo[j];
        const float disc = tas - det * dy * dy;
        const float dc = std::abs(fx + slope * dy - xmid[j]) - xhw[j];
        const float inx = (disc >= 0.0f ? 1.0f : 0.0f) * (dc <= 0.0f || dc * dc * a2 <= disc ? 1.0f : 0.0f);
        const float use_x = row[j] * xt;
        flag[j] = in[j] * (rd <= fext ? 1.0f : 0.0f) * (use_x * inx + (1.0f - use_x));
      }
    }
  }

  // chunk_rows, then mark_range.
  bool mark(double mx, double my, const Supports& sp, int64_t i, int64_t& qlo, int64_t& qhi) {
    if (!chunk_rows(my, sp, i, qlo, qhi)) return false;
    mark_range(mx, my, sp, i, qlo, qhi);
    return true;
  }

 private:
  size_t padded() const { return static_cast<size_t>((n_ + kLanes - 1) / kLanes * kLanes); }
  const ChunkLayout& lay_;
  int64_t n_, ts_, y0_ = 0, rows_ = 0;
  std::vector<ChunkGeom> geo_;
  std::vector<float> ylo_, yhi_, xmid_, xhw_, row_, in_, flag_;  // padded to whole kLanes blocks
};

// Alpha (clamped at 0.99) and vis = exp(-max(sigma, 0)) of one Gaussian at the kLanes pixel centres
// of a chunk (gsw/blend.h); alpha is 0 where sigma < 0 (such pixels are skipped, as alpha < 1/255 is).
// The forward and the backward both call this one function, so they agree on every alpha bit for bit.
template <typename T>
inline void chunk_alpha_vis(const T* px, const T* py, T mx, T my, T ca, T cb, T cc, T op, T* alpha, T* vis) {
#pragma omp simd
  for (int j = 0; j < kLanes; ++j) {
    const T dx = mx - px[j], dy = my - py[j];
    const T sg = blend_sigma(dx, dy, ca, cb, cc);
    const T v = exp_neg(sg > T(0) ? sg : T(0));
    T a = op * v;
    a = a < T(kAlphaMax) ? a : T(kAlphaMax);
    alpha[j] = sg >= T(0) ? a : T(0);
    vis[j] = v;
  }
}

// Sum of the kLanes values at v.
template <typename T>
inline T lane_sum(const T* v) {
  T s = 0;
  for (int j = 0; j < kLanes; ++j) s += v[j];
  return s;
}
#if defined(__AVX512F__)
template <>
inline float lane_sum<float>(const float* v) {
  return _mm512_reduce_add_ps(_mm512_load_ps(v));
}
#endif

// The inputs of the per-chunk compositing loop.
template <typename T>
struct BlendInputs {
  const T *means2d, *conics, *colors, *opac;
  const int32_t* fid;
  int64_t D;
};

// Front-to-back compositing of a chunk: the Gaussians of list[0..len) (indices into fid, depth order)
// into colour sums acc[D][kLanes], transmittance Tr and last contributor (index into fid, -1: none).
// Lanes with done = 1 (outside the image) never change. Stops when every lane is done.
template <typename T>
void composite_chunk(const BlendInputs<T>& in, const int32_t* list, int64_t len, const T* px, const T* py, T* done,
                     T* acc, T* Tr, int32_t* last) {
  const int64_t D = in.D;
  alignas(64) T alpha[kLanes], vis[kLanes], w[kLanes];
  alignas(64) int32_t conm[kLanes], actm[kLanes];
  for (int64_t l = 0; l < len; ++l) {
    const int32_t kk = list[l];
    const int64_t i = in.fid[kk];
    const T* co = in.conics + 3 * i;
    chunk_alpha_vis(px, py, in.means2d[2 * i], in.means2d[2 * i + 1], co[0], co[1], co[2], in.opac[i], alpha, vis);
#pragma omp simd
    for (int j = 0; j < kLanes; ++j) {
      // Conditions as 0/1 floats combined by products: GCC does not vectorize chains of boolean &&
      // here (mixed mask widths) under -fno-trapping-math.
      const T a = alpha[j];
      const T okf = (a >= T(kAlphaMin) ? T(1) : T(0)) * (T(1) - done[j]);
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
        const T col = in.colors[D * i + ch];
        T* a = acc + ch * kLanes;
#pragma omp simd
        for (int j = 0; j < kLanes; ++j) a[j] += w[j] * col;
      }
    }
    if (!any_lane(actm)) break;
  }
}

#if defined(__AVX512F__)
// float: the same compositing with the chunk's state in registers and lane masks in mask registers
// (the generic loop's 0/1-float products compile to slow mask/integer round trips).
template <>
void composite_chunk<float>(const BlendInputs<float>& in, const int32_t* list, int64_t len, const float* px,
                            const float* py, float* done, float* acc, float* Tr_, int32_t* last_) {
  const int64_t D = in.D;
  alignas(64) float alpha[kLanes], vis[kLanes];
  __m512 Tr = _mm512_load_ps(Tr_);
  __m512i last = _mm512_load_si512(reinterpret_cast<const void*>(last_));
  __mmask16 active = _mm512_cmp_ps_mask(_mm512_load_ps(done), _mm512_setzero_ps(), _CMP_EQ_OQ);
  const __m512 one = _mm512_set1_ps(1.0f), amin = _mm512_set1_ps(kAlphaMin);
  const __m512 tmin = _mm512_set1_ps(kTransmittanceMin);
  for (int64_t l = 0; l < len && active; ++l) {
    const int32_t kk = list[l];
    const int64_t i = in.fid[kk];
    const float* co = in.conics + 3 * i;
    chunk_alpha_vis(px, py, in.means2d[2 * i], in.means2d[2 * i + 1], co[0], co[1], co[2], in.opac[i], alpha, vis);
    const __m512 a = _mm512_load_ps(alpha);
    const __mmask16 ok = _mm512_mask_cmp_ps_mask(active, a, amin, _CMP_GE_OQ);
    if (!ok) continue;
    const __m512 nT = _mm512_mul_ps(Tr, _mm512_sub_ps(one, a));
    const __mmask16 term = _mm512_mask_cmp_ps_mask(ok, nT, tmin, _CMP_LE_OQ);
    const __mmask16 con = static_cast<__mmask16>(ok & ~term);
    active = static_cast<__mmask16>(active & ~term);
    const __m512 w = _mm512_maskz_mul_ps(con, a, Tr);
    Tr = _mm512_mask_mov_ps(Tr, con, nT);
    last = _mm512_mask_mov_epi32(last, con, _mm512_set1_epi32(kk));
    const float* col = in.colors + D * i;
    for (int64_t ch = 0; ch < D; ++ch) {
      float* ap = acc + ch * kLanes;
      _mm512_storeu_ps(ap, _mm512_fmadd_ps(w, _mm512_set1_ps(col[ch]), _mm512_loadu_ps(ap)));
    }
  }
  _mm512_store_ps(Tr_, Tr);
  _mm512_store_si512(reinterpret_cast<void*>(last_), last);
  _mm512_store_ps(done, _mm512_mask_blend_ps(active, one, _mm512_setzero_ps()));
}
#endif

// Intersections per block of the forward's per-chunk lists (see rasterize_forward_kernel).
constexpr int64_t kBlendBlock = 256;

template <typename T>
void rasterize_forward_kernel(const RasterDims& g, const T* means2d, const T* conics, const T* colors,
                              const T* opac, const int32_t* toff, const int32_t* fid, T* out_color, T* out_alpha,
                              T* out_T, int32_t* out_last) {
  const int64_t D = g.D, ntiles = g.tw * g.th;
  const int64_t nchunks = (g.ts * g.ts + kLanes - 1) / kLanes;
  const Supports sp = alpha_supports(conics, opac, g.C * g.N);
  const ChunkLayout layout(g.ts);
  const BlendInputs<T> in{means2d, conics, colors, opac, fid, D};
#pragma omp parallel
  {
    DenormalsOff ftz;
    using Lanes = LaneBlock<T>;
    using ILanes = LaneBlock<int32_t>;
    // per-chunk state of one tile (kLanes lanes per chunk; D rows per chunk for the colour sums)
    std::vector<Lanes> s_px(nchunks), s_py(nchunks), s_Tr(nchunks), s_done(nchunks), s_acc(nchunks * D);
    std::vector<ILanes> s_last(nchunks);
    std::vector<uint8_t> active(nchunks);
    TileChunks tc(layout, g.ts);
    // per chunk, the block's intersections (indices into fid) whose support meets the chunk, in order
    std::vector<int32_t> lists(static_cast<size_t>(nchunks * kBlendBlock));
    std::vector<int64_t> len(nchunks);
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < g.C * ntiles; ++t) {
      const int64_t c = t / ntiles, tt = t % ntiles, ty = tt / g.tw, tx = tt % g.tw;
      const int64_t s = toff[t];
      const int64_t e = (t + 1 < g.C * ntiles) ? toff[t + 1] : g.M;
      tc.build(tx, ty, g.W, g.H);
      int64_t n_active = 0;
      uint64_t active_bits = 0;
      for (int64_t q = 0; q < nchunks; ++q) {
        const ChunkGeom& cg = tc.geo(q);
        active[q] = cg.any_inside ? 1 : 0;
        n_active += active[q];
        if (q < 64 && active[q]) active_bits |= uint64_t(1) << q;
#pragma omp simd
        for (int j = 0; j < kLanes; ++j) {
          s_px[q].v[j] = T(cg.x[j]) + T(0.5);
          s_py[q].v[j] = T(cg.y[j]) + T(0.5);
          s_Tr[q].v[j] = T(1);
          s_done[q].v[j] = T(1 - cg.in[j]);
          s_last[q].v[j] = -1;
        }
        std::memset(static_cast<void*>(&s_acc[q * D]), 0, sizeof(Lanes) * D);
      }
      // Blocks of the depth-sorted list: per-chunk lists of a block, then compositing of the chunks
      // still active; a tile stops at the first block after which all its pixels are done (dense
      // tiles never look at most of their list).
      for (int64_t b0 = s; b0 < e && n_active > 0; b0 += kBlendBlock) {
        const int64_t b1 = std::min(e, b0 + kBlendBlock);
        std::fill(len.begin(), len.end(), 0);
        for (int64_t k = b0; k < b1; ++k) {
          const int64_t i = fid[k];
          int64_t qlo, qhi;
          if (!tc.chunk_rows(means2d[2 * i + 1], sp, i, qlo, qhi)) continue;
          // chunks still compositing, as bits (tiles of up to 64 chunks): skip Gaussians that only
          // reach finished chunks before the (costlier) support test
          if (nchunks <= 64 && ((active_bits >> qlo) & (~uint64_t(0) >> (63 - (qhi - qlo)))) == 0) continue;
          tc.mark_range(means2d[2 * i], means2d[2 * i + 1], sp, i, qlo, qhi);
          for (int64_t q = qlo; q <= qhi; ++q) {  // branch-free append
            lists[q * kBlendBlock + len[q]] = static_cast<int32_t>(k);
            len[q] += tc.flagged(q) ? 1 : 0;
          }
        }
        for (int64_t q = 0; q < nchunks; ++q) {
          if (!active[q] || len[q] == 0) continue;
          T* done = s_done[q].v;
          composite_chunk(in, lists.data() + q * kBlendBlock, len[q], s_px[q].v, s_py[q].v, done, s_acc[q * D].v,
                          s_Tr[q].v, s_last[q].v);
          T all_done = T(1);
          for (int j = 0; j < kLanes; ++j) all_done = std::min(all_done, done[j]);
          if (all_done > T(0)) {
            active[q] = 0;
            --n_active;
            if (q < 64) active_bits &= ~(uint64_t(1) << q);
          }
        }
      }
      for (int64_t q = 0; q < nchunks; ++q) {
        const ChunkGeom& cg = tc.geo(q);
        if (!cg.any_inside) continue;
        const T* acc = s_acc[q * D].v;
        for (int j = 0; j < kLanes; ++j) {
          if (!cg.in[j]) continue;
          const int64_t pix = (c * g.H + cg.y[j]) * g.W + cg.x[j];
          for (int64_t ch = 0; ch < D; ++ch) out_color[pix * D + ch] = acc[ch * kLanes + j];
          out_alpha[pix] = T(1) - s_Tr[q].v[j];
          out_T[pix] = s_Tr[q].v[j];
          out_last[pix] = s_last[q].v[j];
        }
      }
    }
  }
}

std::tuple<Tensor, Tensor, Tensor, Tensor> rasterize_cpu(const Tensor& means2d_, const Tensor& conics_,
                                                         const Tensor& colors_, const Tensor& opacities_,
                                                         int64_t width, int64_t height, int64_t tile_size,
                                                         const Tensor& tile_offsets_, const Tensor& flatten_ids_,
                                                         bool /*absgrad: read by the backward*/) {
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

// ---- backward: one Gaussian at one chunk ----------------------------------------------------------
// Per-lane state of a chunk in the backward (all pointers to kLanes values, or D * kLanes for the
// per-channel rows): pixel centres, running transmittance Tr (final T at the start, T before the
// current Gaussian after it), final T, dL/d(alpha out), last contributor, dL/d(colour out), and buf,
// the colour composited behind the current Gaussian (per unit of its transmittance).
template <typename T>
struct ChunkBwd {
  const T *px, *py;
  T* Tr;
  const T *Tf, *va;
  const int32_t* last;
  const T* vr;
  T* buf;
};

// One Gaussian's per-lane gradient sums over the chunks of a tile.
template <typename T>
struct alignas(64) GaussGrad {
  T mx[kLanes], my[kLanes], ca[kLanes], cb[kLanes], cc[kLanes], op[kLanes];
  T amx[kLanes], amy[kLanes];  // sums of |per-pixel dL/dmean2d| (absgrad)
};

// The Gaussian's parameters and colour (D values).
template <typename T>
struct GaussIn {
  T mx, my, ca, cb, cc, op;
  int32_t kk;  // its index in the tile list (fid)
  const T* col;
  int64_t D;
};

// Gradients of alpha (given dL/dalpha vA per lane, zero where clamped) into gg (gsw/blend.h).
template <typename T>
inline void alpha_vjp_lanes(const ChunkBwd<T>& st, const GaussIn<T>& p, const T* vis, const T* vA, GaussGrad<T>& gg) {
#pragma omp simd
  for (int j = 0; j < kLanes; ++j) {
    const T v = p.op * vis[j] < T(kAlphaMax) ? vA[j] : T(0);
    T tmx = T(0), tmy = T(0);
    blend_alpha_vjp(p.mx - st.px[j], p.my - st.py[j], p.ca, p.cb, p.cc, p.op, vis[j], v, tmx, tmy, gg.ca[j],
                    gg.cb[j], gg.cc[j], gg.op[j]);
    gg.mx[j] += tmx;
    gg.my[j] += tmy;
    gg.amx[j] += tmx < T(0) ? -tmx : tmx;
    gg.amy[j] += tmy < T(0) ? -tmy : tmy;
  }
}

// Backward of Gaussian p at chunk st: undoes its blend (Tr, buf), adds its colour gradient to gcol
// (D * kLanes) and its alpha gradients to gg. Returns false when it contributed to no pixel here.
template <typename T>
bool backward_pair(const GaussIn<T>& p, const ChunkBwd<T>& st, T* gcol, GaussGrad<T>& gg) {
  alignas(64) T alpha[kLanes], vis[kLanes], fac[kLanes], ra[kLanes], Ti[kLanes], vA[kLanes];
  alignas(64) int32_t validm[kLanes];
  chunk_alpha_vis(st.px, st.py, p.mx, p.my, p.ca, p.cb, p.cc, p.op, alpha, vis);
#pragma omp simd
  for (int j = 0; j < kLanes; ++j) {
    const T a = alpha[j];
    const T validf = (p.kk <= st.last[j] ? T(1) : T(0)) * (a >= T(kAlphaMin) ? T(1) : T(0));  // 0/1
    validm[j] = validf > T(0) ? 1 : 0;
    const T r = T(1) / (T(1) - a);
    const T tb = st.Tr[j] * r;
    st.Tr[j] = validf > T(0) ? tb : st.Tr[j];
    Ti[j] = tb * validf;
    ra[j] = r * validf;
    fac[j] = (a * tb) * validf;
    vA[j] = (st.Tf[j] * r * st.va[j]) * validf;
  }
  if (!any_lane(validm)) return false;
  for (int64_t ch = 0; ch < p.D; ++ch) {
    const T col = p.col[ch];
    T* b = st.buf + ch * kLanes;
    const T* v = st.vr + ch * kLanes;
    T* gc = gcol + ch * kLanes;
#pragma omp simd
    for (int j = 0; j < kLanes; ++j) {
      vA[j] += (col * Ti[j] - b[j] * ra[j]) * v[j];
      gc[j] += fac[j] * v[j];
      b[j] += col * fac[j];
    }
  }
  alpha_vjp_lanes(st, p, vis, vA, gg);
  return true;
}

// The per-tile backward state of all chunks: chunk 0's pointers, chunk q's being kLanes (D * kLanes
// for vr and buf) values further; and one Gaussian's colour-gradient lanes gcol (D rows).
template <typename T>
struct TileBwd {
  ChunkBwd<T> c0;
  T* gcol;
  int64_t D;
  ChunkBwd<T> chunk(int64_t q) const {
    const int64_t o = q * kLanes, od = q * D * kLanes;
    return {c0.px + o, c0.py + o, c0.Tr + o, c0.Tf + o, c0.va + o, c0.last + o, c0.vr + od, c0.buf + od};
  }
};

// Backward of Gaussian p (back to front) over the chunks q in [qlo, qhi] that its support meets and
// that it can have contributed to (p.kk <= the chunk's largest last contributor): adds its summed
// gradients (mean2d, conic, opacity, colour) to acc[0 .. 6 + D), and with absgrad the sums of the
// per-pixel |dL/dmean2d| to acc[6 + D], acc[7 + D].
template <typename T>
void backward_gaussian(const GaussIn<T>& p, const TileBwd<T>& tb, const TileChunks& tc, const int32_t* chunk_last,
                       int64_t qlo, int64_t qhi, GaussGrad<T>& gg, T* acc, bool absgrad) {
  bool touched = false;
  for (int64_t q = qlo; q <= qhi; ++q) {
    if (p.kk > chunk_last[q] || !tc.flagged(q)) continue;
    if (!touched) {
      std::memset(static_cast<void*>(&gg), 0, sizeof(gg));
      std::fill(tb.gcol, tb.gcol + p.D * kLanes, T(0));
    }
    touched = backward_pair(p, tb.chunk(q), tb.gcol, gg) || touched;
  }
  if (!touched) return;
  acc[0] += lane_sum(gg.mx);
  acc[1] += lane_sum(gg.my);
  acc[2] += lane_sum(gg.ca);
  acc[3] += lane_sum(gg.cb);
  acc[4] += lane_sum(gg.cc);
  acc[5] += lane_sum(gg.op);
  for (int64_t ch = 0; ch < p.D; ++ch) acc[6 + ch] += lane_sum(tb.gcol + ch * kLanes);
  if (absgrad) {
    acc[6 + p.D] += lane_sum(gg.amx);
    acc[7 + p.D] += lane_sum(gg.amy);
  }
}

#if defined(__AVX512F__)
// 16 float lanes with arithmetic operators, so the shared per-pixel math (gsw/blend.h) runs on AVX-512
// registers as it is.
struct F16 {
  __m512 v;
  F16(float x) : v(_mm512_set1_ps(x)) {}  // NOLINT: implicit, like a scalar T
  explicit F16(__m512 x) : v(x) {}
};
inline F16 operator+(F16 a, F16 b) { return F16(_mm512_add_ps(a.v, b.v)); }
inline F16 operator-(F16 a, F16 b) { return F16(_mm512_sub_ps(a.v, b.v)); }
inline F16 operator*(F16 a, F16 b) { return F16(_mm512_mul_ps(a.v, b.v)); }
inline F16 operator-(F16 a) { return F16(_mm512_sub_ps(_mm512_setzero_ps(), a.v)); }
inline F16& operator+=(F16& a, F16 b) { return a = a + b; }

// float: the same, with the lane masks in mask registers (see composite_chunk<float>) and the
// Gaussian's gradient sums in registers across its chunks.
template <>
void backward_gaussian<float>(const GaussIn<float>& p, const TileBwd<float>& tb, const TileChunks& tc,
                              const int32_t* chunk_last, int64_t qlo, int64_t qhi, GaussGrad<float>&, float* acc,
                              bool absgrad) {
  const int64_t D = p.D;
  const __m512 one = _mm512_set1_ps(1.0f), amin = _mm512_set1_ps(kAlphaMin), amax = _mm512_set1_ps(kAlphaMax);
  const __m512 opv = _mm512_set1_ps(p.op), mxv = _mm512_set1_ps(p.mx), myv = _mm512_set1_ps(p.my);
  const __m512i kkv = _mm512_set1_epi32(p.kk);
  F16 gmx(0.0f), gmy(0.0f), gca(0.0f), gcb(0.0f), gcc(0.0f), gop(0.0f), gax(0.0f), gay(0.0f);
  bool touched = false;
  alignas(64) float alpha[kLanes], vis[kLanes];
  for (int64_t q = qlo; q <= qhi; ++q) {
    if (p.kk > chunk_last[q] || !tc.flagged(q)) continue;
    const ChunkBwd<float> st = tb.chunk(q);
    chunk_alpha_vis(st.px, st.py, p.mx, p.my, p.ca, p.cb, p.cc, p.op, alpha, vis);
    const __m512 a = _mm512_load_ps(alpha);
    const __mmask16 valid =
        _mm512_cmp_ps_mask(a, amin, _CMP_GE_OQ) &
        _mm512_cmp_epi32_mask(kkv, _mm512_load_si512(reinterpret_cast<const void*>(st.last)), _MM_CMPINT_LE);
    if (!valid) continue;
    if (!touched) {
      std::fill(tb.gcol, tb.gcol + D * kLanes, 0.0f);
      touched = true;
    }
    const __m512 r = _mm512_div_ps(one, _mm512_sub_ps(one, a));
    const __m512 tr = _mm512_load_ps(st.Tr);
    const __m512 tbf = _mm512_mul_ps(tr, r);  // transmittance before this Gaussian
    _mm512_store_ps(st.Tr, _mm512_mask_mov_ps(tr, valid, tbf));
    const __m512 fac = _mm512_maskz_mul_ps(valid, a, tbf);
    __m512 va = _mm512_maskz_mul_ps(valid, _mm512_mul_ps(_mm512_load_ps(st.Tf), r), _mm512_load_ps(st.va));
    for (int64_t ch = 0; ch < D; ++ch) {
      const __m512 col = _mm512_set1_ps(p.col[ch]);
      float* bp = st.buf + ch * kLanes;
      float* gp = tb.gcol + ch * kLanes;
      const __m512 b = _mm512_load_ps(bp), v = _mm512_load_ps(st.vr + ch * kLanes);
      va = _mm512_mask3_fmadd_ps(_mm512_fmsub_ps(col, tbf, _mm512_mul_ps(b, r)), v, va, valid);
      _mm512_store_ps(gp, _mm512_fmadd_ps(fac, v, _mm512_load_ps(gp)));
      _mm512_store_ps(bp, _mm512_fmadd_ps(col, fac, b));
    }
    const __m512 visv = _mm512_load_ps(vis);
    const __mmask16 unclamped = _mm512_cmp_ps_mask(_mm512_mul_ps(opv, visv), amax, _CMP_LT_OQ);
    const F16 dx(_mm512_sub_ps(mxv, _mm512_load_ps(st.px))), dy(_mm512_sub_ps(myv, _mm512_load_ps(st.py)));
    const F16 vav(_mm512_maskz_mov_ps(unclamped, va));
    if (absgrad) {  // per-pixel mean2d gradients kept apart, for their absolute values
      F16 tmx(0.0f), tmy(0.0f);
      blend_alpha_vjp<F16>(dx, dy, F16(p.ca), F16(p.cb), F16(p.cc), F16(opv), F16(visv), vav, tmx, tmy, gca, gcb, gcc,
                           gop);
      gmx += tmx;
      gmy += tmy;
      gax += F16(_mm512_abs_ps(tmx.v));
      gay += F16(_mm512_abs_ps(tmy.v));
    } else {
      blend_alpha_vjp<F16>(dx, dy, F16(p.ca), F16(p.cb), F16(p.cc), F16(opv), F16(visv), vav, gmx, gmy, gca, gcb, gcc,
                           gop);
    }
  }
  if (!touched) return;
  acc[0] += _mm512_reduce_add_ps(gmx.v);
  acc[1] += _mm512_reduce_add_ps(gmy.v);
  acc[2] += _mm512_reduce_add_ps(gca.v);
  acc[3] += _mm512_reduce_add_ps(gcb.v);
  acc[4] += _mm512_reduce_add_ps(gcc.v);
  acc[5] += _mm512_reduce_add_ps(gop.v);
  for (int64_t ch = 0; ch < D; ++ch) acc[6 + ch] += _mm512_reduce_add_ps(_mm512_load_ps(tb.gcol + ch * kLanes));
  if (absgrad) {
    acc[6 + D] += _mm512_reduce_add_ps(gax.v);
    acc[7 + D] += _mm512_reduce_add_ps(gay.v);
  }
}
#endif

template <typename T>
void rasterize_backward_kernel(const RasterDims& g, const T* means2d, const T* conics, const T* colors,
                               const T* opac, const int32_t* toff, const int32_t* fid, const T* Tfinal,
                               const int32_t* lastids, const T* v_color, const T* v_alpha, T* g_means2d,
                               T* g_conics, T* g_colors, T* g_opac, T* g_means2d_abs) {
  // Gaussian-major: each Gaussian of a tile (back to front) visits every chunk of the tile, so its
  // gradient is summed lane-wise over the chunks and reduced across lanes once per tile.
  const int64_t D = g.D, ntiles = g.tw * g.th, CN = g.C * g.N;
  const int64_t nchunks = (g.ts * g.ts + kLanes - 1) / kLanes;
  const bool absgrad = g_means2d_abs != nullptr;
  // per-Gaussian accumulators: mean2d (2), conic (3), opacity (1), colour (D), |mean2d| (2, with absgrad)
  const int64_t K = 6 + D + (absgrad ? 2 : 0);
  const Supports sp = alpha_supports(conics, opac, CN);
  const ChunkLayout layout(g.ts);
  const int nthreads = omp_get_max_threads();
  std::vector<T> sums(static_cast<size_t>(nthreads) * CN * K);
#pragma omp parallel num_threads(nthreads)
  {
    DenormalsOff ftz;
    T* my = sums.data() + static_cast<size_t>(omp_get_thread_num()) * CN * K;
    std::fill(my, my + CN * K, T(0));
    // per-pixel state of one tile (structure of arrays, kLanes lanes per chunk)
    using Lanes = LaneBlock<T>;
    std::vector<Lanes> s_px(nchunks), s_py(nchunks), s_Tr(nchunks), s_Tf(nchunks), s_va(nchunks);
    std::vector<Lanes> s_vr(nchunks * D), s_buf(nchunks * D), gcol(D);
    GaussGrad<T> gg;
    std::vector<LaneBlock<int32_t>> s_last(nchunks);
    TileChunks tc(layout, g.ts);
    const TileBwd<T> tb{{s_px.data()->v, s_py.data()->v, s_Tr.data()->v, s_Tf.data()->v, s_va.data()->v,
                         s_last.data()->v, s_vr.data()->v, s_buf.data()->v},
                        gcol.data()->v,
                        D};
    std::vector<int32_t> chunk_last(nchunks);
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < g.C * ntiles; ++t) {
      const int64_t c = t / ntiles, tt = t % ntiles, ty = tt / g.tw, tx = tt % g.tw;
      const int64_t s = toff[t];
      int32_t maxlast = -1;
      tc.build(tx, ty, g.W, g.H);
      for (int64_t q = 0; q < nchunks; ++q) {
        const ChunkGeom& cg = tc.geo(q);
        int32_t cl = -1;
        for (int j = 0; j < kLanes; ++j) {
          s_px[q].v[j] = T(cg.x[j]) + T(0.5);
          s_py[q].v[j] = T(cg.y[j]) + T(0.5);
          const bool in = cg.in[j] != 0;
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
      for (int64_t k = maxlast; k >= s; --k) {
        const int64_t i = fid[k];
        int64_t qlo, qhi;
        if (!tc.mark(means2d[2 * i], means2d[2 * i + 1], sp, i, qlo, qhi)) continue;
        const T* co = conics + 3 * i;
        const GaussIn<T> p{means2d[2 * i], means2d[2 * i + 1], co[0], co[1], co[2], opac[i],
                           static_cast<int32_t>(k), colors + D * i, D};
        backward_gaussian(p, tb, tc, chunk_last.data(), qlo, qhi, gg, my + i * K, absgrad);
      }
    }
    // the threads' sums (complete after the loop's barrier), reduced by the same team
    std::vector<T> v(static_cast<size_t>(K));
#pragma omp for schedule(static)
    for (int64_t i = 0; i < CN; ++i) {
      std::fill(v.begin(), v.end(), T(0));
      for (int th = 0; th < nthreads; ++th) {
        const T* src = sums.data() + (static_cast<size_t>(th) * CN + i) * K;
        for (int64_t k = 0; k < K; ++k) v[k] += src[k];
      }
      g_means2d[2 * i] = v[0];
      g_means2d[2 * i + 1] = v[1];
      for (int k = 0; k < 3; ++k) g_conics[3 * i + k] = v[2 + k];
      g_opac[i] = v[5];
      for (int64_t ch = 0; ch < D; ++ch) g_colors[D * i + ch] = v[6 + ch];
      if (absgrad) {
        g_means2d_abs[2 * i] = v[6 + D];
        g_means2d_abs[2 * i + 1] = v[7 + D];
      }
    }
  }
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> rasterize_backward_cpu(
    const Tensor& means2d_, const Tensor& conics_, const Tensor& colors_, const Tensor& opacities_, int64_t width,
    int64_t height, int64_t tile_size, const Tensor& tile_offsets_, const Tensor& flatten_ids_,
    const Tensor& transmittances_, const Tensor& last_ids_, const Tensor& v_colors_, const Tensor& v_alphas_,
    bool absgrad) {
  const RasterDims g = check_raster_inputs(means2d_, conics_, colors_, opacities_, width, height, tile_size,
                                           tile_offsets_, flatten_ids_);
  const auto dt = means2d_.scalar_type();
  check_raster_grads(g, means2d_, transmittances_, last_ids_, v_colors_, v_alphas_);
  const auto means2d = means2d_.contiguous(), conics = conics_.contiguous(), colors = colors_.contiguous();
  const auto opac = opacities_.contiguous(), toff = tile_offsets_.contiguous(), fid = flatten_ids_.contiguous();
  const auto Tf = transmittances_.to(dt).contiguous(), last = last_ids_.contiguous();
  const auto vc = v_colors_.to(dt).contiguous(), va = v_alphas_.to(dt).contiguous();
  auto g_means2d = at::empty_like(means2d);
  auto g_conics = at::empty_like(conics);
  auto g_colors = at::empty_like(colors);
  auto g_opac = at::empty_like(opac);
  auto g_abs = absgrad ? at::empty_like(means2d) : at::empty({0}, means2d.options());
  AT_DISPATCH_FLOATING_TYPES(dt, "splat_rasterize_backward_cpu", [&] {
    using T = scalar_t;
    rasterize_backward_kernel<T>(g, means2d.data_ptr<T>(), conics.data_ptr<T>(), colors.data_ptr<T>(),
                                 opac.data_ptr<T>(), toff.data_ptr<int32_t>(), fid.data_ptr<int32_t>(),
                                 Tf.data_ptr<T>(), last.data_ptr<int32_t>(), vc.data_ptr<T>(), va.data_ptr<T>(),
                                 g_means2d.data_ptr<T>(), g_conics.data_ptr<T>(), g_colors.data_ptr<T>(),
                                 g_opac.data_ptr<T>(), absgrad ? g_abs.data_ptr<T>() : nullptr);
  });
  return {g_means2d, g_conics, g_colors, g_opac, g_abs};
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
