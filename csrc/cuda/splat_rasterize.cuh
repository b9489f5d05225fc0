// Shared by the CUDA rasterization kernels (splat_rasterize_forward.cu, splat_rasterize_backward.cu):
// the batch of Gaussians staged in shared memory per round, and the pixel a thread composites. CUDA only
// (nvcc); no ATen headers.
#pragma once

#include <cstdint>

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

}  // namespace cuda
}  // namespace splat
}  // namespace gsw
