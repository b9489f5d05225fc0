// CUDA kernels of the 3DGS tile rasterizer, stage 4: rasterization forward (front-to-back alpha
// compositing). One thread per pixel, one block per tile (tiles of more than 256 pixels: several blocks,
// each a part of the tile walking the tile's whole list), Gaussians staged in shared memory in batches
// (splat_rasterize.cuh); colour channels kChannelChunk at a time (one launch per chunk). The per-pixel
// math is gsw/blend.h, shared with the CPU kernels (csrc/cpu/splat_rasterize_forward.cpp).
#include "common.cuh"
#include "gsw/blend.h"
#include "splat.h"
#include "splat_rasterize.cuh"

namespace gsw {
namespace splat {
namespace cuda {
namespace {

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

}  // namespace

// ---- launchers --------------------------------------------------------------------------------------

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

#define GSW_SPLAT_RASTERIZE_FORWARD_INSTANTIATE(T)                                                                 \
  template void rasterize_forward<T>(const T*, const T*, const T*, const T*, int64_t, int64_t, int64_t, int64_t,  \
                                     int64_t, int64_t, const int32_t*, const int32_t*, int64_t, T*, T*, T*,       \
                                     int32_t*, cudaStream_t);

GSW_SPLAT_RASTERIZE_FORWARD_INSTANTIATE(float)
GSW_SPLAT_RASTERIZE_FORWARD_INSTANTIATE(double)

}  // namespace cuda
}  // namespace splat
}  // namespace gsw
