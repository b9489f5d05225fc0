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
__global__ void project_forward_kernel(const ProjectForwardParams<T> p) {
  const ProjectInputs<T>& in = p.in;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= in.C * in.N) return;
  const int64_t c = i / in.N, n = i % in.N;
  const Camera<T> cam = load_camera(in.viewmats + 16 * c, in.Ks + 9 * c);
  Projected<T> o;
  const bool ok = project_forward<T>(in.means + 3 * n, in.quats + 4 * n, in.scales + 3 * n, cam, in.width, in.height,
                                     in.eps2d, in.near_plane, in.far_plane, o);
  store_projected(ok, o, i, p.radii, p.means2d, p.depths, p.conics, p.comps);
}

template <typename T>
__global__ void project_backward_kernel(const ProjectBackwardParams<T> p) {
  const ProjectInputs<T>& in = p.in;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= in.C * in.N || p.radii[i] <= 0) return;
  const int64_t c = i / in.N, n = i % in.N;
  const Camera<T> cam = load_camera(in.viewmats + 16 * c, in.Ks + 9 * c);
  const T *mean = in.means + 3 * n, *quat = in.quats + 4 * n, *scale = in.scales + 3 * n;
  Projected<T> o;
  if (!project_forward<T>(mean, quat, scale, cam, in.width, in.height, in.eps2d, in.near_plane, in.far_plane, o))
    return;
  T vm[3] = {0, 0, 0}, vq[4] = {0, 0, 0, 0}, vs[3] = {0, 0, 0};
  T vW[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0}, vt[3] = {0, 0, 0};
  project_backward<T>(mean, quat, scale, cam, in.eps2d, o, p.v_means2d + 2 * i, p.v_depths[i], p.v_conics + 3 * i,
                      p.v_comps[i], vm, vq, vs, vW, vt);
  for (int k = 0; k < 3; ++k) atomicAdd(p.v_means + 3 * n + k, vm[k]);
  for (int k = 0; k < 4; ++k) atomicAdd(p.v_quats + 4 * n + k, vq[k]);
  for (int k = 0; k < 3; ++k) atomicAdd(p.v_scales + 3 * n + k, vs[k]);
  for (int r = 0; r < 3; ++r) {
    for (int k = 0; k < 3; ++k) atomicAdd(p.v_viewmats + 16 * c + 4 * r + k, vW[3 * r + k]);
    atomicAdd(p.v_viewmats + 16 * c + 4 * r + 3, vt[r]);
  }
}

}  // namespace

// ---- launchers --------------------------------------------------------------------------------------

template <typename T>
void project_forward(const ProjectForwardParams<T>& p, cudaStream_t stream) {
  const int64_t CN = p.in.C * p.in.N;
  if (CN == 0) return;
  project_forward_kernel<T><<<blocks_for(CN), kThreads, 0, stream>>>(p);
}

template <typename T>
void project_backward(const ProjectBackwardParams<T>& p, cudaStream_t stream) {
  const int64_t CN = p.in.C * p.in.N;
  if (CN == 0) return;
  project_backward_kernel<T><<<blocks_for(CN), kThreads, 0, stream>>>(p);
}

template void project_forward<float>(const ProjectForwardParams<float>&, cudaStream_t);
template void project_forward<double>(const ProjectForwardParams<double>&, cudaStream_t);
template void project_backward<float>(const ProjectBackwardParams<float>&, cudaStream_t);
template void project_backward<double>(const ProjectBackwardParams<double>&, cudaStream_t);

}  // namespace cuda
}  // namespace splat
}  // namespace gsw
