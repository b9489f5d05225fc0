// CUDA kernels of the 3DGS tile rasterizer, stage 1: projection of the 3D Gaussians into each camera
// and its backward. One thread per (camera, Gaussian); the per-Gaussian math is gsw/projection.h, shared
// with the CPU kernels (csrc/cpu/splat_project.cpp). The backward adds the per-Gaussian gradients
// (summed over cameras) and the viewmat gradient with atomics.
#include "common.cuh"
#include "gsw/projection.h"
#include "splat.h"

namespace gsw {
namespace splat {
namespace cuda {
namespace {

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

#define GSW_SPLAT_PROJECT_INSTANTIATE(T)                                                                           \
  template void project_forward<T>(const T*, const T*, const T*, const T*, const T*, int64_t, int64_t, int64_t,   \
                                   int64_t, T, T, T, int32_t*, T*, T*, T*, T*, cudaStream_t);                     \
  template void project_backward<T>(const T*, const T*, const T*, const T*, const T*, int64_t, int64_t, int64_t,  \
                                    int64_t, T, T, T, const int32_t*, const T*, const T*, const T*, const T*, T*, \
                                    T*, T*, T*, cudaStream_t);

GSW_SPLAT_PROJECT_INSTANTIATE(float)
GSW_SPLAT_PROJECT_INSTANTIATE(double)

}  // namespace cuda
}  // namespace splat
}  // namespace gsw
