// Shared by the CUDA rasterization kernels (splat_rasterize_forward.cu, splat_rasterize_backward.cu):
// the launch geometry of one pass, the batch of Gaussians staged in shared memory per round, and the
// pixel a thread composites. CUDA only (nvcc); no ATen headers.
#pragma once

#include <cstdint>

#include "gsw/splat_params.h"
#include "splat.h"

namespace gsw {
namespace splat {
namespace cuda {

constexpr int kBatch = 256;  // Gaussians staged in shared memory per round

template <typename T>
struct Staged {
  int32_t id[kBatch];
  T mx[kBatch], my[kBatch], ca[kBatch], cb[kBatch], cc[kBatch], op[kBatch];
};

template <typename T>
__device__ __forceinline__ void stage(Staged<T>& s, int slot, int64_t gid, const RasterInputs<T>& in) {
  s.id[slot] = static_cast<int32_t>(gid);
  s.mx[slot] = in.means2d[2 * gid];
  s.my[slot] = in.means2d[2 * gid + 1];
  s.ca[slot] = in.conics[3 * gid];
  s.cb[slot] = in.conics[3 * gid + 1];
  s.cc[slot] = in.conics[3 * gid + 2];
  s.op[slot] = in.opacities[gid];
}

// One launch of a rasterization kernel (the forward and the backward run one per channel chunk): the
// tile grid, the blocks per tile (raster_parts) and the channels [ch0, ch0 + nch) it composites,
// nch <= kChannelChunk. Derived by the launcher from the inputs, so the bindings fill in only those.
struct RasterPass {
  int64_t tile_width, tile_height, parts, ch0;
  int nch;
};

template <typename T>
inline RasterPass raster_pass(const RasterInputs<T>& in, int64_t ch0) {
  RasterPass r;
  r.tile_width = (in.width + in.tile_size - 1) / in.tile_size;
  r.tile_height = (in.height + in.tile_size - 1) / in.tile_size;
  r.parts = raster_parts(in.tile_size);
  r.ch0 = ch0;
  r.nch = static_cast<int>(in.D - ch0 < kChannelChunk ? in.D - ch0 : kChannelChunk);
  return r;
}

// The pixel of thread threadIdx.x in block blockIdx.x: blocks run over (tile, part of the tile); a
// part is blockDim.x consecutive pixels of the tile in row-major order.
struct RasterPixel {
  int64_t tile, c, x, y;
  bool inside;
};

template <typename T>
__device__ __forceinline__ RasterPixel raster_pixel(const RasterInputs<T>& in, const RasterPass& pass) {
  RasterPixel r;
  const int64_t ts = in.tile_size, ntiles = pass.tile_width * pass.tile_height;
  r.tile = static_cast<int64_t>(blockIdx.x) / pass.parts;
  const int64_t part = static_cast<int64_t>(blockIdx.x) % pass.parts;
  r.c = r.tile / ntiles;
  const int64_t tt = r.tile % ntiles, ty = tt / pass.tile_width, tx = tt % pass.tile_width;
  const int64_t p = part * blockDim.x + threadIdx.x;  // pixel index within the tile
  r.x = tx * ts + p % ts;
  r.y = ty * ts + p / ts;
  r.inside = p < ts * ts && r.x < in.width && r.y < in.height;
  return r;
}

}  // namespace cuda
}  // namespace splat
}  // namespace gsw
