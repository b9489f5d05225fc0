// CUDA kernels of the 3DGS tile rasterizer, stage 3: tile intersection. Counts of tiles per Gaussian
// (its 3-sigma box, cut with conics and opacities to its alpha support: gsw/tile_cover.h), a CUB
// inclusive scan, a fill of (tile << 32 | depth bits, id) pairs, a CUB radix sort and a binary
// search per tile for the tile offsets. The CPU twin is csrc/cpu/splat_isect.cpp.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "common.cuh"
#include "gsw/tile_cover.h"
#include "splat.h"

namespace gsw {
namespace splat {
namespace cuda {
namespace {

// conics and opacities: both null (the 3-sigma box) or both set (the box cut to the alpha support).
template <typename T>
__device__ __forceinline__ void tile_box(const T* means2d, const int32_t* radii, const T* conics, const T* opacities,
                                         int64_t i, int64_t tile_size, int64_t tile_width, int64_t tile_height,
                                         int32_t* box) {
  box[0] = box[1] = box[2] = box[3] = 0;
  // a non-finite 2D mean covers no tile (as on the CPU: no box from an undefined float-to-int cast)
  if (radii[i] <= 0 || !isfinite(means2d[2 * i]) || !isfinite(means2d[2 * i + 1])) return;
  const T rad = T(radii[i]), ts = T(tile_size);
  const T fx0 = floor((means2d[2 * i] - rad) / ts), fy0 = floor((means2d[2 * i + 1] - rad) / ts);
  const T fx1 = ceil((means2d[2 * i] + rad) / ts), fy1 = ceil((means2d[2 * i + 1] + rad) / ts);
  const T tw = T(tile_width), th = T(tile_height);
  box[0] = static_cast<int32_t>(fx0 < T(0) ? T(0) : (fx0 > tw ? tw : fx0));
  box[1] = static_cast<int32_t>(fy0 < T(0) ? T(0) : (fy0 > th ? th : fy0));
  box[2] = static_cast<int32_t>(fx1 < T(0) ? T(0) : (fx1 > tw ? tw : fx1));
  box[3] = static_cast<int32_t>(fy1 < T(0) ? T(0) : (fy1 > th ? th : fy1));
  if (conics != nullptr && box[0] < box[2] && box[1] < box[3]) {
    const T* co = conics + 3 * i;
    cut_box_to_support<T>(means2d[2 * i], means2d[2 * i + 1], co[0], co[1], co[2], opacities[i], tile_size, box[0], box[1],
                          box[2], box[3]);
  }
}

template <typename T>
__global__ void isect_count_kernel(const T* means2d, const int32_t* radii, const T* conics, const T* opacities,
                                   int64_t CN, int64_t tile_size, int64_t tile_width, int64_t tile_height,
                                   int32_t* tiles_per_gauss) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= CN) return;
  int32_t b[4];
  tile_box(means2d, radii, conics, opacities, i, tile_size, tile_width, tile_height, b);
  tiles_per_gauss[i] = (b[2] - b[0]) * (b[3] - b[1]);
}

template <typename T>
__global__ void isect_fill_kernel(const T* means2d, const int32_t* radii, const T* conics, const T* opacities,
                                  const T* depths, const int32_t* cum_counts, int64_t C, int64_t N, int64_t tile_size,
                                  int64_t tile_width, int64_t tile_height, int64_t* keys, int32_t* ids) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= C * N) return;
  int32_t b[4];
  tile_box(means2d, radii, conics, opacities, i, tile_size, tile_width, tile_height, b);
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

}  // namespace

// ---- launchers --------------------------------------------------------------------------------------

template <typename T>
void isect_count(const T* means2d, const int32_t* radii, const T* conics, const T* opacities, int64_t CN,
                 int64_t tile_size, int64_t tile_width, int64_t tile_height, int32_t* tiles_per_gauss,
                 cudaStream_t stream) {
  if (CN == 0) return;
  isect_count_kernel<T><<<blocks_for(CN), kThreads, 0, stream>>>(means2d, radii, conics, opacities, CN, tile_size,
                                                                 tile_width, tile_height, tiles_per_gauss);
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
void isect_fill(const T* means2d, const int32_t* radii, const T* conics, const T* opacities, const T* depths,
                const int32_t* cum_counts, int64_t C, int64_t N, int64_t tile_size, int64_t tile_width,
                int64_t tile_height, int64_t* keys, int32_t* ids, cudaStream_t stream) {
  if (C * N == 0) return;
  isect_fill_kernel<T><<<blocks_for(C * N), kThreads, 0, stream>>>(means2d, radii, conics, opacities, depths,
                                                                   cum_counts, C, N, tile_size, tile_width,
                                                                   tile_height, keys, ids);
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

#define GSW_SPLAT_ISECT_INSTANTIATE(T)                                                                             \
  template void isect_count<T>(const T*, const int32_t*, const T*, const T*, int64_t, int64_t, int64_t, int64_t, \
                               int32_t*, cudaStream_t);                                                           \
  template void isect_fill<T>(const T*, const int32_t*, const T*, const T*, const T*, const int32_t*, int64_t,    \
                              int64_t, int64_t, int64_t, int64_t, int64_t*, int32_t*, cudaStream_t);

GSW_SPLAT_ISECT_INSTANTIATE(float)
GSW_SPLAT_ISECT_INSTANTIATE(double)

}  // namespace cuda
}  // namespace splat
}  // namespace gsw
