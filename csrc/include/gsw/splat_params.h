// Parameter structs of the projection and rasterization kernels, the same for the CPU kernels
// (csrc/cpu/splat_project.cpp, splat_rasterize_*.cpp) and the CUDA launchers (csrc/cuda/splat.h), filled
// by the bindings from the op's tensors (gsw/splat_op.h). One plain struct of pointers and sizes per call
// instead of a score of positional arguments: a forward and its backward share their inputs as one
// member, so the two cannot disagree on their order, and each kernel receives its whole call as one
// parameter. Layouts are contiguous row-major as documented in csrc/gsworkbench.cpp. Plain C++ (no
// CUDA or ATen headers), so nvcc and the host compiler both read it. T is float or double.
#pragma once

#include <cstdint>

namespace gsw {
namespace splat {

// ---- stage 1: projection ----------------------------------------------------------------------------

// What the projection forward reads, and its backward again (it recomputes the forward per pair).
template <typename T>
struct ProjectInputs {
  const T* means;     // [N,3]
  const T* quats;     // [N,4], wxyz
  const T* scales;    // [N,3]
  const T* viewmats;  // [C,4,4]
  const T* Ks;        // [C,3,3]
  int64_t C, N;       // cameras, Gaussians
  int64_t width, height;
  T eps2d, near_plane, far_plane;
};

template <typename T>
struct ProjectForwardParams {
  ProjectInputs<T> in;
  int32_t* radii;  // [C,N]
  T* means2d;      // [C,N,2]
  T* depths;       // [C,N]
  T* conics;       // [C,N,3]
  T* comps;        // [C,N]
};

// The input gradients are added to (by atomics on CUDA): the caller zeroes them first.
template <typename T>
struct ProjectBackwardParams {
  ProjectInputs<T> in;
  const int32_t* radii;  // [C,N], the forward's
  const T* v_means2d;    // [C,N,2]: gradients of the forward's outputs
  const T* v_depths;     // [C,N]
  const T* v_conics;     // [C,N,3]
  const T* v_comps;      // [C,N]
  T* v_means;            // [N,3]: gradients of the inputs
  T* v_quats;            // [N,4]
  T* v_scales;           // [N,3]
  T* v_viewmats;         // [C,4,4]
};

// ---- stages 4 and 5: rasterization and its backward -------------------------------------------------

// What the rasterization forward reads, and its backward again.
template <typename T>
struct RasterInputs {
  const T* means2d;             // [C,N,2]
  const T* conics;              // [C,N,3]
  const T* colors;              // [C,N,D]
  const T* opacities;           // [C,N]
  const int32_t* tile_offsets;  // [C,th,tw]: each tile's first entry of flatten_ids
  const int32_t* flatten_ids;   // [M]: c*N + n, sorted by tile then depth
  int64_t C, N, D, M;           // cameras, Gaussians, channels, intersections
  int64_t width, height, tile_size;
};

template <typename T>
struct RasterForwardParams {
  RasterInputs<T> in;
  T* out_colors;      // [C,H,W,D]
  T* out_alphas;      // [C,H,W,1]
  T* out_trans;       // [C,H,W]: final transmittance
  int32_t* out_last;  // [C,H,W]: index into flatten_ids of the last contributor, -1 for none
};

// The input gradients are added by atomics on CUDA, so the CUDA caller zeroes them first; the CPU
// kernel writes them whole.
template <typename T>
struct RasterBackwardParams {
  RasterInputs<T> in;
  const T* trans;           // [C,H,W]: the forward's final transmittances
  const int32_t* last_ids;  // [C,H,W]: the forward's last contributors
  const T* v_out_colors;    // [C,H,W,D]: gradients of the forward's outputs
  const T* v_out_alphas;    // [C,H,W,1]
  T* v_means2d;             // [C,N,2]: gradients of the inputs
  T* v_conics;              // [C,N,3]
  T* v_colors;              // [C,N,D]
  T* v_opacities;           // [C,N]
  T* v_means2d_abs;         // [C,N,2]: sums over pixels of |per-pixel v_means2d| (absgrad), or null
};

// The sizes of one rasterization call with its tile grid: tw x th tiles of ts x ts pixels per image.
struct RasterDims {
  int64_t C, N, D, W, H, ts, tw, th, M;
};

inline RasterDims raster_dims(int64_t C, int64_t N, int64_t D, int64_t M, int64_t width, int64_t height,
                              int64_t tile_size) {
  return {C, N, D, width, height, tile_size, (width + tile_size - 1) / tile_size, (height + tile_size - 1) / tile_size,
          M};
}

template <typename T>
RasterDims raster_dims(const RasterInputs<T>& in) {
  return raster_dims(in.C, in.N, in.D, in.M, in.width, in.height, in.tile_size);
}

}  // namespace splat
}  // namespace gsw
