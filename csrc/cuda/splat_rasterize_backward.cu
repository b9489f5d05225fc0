// CUDA kernels of the 3DGS tile rasterizer, stage 5: rasterization backward. Same grid and shared-memory
// staging as the forward (splat_rasterize.cuh); each pixel walks its tile back to front from its last
// contributor, and the per-Gaussian gradients are reduced over each warp before one atomic add per warp.
// With absgrad, the per-pixel |v_means2d| are summed the same way (one channel pass: see the binding).
// The per-pixel math is gsw/blend.h, shared with the CPU kernels (csrc/cpu/splat_rasterize_backward.cpp).
#include "common.cuh"
#include "gsw/blend.h"
#include "splat.h"
#include "splat_rasterize.cuh"

namespace gsw {
namespace splat {
namespace cuda {
namespace {

// Gradients through channels [ch0, ch0 + nch) of the colours (pass.nch <= kChannelChunk). dL/dalpha is
// a sum over channels plus the alpha output's term, and the alpha VJP is linear in it, so each pass adds
// its channels' share (the ch0 == 0 pass adds the alpha output's term too).
template <typename T>
__global__ void __launch_bounds__(kRasterMaxThreads)
    rasterize_backward_kernel(const RasterBackwardParams<T> p, const RasterPass pass) {
  __shared__ Staged<T> sh;
  __shared__ int32_t max_last;
  const RasterInputs<T>& in = p.in;
  const int64_t D = in.D, ch0 = pass.ch0;
  const int nch = pass.nch;
  const RasterPixel rp = raster_pixel(in, pass);
  const int64_t tile = rp.tile, c = rp.c, x = rp.x, y = rp.y;
  const bool inside = rp.inside;
  const int j = threadIdx.x;
  const int lane = j & 31;
  const T px = T(x) + T(0.5), py = T(y) + T(0.5);
  const int64_t pix = (c * in.height + y) * in.width + x;
  const T Tf = inside ? p.trans[pix] : T(1);
  const int32_t last = inside ? p.last_ids[pix] : -1;
  const T va = inside && ch0 == 0 ? p.v_out_alphas[pix] : T(0);
  T vr[kChannelChunk], buf[kChannelChunk];
  for (int ch = 0; ch < nch; ++ch) {
    vr[ch] = inside ? p.v_out_colors[pix * D + ch0 + ch] : T(0);
    buf[ch] = T(0);
  }
  if (j == 0) max_last = -1;
  __syncthreads();
  atomicMax(&max_last, last);
  __syncthreads();
  const int64_t start = in.tile_offsets[tile];
  T Tr = Tf;
  for (int64_t bend = static_cast<int64_t>(max_last) + 1; bend > start; bend -= kBatch) {
    const int64_t bstart = bend - kBatch > start ? bend - kBatch : start;
    const int n = static_cast<int>(bend - bstart);
    __syncthreads();
    for (int slot = j; slot < n; slot += blockDim.x)
      stage(sh, slot, in.flatten_ids[bend - 1 - slot], in);  // slot 0 = back-most
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
      const T* col = in.colors + static_cast<int64_t>(sh.id[q]) * D + ch0;
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
        if (lane == 0) atomicAdd(p.v_colors + gid * D + ch0 + ch, v);
      }
      if (p.v_means2d_abs != nullptr) {  // the same for every thread: the shuffles stay warp-wide
        const T ax = warp_sum(vmx < T(0) ? -vmx : vmx), ay = warp_sum(vmy < T(0) ? -vmy : vmy);
        if (lane == 0) {
          atomicAdd(p.v_means2d_abs + 2 * gid, ax);
          atomicAdd(p.v_means2d_abs + 2 * gid + 1, ay);
        }
      }
      vmx = warp_sum(vmx);
      vmy = warp_sum(vmy);
      vca = warp_sum(vca);
      vcb = warp_sum(vcb);
      vcc = warp_sum(vcc);
      vop = warp_sum(vop);
      if (lane == 0) {
        atomicAdd(p.v_means2d + 2 * gid, vmx);
        atomicAdd(p.v_means2d + 2 * gid + 1, vmy);
        atomicAdd(p.v_conics + 3 * gid, vca);
        atomicAdd(p.v_conics + 3 * gid + 1, vcb);
        atomicAdd(p.v_conics + 3 * gid + 2, vcc);
        atomicAdd(p.v_opacities + gid, vop);
      }
    }
  }
}

}  // namespace

// ---- launchers --------------------------------------------------------------------------------------

template <typename T>
void rasterize_backward(const RasterBackwardParams<T>& p, cudaStream_t stream) {
  const RasterInputs<T>& in = p.in;
  const int64_t blocks = raster_blocks(in.C, in.width, in.height, in.tile_size);
  if (blocks == 0) return;
  const auto threads = static_cast<unsigned int>(raster_threads(in.tile_size));
  for (int64_t ch0 = 0; ch0 < in.D; ch0 += kChannelChunk)
    rasterize_backward_kernel<T><<<static_cast<unsigned int>(blocks), threads, 0, stream>>>(p, raster_pass(in, ch0));
}

template void rasterize_backward<float>(const RasterBackwardParams<float>&, cudaStream_t);
template void rasterize_backward<double>(const RasterBackwardParams<double>&, cudaStream_t);

}  // namespace cuda
}  // namespace splat
}  // namespace gsw
