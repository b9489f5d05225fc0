// CUDA kernels of the 3DGS tile rasterizer, stage 5: rasterization backward. Same grid and shared-memory
// staging as the forward (splat_rasterize.cuh); each pixel walks its tile back to front from its last
// contributor, and the per-Gaussian gradients are reduced over each warp before one atomic add per warp.
// The per-pixel math is gsw/blend.h, shared with the CPU kernels (csrc/cpu/splat_rasterize_backward.cpp).
#include "common.cuh"
#include "gsw/blend.h"
#include "splat.h"
#include "splat_rasterize.cuh"

namespace gsw {
namespace splat {
namespace cuda {
namespace {

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

#define GSW_SPLAT_RASTERIZE_BACKWARD_INSTANTIATE(T)                                                                \
  template void rasterize_backward<T>(const T*, const T*, const T*, const T*, int64_t, int64_t, int64_t, int64_t, \
                                      int64_t, int64_t, const int32_t*, const int32_t*, int64_t, const T*,        \
                                      const int32_t*, const T*, const T*, T*, T*, T*, T*, cudaStream_t);

GSW_SPLAT_RASTERIZE_BACKWARD_INSTANTIATE(float)
GSW_SPLAT_RASTERIZE_BACKWARD_INSTANTIATE(double)

}  // namespace cuda
}  // namespace splat
}  // namespace gsw
