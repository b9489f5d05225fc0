// CUDA kernels of the 3DGS tile rasterizer: the same stages and the same per-Gaussian / per-pixel math
// (csrc/include/gsw/{projection,sh,blend}.h) as the CPU kernels in csrc/cpu/splat_*.cpp.
//
// Projection and SH: one thread per (camera, Gaussian); their backward adds per-Gaussian gradients
// (summed over cameras) and the viewmat gradient with atomics. Tile intersection: counts, a CUB scan,
// a fill of (tile << 32 | depth bits, id) pairs, a CUB radix sort and a binary search per tile.
// Rasterization: one thread per pixel, one block per tile (tiles of more than 256 pixels: several
// blocks, each a part of the tile walking the tile's whole list), Gaussians staged in shared memory in
// batches; colour channels kChannelChunk at a time (one launch per chunk). The backward walks each
// tile back to front from its last contributor and reduces the per-Gaussian gradients over each warp
// before one atomic add per warp.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "common.cuh"
#include "gsw/blend.h"
#include "gsw/projection.h"
#include "gsw/sh.h"
#include "splat.h"

namespace gsw {
namespace splat {
namespace cuda {
namespace {

constexpr int kBatch = 256;  // Gaussians staged in shared memory per round

// ---- 1. projection ----------------------------------------------------------------------------------

template <typename T>
__global__ void project_forward_kernel(const T* means, const T* quats, const T* scales, const T* viewmats,
                                       const T* Ks, int64_t C, int64_t N, int64_t width, int64_t height, T eps2d,
                                       T near_plane, T far_plane, int32_t* radii, T* means2d, T* depths, T* conics,
                                       T* comps) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= C * N) return;
  const int64_t c = i / N, n = i % N;
  const Camera<T> cam = load_camera(viewmats + 16 * c, Ks + 9 * c);
  Projected<T> o;
  const bool ok = project_forward<T>(means + 3 * n, quats + 4 * n, scales + 3 * n, cam, width, height, eps2d,
                                     near_plane, far_plane, o);
  store_projected(ok, o, i, radii, means2d, depths, conics, comps);
}

template <typename T>
__global__ void project_backward_kernel(const T* means, const T* quats, const T* scales, const T* viewmats,
                                        const T* Ks, int64_t C, int64_t N, int64_t width, int64_t height, T eps2d,
                                        T near_plane, T far_plane, const int32_t* radii, const T* v_means2d,
                                        const T* v_depths, const T* v_conics, const T* v_comps, T* v_means,
                                        T* v_quats, T* v_scales, T* v_viewmats) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= C * N || radii[i] <= 0) return;
  const int64_t c = i / N, n = i % N;
  const Camera<T> cam = load_camera(viewmats + 16 * c, Ks + 9 * c);
  Projected<T> o;
  if (!project_forward<T>(means + 3 * n, quats + 4 * n, scales + 3 * n, cam, width, height, eps2d, near_plane,
                          far_plane, o))
    return;
  T vm[3] = {0, 0, 0}, vq[4] = {0, 0, 0, 0}, vs[3] = {0, 0, 0};
  T vW[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0}, vt[3] = {0, 0, 0};
  project_backward<T>(means + 3 * n, quats + 4 * n, scales + 3 * n, cam, eps2d, o, v_means2d + 2 * i, v_depths[i],
                      v_conics + 3 * i, v_comps[i], vm, vq, vs, vW, vt);
  for (int k = 0; k < 3; ++k) atomicAdd(v_means + 3 * n + k, vm[k]);
  for (int k = 0; k < 4; ++k) atomicAdd(v_quats + 4 * n + k, vq[k]);
  for (int k = 0; k < 3; ++k) atomicAdd(v_scales + 3 * n + k, vs[k]);
  for (int r = 0; r < 3; ++r) {
    for (int k = 0; k < 3; ++k) atomicAdd(v_viewmats + 16 * c + 4 * r + k, vW[3 * r + k]);
    atomicAdd(v_viewmats + 16 * c + 4 * r + 3, vt[r]);
  }
}

// ---- 2. SH to colour --------------------------------------------------------------------------------

template <typename T>
__global__ void sh_forward_kernel(const T* coeffs, const T* dirs, int64_t C, int64_t N, int64_t K, int degree,
                                  T* colors) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= C * N) return;
  sh_to_color_forward<T>(degree, coeffs + (i % N) * K * 3, dirs + 3 * i, colors + 3 * i);
}

template <typename T>
__global__ void sh_backward_kernel(const T* v_colors, const T* coeffs, const T* dirs, int64_t C, int64_t N, int64_t K,
                                   int degree, T* v_coeffs, T* v_dirs) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= C * N) return;
  const int64_t n = i % N;
  T tmp[48] = {};
  T vd[3] = {0, 0, 0};
  sh_to_color_backward<T>(degree, coeffs + n * K * 3, dirs + 3 * i, v_colors + 3 * i, tmp, vd);
  const int k = (degree + 1) * (degree + 1);
  for (int j = 0; j < 3 * k; ++j) atomicAdd(v_coeffs + n * K * 3 + j, tmp[j]);
  for (int a = 0; a < 3; ++a) v_dirs[3 * i + a] = vd[a];
}

// ---- 3. tile intersection ---------------------------------------------------------------------------

template <typename T>
__device__ __forceinline__ void tile_box(const T* means2d, const int32_t* radii, int64_t i, int64_t tile_size,
                                         int64_t tile_width, int64_t tile_height, int32_t* box) {
  box[0] = box[1] = box[2] = box[3] = 0;
  if (radii[i] <= 0) return;
  const T rad = T(radii[i]), ts = T(tile_size);
  const T fx0 = floor((means2d[2 * i] - rad) / ts), fy0 = floor((means2d[2 * i + 1] - rad) / ts);
  const T fx1 = ceil((means2d[2 * i] + rad) / ts), fy1 = ceil((means2d[2 * i + 1] + rad) / ts);
  const T tw = T(tile_width), th = T(tile_height);
  box[0] = static_cast<int32_t>(fx0 < T(0) ? T(0) : (fx0 > tw ? tw : fx0));
  box[1] = static_cast<int32_t>(fy0 < T(0) ? T(0) : (fy0 > th ? th : fy0));
  box[2] = static_cast<int32_t>(fx1 < T(0) ? T(0) : (fx1 > tw ? tw : fx1));
  box[3] = static_cast<int32_t>(fy1 < T(0) ? T(0) : (fy1 > th ? th : fy1));
}

template <typename T>
__global__ void isect_count_kernel(const T* means2d, const int32_t* radii, int64_t CN, int64_t tile_size,
                                   int64_t tile_width, int64_t tile_height, int32_t* tiles_per_gauss) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= CN) return;
  int32_t b[4];
  tile_box(means2d, radii, i, tile_size, tile_width, tile_height, b);
  tiles_per_gauss[i] = (b[2] - b[0]) * (b[3] - b[1]);
}

template <typename T>
__global__ void isect_fill_kernel(const T* means2d, const int32_t* radii, const T* depths, const int32_t* cum_counts,
                                  int64_t C, int64_t N, int64_t tile_size, int64_t tile_width, int64_t tile_height,
                                  int64_t* keys, int32_t* ids) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= C * N) return;
  int32_t b[4];
  tile_box(means2d, radii, i, tile_size, tile_width, tile_height, b);
  const int32_t count = (b[2] - b[0]) * (b[3] - b[1]);
  if (count == 0) return;
  int64_t k = cum_counts[i] - count;
  const float d = static_cast<float>(depths[i]);
  const int64_t dbits = static_cast<int64_t>(static_cast<uint32_t>(__float_as_int(d)));
  const int64_t base = (i / N) * tile_width * tile_height;
  for (int32_t ty = b[1]; ty < b[3]; ++ty) {
    for (int32_t tx = b[0]; tx < b[2]; ++tx, ++k) {
      keys[k] = ((base + ty * tile_width + tx) << 32) | dbits;
      ids[k] = static_cast<int32_t>(i);
    }
  }
}

__global__ void isect_tile_offsets_kernel(const int64_t* keys, int64_t M, int64_t num_tiles, int32_t* offsets) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= num_tiles) return;
  const int64_t target = t << 32;  // first key of tile t: lower bound
  int64_t lo = 0, hi = M;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (keys[mid] < target) lo = mid + 1; else hi = mid;
  }
  offsets[t] = static_cast<int32_t>(lo);
}

// ---- 4. rasterization -------------------------------------------------------------------------------

template <typename T>
struct Staged {
  int32_t id[kBatch];
  T mx[kBatch], my[kBatch], ca[kBatch], cb[kBatch], cc[kBatch], op[kBatch];
};

template <typename T>
__device__ __forceinline__ void stage(Staged<T>& s, int slot, int64_t gid, const T* means2d, const T* conics,
                                      const T* opacities) {
  s.id[slot] = static_cast<int32_t>(gid);
  s.mx[slot] = means2d[2 * gid];
  s.my[slot] = means2d[2 * gid + 1];
  s.ca[slot] = conics[3 * gid];
  s.cb[slot] = conics[3 * gid + 1];
  s.cc[slot] = conics[3 * gid + 2];
  s.op[slot] = opacities[gid];
}

// The pixel of thread threadIdx.x in block blockIdx.x: blocks run over (tile, part of the tile); a
// part is blockDim.x consecutive pixels of the tile in row-major order.
struct RasterPixel {
  int64_t tile, c, x, y;
  bool inside;
};

__device__ __forceinline__ RasterPixel raster_pixel(int64_t width, int64_t height, int64_t tile_size,
                                                    int64_t tile_width, int64_t tile_height, int64_t parts) {
  RasterPixel r;
  const int64_t ntiles = tile_width * tile_height;
  r.tile = static_cast<int64_t>(blockIdx.x) / parts;
  const int64_t part = static_cast<int64_t>(blockIdx.x) % parts;
  r.c = r.tile / ntiles;
  const int64_t tt = r.tile % ntiles, ty = tt / tile_width, tx = tt % tile_width;
  const int64_t p = part * blockDim.x + threadIdx.x;  // pixel index within the tile
  r.x = tx * tile_size + p % tile_size;
  r.y = ty * tile_size + p / tile_size;
  r.inside = p < tile_size * tile_size && r.x < width && r.y < height;
  return r;
}

// Composites channels [ch0, ch0 + nch) of colors [C,N,D] (nch <= kChannelChunk); the pass with
// ch0 == 0 also writes alphas, transmittances and last contributors.
template <typename T>
__global__ void __launch_bounds__(kRasterMaxThreads) rasterize_forward_kernel(
    const T* means2d, const T* conics, const T* colors, const T* opacities, int64_t C, int64_t D, int64_t ch0,
    int nch, int64_t width, int64_t height, int64_t tile_size, int64_t tile_width, int64_t tile_height, int64_t parts,
    const int32_t* tile_offsets, const int32_t* flatten_ids, int64_t M, T* out_colors, T* out_alphas, T* out_trans,
    int32_t* out_last) {
  __shared__ Staged<T> sh;
  const RasterPixel rp = raster_pixel(width, height, tile_size, tile_width, tile_height, parts);
  const int64_t tile = rp.tile, c = rp.c, x = rp.x, y = rp.y;
  const bool inside = rp.inside;
  const int j = threadIdx.x;
  const T px = T(x) + T(0.5), py = T(y) + T(0.5);
  const int64_t start = tile_offsets[tile];
  const int64_t end = tile + 1 < C * tile_width * tile_height ? tile_offsets[tile + 1] : M;
  T Tr = T(1);
  bool done = !inside;
  int32_t last = -1;
  T acc[kChannelChunk];
  for (int ch = 0; ch < nch; ++ch) acc[ch] = T(0);
  for (int64_t b = start; b < end; b += kBatch) {
    if (__syncthreads_count(done ? 1 : 0) == static_cast<int>(blockDim.x)) break;
    for (int slot = j; slot < kBatch && b + slot < end; slot += blockDim.x)
      stage(sh, slot, flatten_ids[b + slot], means2d, conics, opacities);
    __syncthreads();
    const int n = static_cast<int>(end - b < kBatch ? end - b : kBatch);
    for (int q = 0; q < n && !done; ++q) {
      const T dx = sh.mx[q] - px, dy = sh.my[q] - py;
      const T sg = blend_sigma(dx, dy, sh.ca[q], sh.cb[q], sh.cc[q]);
      if (sg < T(0)) continue;
      T a = sh.op[q] * exp_neg(sg);
      a = a < T(kAlphaMax) ? a : T(kAlphaMax);
      if (a < T(kAlphaMin)) continue;
      const T nT = Tr * (T(1) - a);
      if (nT <= T(kTransmittanceMin)) {
        done = true;
        break;
      }
      const T w = a * Tr;
      const T* col = colors + static_cast<int64_t>(sh.id[q]) * D + ch0;
      for (int ch = 0; ch < nch; ++ch) acc[ch] += w * col[ch];
      Tr = nT;
      last = static_cast<int32_t>(b + q);
    }
    __syncthreads();
  }
  if (!inside) return;
  const int64_t pix = (c * height + y) * width + x;
  for (int ch = 0; ch < nch; ++ch) out_colors[pix * D + ch0 + ch] = acc[ch];
  if (ch0 != 0) return;
  out_alphas[pix] = T(1) - Tr;
  out_trans[pix] = Tr;
  out_last[pix] = last;
}

// Gradients through channels [ch0, ch0 + nch) of the colours (nch <= kChannelChunk). dL/dalpha is a
// sum over channels plus the alpha output's term, and the alpha VJP is linear in it, so each pass adds
// its channels' share (the ch0 == 0 pass adds the alpha output's term too).
template <typename T>
__global__ void __launch_bounds__(kRasterMaxThreads) rasterize_backward_kernel(
    const T* means2d, const T* conics, const T* colors, const T* opacities, int64_t C, int64_t D, int64_t ch0,
    int nch, int64_t width, int64_t height, int64_t tile_size, int64_t tile_width, int64_t tile_height, int64_t parts,
    const int32_t* tile_offsets, const int32_t* flatten_ids, const T* trans, const int32_t* last_ids,
    const T* v_colors, const T* v_alphas, T* v_means2d, T* v_conics, T* v_colors_out, T* v_opacities) {
  __shared__ Staged<T> sh;
  __shared__ int32_t max_last;
  const RasterPixel rp = raster_pixel(width, height, tile_size, tile_width, tile_height, parts);
  const int64_t tile = rp.tile, c = rp.c, x = rp.x, y = rp.y;
  const bool inside = rp.inside;
  const int j = threadIdx.x;
  const int lane = j & 31;
  const T px = T(x) + T(0.5), py = T(y) + T(0.5);
  const int64_t pix = (c * height + y) * width + x;
  const T Tf = inside ? trans[pix] : T(1);
  const int32_t last = inside ? last_ids[pix] : -1;
  const T va = inside && ch0 == 0 ? v_alphas[pix] : T(0);
  T vr[kChannelChunk], buf[kChannelChunk];
  for (int ch = 0; ch < nch; ++ch) {
    vr[ch] = inside ? v_colors[pix * D + ch0 + ch] : T(0);
    buf[ch] = T(0);
  }
  if (j == 0) max_last = -1;
  __syncthreads();
  atomicMax(&max_last, last);
  __syncthreads();
  const int64_t start = tile_offsets[tile];
  T Tr = Tf;
  for (int64_t bend = static_cast<int64_t>(max_last) + 1; bend > start; bend -= kBatch) {
    const int64_t bstart = bend - kBatch > start ? bend - kBatch : start;
    const int n = static_cast<int>(bend - bstart);
    __syncthreads();
    for (int slot = j; slot < n; slot += blockDim.x)
      stage(sh, slot, flatten_ids[bend - 1 - slot], means2d, conics, opacities);  // slot 0 = back-most
    __syncthreads();
    for (int q = 0; q < n; ++q) {
      const int64_t k = bend - 1 - q;
      const T dx = sh.mx[q] - px, dy = sh.my[q] - py;
      const T ca = sh.ca[q], cb = sh.cb[q], cc = sh.cc[q], op = sh.op[q];
      const T sg = blend_sigma(dx, dy, ca, cb, cc);
      const T vis = exp_neg(sg > T(0) ? sg : T(0));
      T a = op * vis;
      const bool clamped = a >= T(kAlphaMax);
      a = clamped ? T(kAlphaMax) : a;
      const bool valid = inside && k <= last && sg >= T(0) && a >= T(kAlphaMin);
      if (!__any_sync(0xffffffffu, valid)) continue;
      T vmx = 0, vmy = 0, vca = 0, vcb = 0, vcc = 0, vop = 0;
      const T* col = colors + static_cast<int64_t>(sh.id[q]) * D + ch0;
      T fac = 0;
      if (valid) {
        const T ra = T(1) / (T(1) - a);
        Tr = Tr * ra;
        fac = a * Tr;
        T v_alpha = Tf * ra * va;  // va is 0 in the passes with ch0 > 0
        for (int ch = 0; ch < nch; ++ch) {
          v_alpha += (col[ch] * Tr - buf[ch] * ra) * vr[ch];
          buf[ch] += col[ch] * fac;
        }
        if (!clamped) blend_alpha_vjp(dx, dy, ca, cb, cc, op, vis, v_alpha, vmx, vmy, vca, vcb, vcc, vop);
      }
      const int64_t gid = sh.id[q];
      for (int ch = 0; ch < nch; ++ch) {
        const T v = warp_sum(valid ? fac * vr[ch] : T(0));
        if (lane == 0) atomicAdd(v_colors_out + gid * D + ch0 + ch, v);
      }
      vmx = warp_sum(vmx);
      vmy = warp_sum(vmy);
      vca = warp_sum(vca);
      vcb = warp_sum(vcb);
      vcc = warp_sum(vcc);
      vop = warp_sum(vop);
      if (lane == 0) {
        atomicAdd(v_means2d + 2 * gid, vmx);
        atomicAdd(v_means2d + 2 * gid + 1, vmy);
        atomicAdd(v_conics + 3 * gid, vca);
        atomicAdd(v_conics + 3 * gid + 1, vcb);
        atomicAdd(v_conics + 3 * gid + 2, vcc);
        atomicAdd(v_opacities + gid, vop);
      }
    }
  }
}

}  // namespace

// ---- launchers --------------------------------------------------------------------------------------

template <typename T>
void project_forward(const T* means, const T* quats, const T* scales, const T* viewmats, const T* Ks, int64_t C,
                     int64_t N, int64_t width, int64_t height, T eps2d, T near_plane, T far_plane, int32_t* radii,
                     T* means2d, T* depths, T* conics, T* comps, cudaStream_t stream) {
  if (C * N == 0) return;
  project_forward_kernel<T><<<blocks_for(C * N), kThreads, 0, stream>>>(
      means, quats, scales, viewmats, Ks, C, N, width, height, eps2d, near_plane, far_plane, radii, means2d, depths,
      conics, comps);
}

template <typename T>
void project_backward(const T* means, const T* quats, const T* scales, const T* viewmats, const T* Ks, int64_t C,
                      int64_t N, int64_t width, int64_t height, T eps2d, T near_plane, T far_plane,
                      const int32_t* radii, const T* v_means2d, const T* v_depths, const T* v_conics,
                      const T* v_comps, T* v_means, T* v_quats, T* v_scales, T* v_viewmats, cudaStream_t stream) {
  if (C * N == 0) return;
  project_backward_kernel<T><<<blocks_for(C * N), kThreads, 0, stream>>>(
      means, quats, scales, viewmats, Ks, C, N, width, height, eps2d, near_plane, far_plane, radii, v_means2d,
      v_depths, v_conics, v_comps, v_means, v_quats, v_scales, v_viewmats);
}

template <typename T>
void sh_forward(const T* coeffs, const T* dirs, int64_t C, int64_t N, int64_t K, int degree, T* colors,
                cudaStream_t stream) {
  if (C * N == 0) return;
  sh_forward_kernel<T><<<blocks_for(C * N), kThreads, 0, stream>>>(coeffs, dirs, C, N, K, degree, colors);
}

template <typename T>
void sh_backward(const T* v_colors, const T* coeffs, const T* dirs, int64_t C, int64_t N, int64_t K, int degree,
                 T* v_coeffs, T* v_dirs, cudaStream_t stream) {
  if (C * N == 0) return;
  sh_backward_kernel<T><<<blocks_for(C * N), kThreads, 0, stream>>>(v_colors, coeffs, dirs, C, N, K, degree,
                                                                     v_coeffs, v_dirs);
}

template <typename T>
void isect_count(const T* means2d, const int32_t* radii, int64_t CN, int64_t tile_size, int64_t tile_width,
                 int64_t tile_height, int32_t* tiles_per_gauss, cudaStream_t stream) {
  if (CN == 0) return;
  isect_count_kernel<T><<<blocks_for(CN), kThreads, 0, stream>>>(means2d, radii, CN, tile_size, tile_width,
                                                                 tile_height, tiles_per_gauss);
}

size_t isect_scan_temp_bytes(int64_t CN) {
  size_t bytes = 0;
  cub::DeviceScan::InclusiveSum(nullptr, bytes, static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
                                static_cast<int>(CN));
  return bytes;
}

void isect_scan(const int32_t* counts, int32_t* cum_counts, int64_t CN, void* temp, size_t temp_bytes,
                cudaStream_t stream) {
  if (CN == 0) return;
  cub::DeviceScan::InclusiveSum(temp, temp_bytes, counts, cum_counts, static_cast<int>(CN), stream);
}

template <typename T>
void isect_fill(const T* means2d, const int32_t* radii, const T* depths, const int32_t* cum_counts, int64_t C,
                int64_t N, int64_t tile_size, int64_t tile_width, int64_t tile_height, int64_t* keys, int32_t* ids,
                cudaStream_t stream) {
  if (C * N == 0) return;
  isect_fill_kernel<T><<<blocks_for(C * N), kThreads, 0, stream>>>(means2d, radii, depths, cum_counts, C, N,
                                                                   tile_size, tile_width, tile_height, keys, ids);
}

size_t isect_sort_temp_bytes(int64_t M) {
  size_t bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const unsigned long long*>(nullptr),
                                  static_cast<unsigned long long*>(nullptr), static_cast<const int32_t*>(nullptr),
                                  static_cast<int32_t*>(nullptr), static_cast<int>(M));
  return bytes;
}

void isect_sort(const int64_t* keys_in, const int32_t* ids_in, int64_t* keys_out, int32_t* ids_out, int64_t M,
                int end_bit, void* temp, size_t temp_bytes, cudaStream_t stream) {
  if (M == 0) return;
  // keys are non-negative: sorting their bits as unsigned gives the signed order
  cub::DeviceRadixSort::SortPairs(temp, temp_bytes, reinterpret_cast<const unsigned long long*>(keys_in),
                                  reinterpret_cast<unsigned long long*>(keys_out), ids_in, ids_out,
                                  static_cast<int>(M), 0, end_bit, stream);
}

void isect_tile_offsets(const int64_t* sorted_keys, int64_t M, int64_t num_tiles, int32_t* tile_offsets,
                        cudaStream_t stream) {
  if (num_tiles == 0) return;
  isect_tile_offsets_kernel<<<blocks_for(num_tiles), kThreads, 0, stream>>>(sorted_keys, M, num_tiles,
                                                                             tile_offsets);
}

template <typename T>
void rasterize_forward(const T* means2d, const T* conics, const T* colors, const T* opacities, int64_t C, int64_t N,
                       int64_t D, int64_t width, int64_t height, int64_t tile_size, const int32_t* tile_offsets,
                       const int32_t* flatten_ids, int64_t M, T* out_colors, T* out_alphas, T* out_trans,
                       int32_t* out_last, cudaStream_t stream) {
  (void)N;
  const int64_t tw = (width + tile_size - 1) / tile_size, th = (height + tile_size - 1) / tile_size;
  const int64_t blocks = raster_blocks(C, width, height, tile_size);
  if (blocks == 0) return;
  const auto threads = static_cast<unsigned int>(raster_threads(tile_size));
  for (int64_t ch0 = 0; ch0 < D; ch0 += kChannelChunk) {
    const int nch = static_cast<int>(D - ch0 < kChannelChunk ? D - ch0 : kChannelChunk);
    rasterize_forward_kernel<T><<<static_cast<unsigned int>(blocks), threads, 0, stream>>>(
        means2d, conics, colors, opacities, C, D, ch0, nch, width, height, tile_size, tw, th,
        raster_parts(tile_size), tile_offsets, flatten_ids, M, out_colors, out_alphas, out_trans, out_last);
  }
}

template <typename T>
void rasterize_backward(const T* means2d, const T* conics, const T* colors, const T* opacities, int64_t C, int64_t N,
                        int64_t D, int64_t width, int64_t height, int64_t tile_size, const int32_t* tile_offsets,
                        const int32_t* flatten_ids, int64_t M, const T* trans, const int32_t* last_ids,
                        const T* v_colors, const T* v_alphas, T* v_means2d, T* v_conics, T* v_colors_out,
                        T* v_opacities, cudaStream_t stream) {
  (void)N;
  (void)M;
  const int64_t tw = (width + tile_size - 1) / tile_size, th = (height + tile_size - 1) / tile_size;
  const int64_t blocks = raster_blocks(C, width, height, tile_size);
  if (blocks == 0) return;
  const auto threads = static_cast<unsigned int>(raster_threads(tile_size));
  for (int64_t ch0 = 0; ch0 < D; ch0 += kChannelChunk) {
    const int nch = static_cast<int>(D - ch0 < kChannelChunk ? D - ch0 : kChannelChunk);
    rasterize_backward_kernel<T><<<static_cast<unsigned int>(blocks), threads, 0, stream>>>(
        means2d, conics, colors, opacities, C, D, ch0, nch, width, height, tile_size, tw, th,
        raster_parts(tile_size), tile_offsets, flatten_ids, trans, last_ids, v_colors, v_alphas, v_means2d,
        v_conics, v_colors_out, v_opacities);
  }
}

#define GSW_SPLAT_INSTANTIATE(T)                                                                                   \
  template void project_forward<T>(const T*, const T*, const T*, const T*, const T*, int64_t, int64_t, int64_t,   \
                                   int64_t, T, T, T, int32_t*, T*, T*, T*, T*, cudaStream_t);                     \
  template void project_backward<T>(const T*, const T*, const T*, const T*, const T*, int64_t, int64_t, int64_t,  \
                                    int64_t, T, T, T, const int32_t*, const T*, const T*, const T*, const T*, T*, \
                                    T*, T*, T*, cudaStream_t);                                                    \
  template void sh_forward<T>(const T*, const T*, int64_t, int64_t, int64_t, int, T*, cudaStream_t);              \
  template void sh_backward<T>(const T*, const T*, const T*, int64_t, int64_t, int64_t, int, T*, T*,              \
                               cudaStream_t);                                                                     \
  template void isect_count<T>(const T*, const int32_t*, int64_t, int64_t, int64_t, int64_t, int32_t*,            \
                               cudaStream_t);                                                                     \
  template void isect_fill<T>(const T*, const int32_t*, const T*, const int32_t*, int64_t, int64_t, int64_t,      \
                              int64_t, int64_t, int64_t*, int32_t*, cudaStream_t);                                \
  template void rasterize_forward<T>(const T*, const T*, const T*, const T*, int64_t, int64_t, int64_t, int64_t,  \
                                     int64_t, int64_t, const int32_t*, const int32_t*, int64_t, T*, T*, T*,       \
                                     int32_t*, cudaStream_t);                                                     \
  template void rasterize_backward<T>(const T*, const T*, const T*, const T*, int64_t, int64_t, int64_t, int64_t, \
                                      int64_t, int64_t, const int32_t*, const int32_t*, int64_t, const T*,        \
                                      const int32_t*, const T*, const T*, T*, T*, T*, T*, cudaStream_t);

GSW_SPLAT_INSTANTIATE(float)
GSW_SPLAT_INSTANTIATE(double)

}  // namespace cuda
}  // namespace splat
}  // namespace gsw
