// CUDA kernels of the Gaussian field. The per-pair math is csrc/include/gsw/field.h, shared with the
// CPU kernels (csrc/cpu/field.cpp). One thread per point; Gaussians are staged through shared
// memory in tiles. The backward reduces per-Gaussian sums within each warp, then adds them atomically.
#include "common.cuh"
#include "field.h"
#include "gsw/field.h"

namespace gsw {
namespace field {
namespace {

constexpr int kTile = 256;

template <typename T>
__global__ void prepare_kernel(const T* __restrict__ means, const T* __restrict__ factors,
                               const T* __restrict__ weights, Gauss<T>* __restrict__ out, int64_t N) {
  const int64_t n = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (n < N) out[n] = prepare(factors + 9 * n, means + 3 * n, weights[n]);
}

// Coordinates of thread b's point (zeros past the end).
template <typename T>
__device__ void load_point(const T* __restrict__ points, int64_t b, int64_t B, T& x, T& y, T& z) {
  const bool active = b < B;
  x = active ? points[3 * b] : T(0);
  y = active ? points[3 * b + 1] : T(0);
  z = active ? points[3 * b + 2] : T(0);
}

// Stages Gaussians [n0, n0 + count) of gs into the block's shared tile.
template <typename T>
__device__ void stage_tile(const Gauss<T>* __restrict__ gs, int64_t n0, int64_t count, Gauss<T>* tile) {
  __syncthreads();
  for (int i = threadIdx.x; i < count; i += blockDim.x) tile[i] = gs[n0 + i];
  __syncthreads();
}

template <typename T>
__global__ void forward_kernel(const T* __restrict__ points, const Gauss<T>* __restrict__ gs, T* __restrict__ values,
                               int64_t B, int64_t N) {
  __shared__ Gauss<T> tile[kTile];
  const int64_t b = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  T x, y, z;
  load_point(points, b, B, x, y, z);
  T acc = 0;
  for (int64_t n0 = 0; n0 < N; n0 += kTile) {
    const int64_t count = N - n0 < kTile ? N - n0 : kTile;
    stage_tile(gs, n0, count, tile);
    for (int i = 0; i < count; ++i) {
      const Pair<T> p = whiten(tile[i], x, y, z);
      acc += tile[i].w * kernel(p.q);
    }
  }
  if (b < B) values[b] = acc;
}

template <typename T>
__global__ void backward_kernel(const T* __restrict__ grad, const T* __restrict__ points,
                                const Gauss<T>* __restrict__ gs, T* __restrict__ grad_points, T* __restrict__ sums,
                                int64_t B, int64_t N) {
  __shared__ Gauss<T> tile[kTile];
  const int64_t b = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const bool active = b < B;
  T x, y, z;
  load_point(points, b, B, x, y, z);
  const T gb = active ? grad[b] : T(0);  // inactive lanes contribute zeros
  T gx = 0, gy = 0, gz = 0;
  const bool leader = (threadIdx.x & 31) == 0;
  for (int64_t n0 = 0; n0 < N; n0 += kTile) {
    const int64_t count = N - n0 < kTile ? N - n0 : kTile;
    stage_tile(gs, n0, count, tile);
    for (int i = 0; i < count; ++i) {
      const Gauss<T>& g = tile[i];
      const Pair<T> p = whiten(g, x, y, z);
      const T e = kernel(p.q);
      const T ge = gb * e;
      const T we = g.w * e;
      gx -= we * (g.m00 * p.z0 + g.m10 * p.z1 + g.m20 * p.z2);
      gy -= we * (g.m11 * p.z1 + g.m21 * p.z2);
      gz -= we * (g.m22 * p.z2);
      const T acc[kAccum] = {ge,           ge * p.z0,        ge * p.z1,        ge * p.z2,        ge * p.z0 * p.d0,
                             ge * p.z1 * p.d0, ge * p.z1 * p.d1, ge * p.z2 * p.d0, ge * p.z2 * p.d1, ge * p.z2 * p.d2};
      T* dst = sums + (n0 + i) * kAccum;
#pragma unroll
      for (int k = 0; k < kAccum; ++k) {
        const T s = warp_sum(acc[k]);
        if (leader && s != T(0)) atomicAdd(dst + k, s);
      }
    }
  }
  if (active) {
    grad_points[3 * b] = gb * gx;
    grad_points[3 * b + 1] = gb * gy;
    grad_points[3 * b + 2] = gb * gz;
  }
}

template <typename T>
__global__ void finish_kernel(const Gauss<T>* __restrict__ gs, const T* __restrict__ sums, T* __restrict__ grad_means,
                              T* __restrict__ grad_factors, T* __restrict__ grad_weights, int64_t N) {
  const int64_t n = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (n < N) finish_gaussian(gs[n], sums + n * kAccum, grad_means + 3 * n, grad_factors + 9 * n, grad_weights + n);
}

}  // namespace

static_assert(sizeof(Gauss<float>) == 10 * sizeof(float), "Gauss<T> must pack into 10 scalars");
static_assert(sizeof(Gauss<double>) == 10 * sizeof(double), "Gauss<T> must pack into 10 scalars");

template <typename T>
cudaError_t forward_cuda(const T* points, const T* means, const T* factors, const T* weights, T* values, T* scratch,
                         int64_t B, int64_t N, cudaStream_t stream) {
  if (B == 0) return cudaSuccess;
  auto* gs = reinterpret_cast<Gauss<T>*>(scratch);
  if (N > 0) prepare_kernel<<<blocks_for(N), kThreads, 0, stream>>>(means, factors, weights, gs, N);
  forward_kernel<<<blocks_for(B), kThreads, 0, stream>>>(points, gs, values, B, N);
  return cudaGetLastError();
}

template <typename T>
cudaError_t backward_cuda(const T* grad, const T* points, const T* means, const T* factors, const T* weights,
                          T* grad_points, T* grad_means, T* grad_factors, T* grad_weights, T* scratch, int64_t B,
                          int64_t N, cudaStream_t stream) {
  auto* gs = reinterpret_cast<Gauss<T>*>(scratch);
  T* sums = scratch + N * kAccum;
  cudaError_t err = cudaMemsetAsync(sums, 0, sizeof(T) * N * kAccum, stream);
  if (err != cudaSuccess) return err;
  if (N > 0) prepare_kernel<<<blocks_for(N), kThreads, 0, stream>>>(means, factors, weights, gs, N);
  if (B > 0) backward_kernel<<<blocks_for(B), kThreads, 0, stream>>>(grad, points, gs, grad_points, sums, B, N);
  if (N > 0) finish_kernel<<<blocks_for(N), kThreads, 0, stream>>>(gs, sums, grad_means, grad_factors, grad_weights, N);
  return cudaGetLastError();
}

template cudaError_t forward_cuda<float>(const float*, const float*, const float*, const float*, float*, float*,
                                         int64_t, int64_t, cudaStream_t);
template cudaError_t forward_cuda<double>(const double*, const double*, const double*, const double*, double*,
                                          double*, int64_t, int64_t, cudaStream_t);
template cudaError_t backward_cuda<float>(const float*, const float*, const float*, const float*, const float*,
                                          float*, float*, float*, float*, float*, int64_t, int64_t, cudaStream_t);
template cudaError_t backward_cuda<double>(const double*, const double*, const double*, const double*,
                                           const double*, double*, double*, double*, double*, double*, int64_t,
                                           int64_t, cudaStream_t);

}  // namespace field
}  // namespace gsw
