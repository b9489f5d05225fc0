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

// Composites channels [ch0, ch0 + nch) of colors [C,N,D] (pass.nch <= kChannelChunk); the pass with
// ch0 == 0 also writes alphas, transmittances and last contributors.
template <typename T>
__global__ void __launch_bounds__(kRasterMaxThreads)
    rasterize_forward_kernel(const RasterForwardParams<T> p, const RasterPass pass) {
  __shared__ Staged<T> sh;
  const RasterInputs<T>& in = p.in;
  const int64_t D = in.D, ch0 = pass.ch0;
  const int nch = pass.nch;
  const RasterPixel rp = raster_pixel(in, pass);
  const int64_t tile = rp.tile, c = rp.c, x = rp.x, y = rp.y;
  const bool inside = rp.inside;
  const int j = threadIdx.x;
  const T px = T(x) + T(0.5), py = T(y) + T(0.5);
  const int64_t start = in.tile_offsets[tile];
  const int64_t end = tile + 1 < in.C * pass.tile_width * pass.tile_height ? in.tile_offsets[tile + 1] : in.M;
  T Tr = T(1);
  bool done = !inside;
  int32_t last = -1;
  T acc[kChannelChunk];
  for (int ch = 0; ch < nch; ++ch) acc[ch] = T(0);
  for (int64_t b = start; b < end; b += kBatch) {
    if (__syncthreads_count(done ? 1 : 0) == static_cast<int>(blockDim.x)) break;
    for (int slot = j; slot < kBatch && b + slot < end; slot += blockDim.x)
      stage(sh, slot, in.flatten_ids[b + slot], in);
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
      const T* col = in.colors + static_cast<int64_t>(sh.id[q]) * D + ch0;
      for (int ch = 0; ch < nch; ++ch) acc[ch] += w * col[ch];
      Tr = nT;
      last = static_cast<int32_t>(b + q);
    }
    __syncthreads();
  }
  if (!inside) return;
  const int64_t pix = (c * in.height + y) * in.width + x;
  for (int ch = 0; ch < nch; ++ch) p.out_colors[pix * D + ch0 + ch] = acc[ch];
  if (ch0 != 0) return;
  p.out_alphas[pix] = T(1) - Tr;
  p.out_trans[pix] = Tr;
  p.out_last[pix] = last;
}

}  // namespace

// ---- launchers --------------------------------------------------------------------------------------

template <typename T>
void rasterize_forward(const RasterForwardParams<T>& p, cudaStream_t stream) {
  const RasterInputs<T>& in = p.in;
  const int64_t blocks = raster_blocks(in.C, in.width, in.height, in.tile_size);
  if (blocks == 0) return;
  const auto threads = static_cast<unsigned int>(raster_threads(in.tile_size));
  for (int64_t ch0 = 0; ch0 < in.D; ch0 += kChannelChunk)
    rasterize_forward_kernel<T><<<static_cast<unsigned int>(blocks), threads, 0, stream>>>(p, raster_pass(in, ch0));
}

template void rasterize_forward<float>(const RasterForwardParams<float>&, cudaStream_t);
template void rasterize_forward<double>(const RasterForwardParams<double>&, cudaStream_t);

}  // namespace cuda
}  // namespace splat
}  // namespace gsw
