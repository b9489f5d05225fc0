// CUDA launchers of the 3DGS tile rasterizer (kernels in splat_*.cu). Raw device pointers, contiguous
// row-major layouts as documented in csrc/gsworkbench.cpp; the projection and rasterization launchers
// take one parameter struct each (gsw/splat_params.h). Every launcher enqueues on `stream` and does not
// synchronise. Outputs written by atomics (the *_backward gradients) must be zeroed first.
// T is float or double.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "gsw/splat_params.h"

namespace gsw {
namespace splat {
namespace cuda {

// Launch shape of the rasterization kernels, for any tile size and channel count D: one thread per
// pixel; a tile of tile_size^2 pixels runs as raster_parts(tile_size) blocks of raster_threads(tile_size)
// threads (whole warps, at most kRasterMaxThreads), each block compositing its part of the tile from the
// tile's whole Gaussian list. Colour channels are composited kChannelChunk at a time (one pass over
// the tile's list per chunk; one pass for D <= kChannelChunk). The kernels are compiled for blocks of
// at most kRasterMaxThreads (__launch_bounds__), so every tile size launches on every GPU whatever the
// kernels' register use (1024-thread blocks would cap it at 64 registers a thread); a 16x16 tile is one
// block, a 32x32 tile four.
constexpr int kRasterMaxThreads = 256;
constexpr int kChannelChunk = 32;

inline int64_t raster_threads(int64_t tile_size) {
  const int64_t pixels = tile_size * tile_size;
  const int64_t t = pixels < kRasterMaxThreads ? pixels : kRasterMaxThreads;
  return (t + 31) / 32 * 32;
}

inline int64_t raster_parts(int64_t tile_size) {
  return (tile_size * tile_size + raster_threads(tile_size) - 1) / raster_threads(tile_size);
}

// Blocks of one rasterization launch for C images of width x height (INT64_MAX for absurd tile sizes).
inline int64_t raster_blocks(int64_t C, int64_t width, int64_t height, int64_t tile_size) {
  if (tile_size < 1 || tile_size > (int64_t(1) << 16)) return INT64_MAX;
  const int64_t tw = (width + tile_size - 1) / tile_size, th = (height + tile_size - 1) / tile_size;
  return C * tw * th * raster_parts(tile_size);
}

template <typename T>
void project_forward(const ProjectForwardParams<T>& p, cudaStream_t stream);

template <typename T>
void project_backward(const ProjectBackwardParams<T>& p, cudaStream_t stream);

template <typename T>
void sh_forward(const T* coeffs, const T* dirs, int64_t C, int64_t N, int64_t K, int degree, T* colors,
                cudaStream_t stream);

template <typename T>
void sh_backward(const T* v_colors, const T* coeffs, const T* dirs, int64_t C, int64_t N, int64_t K, int degree,
                 T* v_coeffs, T* v_dirs, cudaStream_t stream);

// Tile intersection in four steps: counts per Gaussian, inclusive scan of the counts (the caller
// reads the total M), fill of unsorted (key, id) pairs, radix sort, tile offsets. conics and
// opacities: both null (every tile of the 3-sigma box) or both set (the box cut to the alpha
// support, gsw/tile_cover.h).
template <typename T>
void isect_count(const T* means2d, const int32_t* radii, const T* conics, const T* opacities, int64_t CN,
                 int64_t tile_size, int64_t tile_width, int64_t tile_height, int32_t* tiles_per_gauss,
                 cudaStream_t stream);

size_t isect_scan_temp_bytes(int64_t CN);
void isect_scan(const int32_t* counts, int32_t* cum_counts, int64_t CN, void* temp, size_t temp_bytes,
                cudaStream_t stream);

template <typename T>
void isect_fill(const T* means2d, const int32_t* radii, const T* conics, const T* opacities, const T* depths,
                const int32_t* cum_counts, int64_t C, int64_t N, int64_t tile_size, int64_t tile_width,
                int64_t tile_height, int64_t* keys, int32_t* ids, cudaStream_t stream);

size_t isect_sort_temp_bytes(int64_t M);
void isect_sort(const int64_t* keys_in, const int32_t* ids_in, int64_t* keys_out, int32_t* ids_out, int64_t M,
                int end_bit, void* temp, size_t temp_bytes, cudaStream_t stream);

void isect_tile_offsets(const int64_t* sorted_keys, int64_t M, int64_t num_tiles, int32_t* tile_offsets,
                        cudaStream_t stream);

template <typename T>
void rasterize_forward(const RasterForwardParams<T>& p, cudaStream_t stream);

template <typename T>
void rasterize_backward(const RasterBackwardParams<T>& p, cudaStream_t stream);

}  // namespace cuda
}  // namespace splat
}  // namespace gsw
