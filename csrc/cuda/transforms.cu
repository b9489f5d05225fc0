// CUDA kernel of the splat transforms: one thread per (splat, frame), the per-Gaussian math of
// csrc/include/gsw/transforms.h (the same functions the CPU kernel uses).
#include <cuda_runtime.h>

#include "gsw/transforms.h"
#include "transforms_cuda.h"

namespace gsw {
namespace transforms {
namespace {

constexpr int kThreads = 256;

// The outputs may be the inputs (an in-place transform, F = 1): each thread reads its splat into
// registers before it writes anything, and the aliasable pointers are not __restrict__.
template <typename T, int Deg>
__global__ void transform_kernel(const T* means, const T* quats, const T* log_scales, const T* sh_rest,
                                 const T* __restrict__ affine, const T* __restrict__ sh_rot, bool general,
                                 T* out_means, T* out_quats, T* out_log_scales, T* out_sh_rest, int64_t F,
                                 int64_t N) {
  constexpr int K = (Deg + 1) * (Deg + 1) - 1;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n >= N) return;
  const T mu[3] = {means[3 * n], means[3 * n + 1], means[3 * n + 2]};
  const T qu[4] = {quats[4 * n], quats[4 * n + 1], quats[4 * n + 2], quats[4 * n + 3]};
  const T ls_in[3] = {log_scales[3 * n], log_scales[3 * n + 1], log_scales[3 * n + 2]};
  T in[K > 0 ? 3 * K : 1];
  if constexpr (K > 0) {
#pragma unroll
    for (int i = 0; i < 3 * K; ++i) in[i] = sh_rest[n * K * 3 + i];
  }
  for (int64_t f = blockIdx.y; f < F; f += gridDim.y) {
    const T* A = affine + 12 * f;
    T* om = out_means + (f * N + n) * 3;
    T* oq = out_quats + (f * N + n) * 4;
    T* os = out_log_scales + (f * N + n) * 3;
    affine_point(A, A + 9, mu[0], mu[1], mu[2], om[0], om[1], om[2]);
    double Ad[9];
    for (int i = 0; i < 9; ++i) Ad[i] = A[i];
    if (general) {
      const double qd[4] = {qu[0], qu[1], qu[2], qu[3]}, lsd[3] = {ls_in[0], ls_in[1], ls_in[2]};
      double q[4], ls[3];
      general_covariance(Ad, qd, lsd, q, ls);
      for (int c = 0; c < 4; ++c) oq[c] = static_cast<T>(q[c]);
      for (int c = 0; c < 3; ++c) os[c] = static_cast<T>(ls[c]);
    } else {
      double t = 0;
      for (int i = 0; i < 9; ++i) t += Ad[i] * Ad[i];
      const double s = sqrt(t / 3.0);
      for (int i = 0; i < 9; ++i) Ad[i] /= s;
      double qd[4];
      rotmat_to_quat(Ad, qd);
      const T qr[4] = {static_cast<T>(qd[0]), static_cast<T>(qd[1]), static_cast<T>(qd[2]), static_cast<T>(qd[3])};
      quat_mul(qr, qu, oq);
      const T log_s = static_cast<T>(log(s));
      for (int c = 0; c < 3; ++c) os[c] = ls_in[c] + log_s;
    }
    if constexpr (K > 0) {
      const T* D = sh_rot + f * K * K;
      T* out = out_sh_rest + (f * N + n) * K * 3;
#pragma unroll
      for (int c = 0; c < 3; ++c) {  // coefficients of one channel are 3 apart (AoS [K,3])
        if constexpr (Deg >= 1) rotate_band<T, 1, 1, 3>(D, K, in + c, out + c);
        if constexpr (Deg >= 2) rotate_band<T, 2, 1, 3>(D, K, in + c, out + c);
        if constexpr (Deg >= 3) rotate_band<T, 3, 1, 3>(D, K, in + c, out + c);
      }
    }
  }
}

template <typename T, int Deg>
cudaError_t launch(const T* means, const T* quats, const T* log_scales, const T* sh_rest, const T* affine,
                   const T* sh_rot, bool general, T* out_means, T* out_quats, T* out_log_scales, T* out_sh_rest,
                   int64_t F, int64_t N, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((N + kThreads - 1) / kThreads), static_cast<unsigned>(F < 65535 ? F : 65535));
  transform_kernel<T, Deg><<<grid, kThreads, 0, stream>>>(means, quats, log_scales, sh_rest, affine, sh_rot, general,
                                                          out_means, out_quats, out_log_scales, out_sh_rest, F, N);
  return cudaGetLastError();
}

}  // namespace

template <typename T>
cudaError_t transform_splats_cuda(const T* means, const T* quats, const T* log_scales, const T* sh_rest,
                                  const T* affine, const T* sh_rot, bool general, T* out_means, T* out_quats,
                                  T* out_log_scales, T* out_sh_rest, int64_t F, int64_t N, int K,
                                  cudaStream_t stream) {
  if (F == 0 || N == 0) return cudaSuccess;
  if ((N + kThreads - 1) / kThreads > 2147483647LL) return cudaErrorInvalidValue;
  switch (K) {
    case 0:
      return launch<T, 0>(means, quats, log_scales, sh_rest, affine, sh_rot, general, out_means, out_quats,
                          out_log_scales, out_sh_rest, F, N, stream);
    case 3:
      return launch<T, 1>(means, quats, log_scales, sh_rest, affine, sh_rot, general, out_means, out_quats,
                          out_log_scales, out_sh_rest, F, N, stream);
    case 8:
      return launch<T, 2>(means, quats, log_scales, sh_rest, affine, sh_rot, general, out_means, out_quats,
                          out_log_scales, out_sh_rest, F, N, stream);
    case 15:
      return launch<T, 3>(means, quats, log_scales, sh_rest, affine, sh_rot, general, out_means, out_quats,
                          out_log_scales, out_sh_rest, F, N, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

template cudaError_t transform_splats_cuda<float>(const float*, const float*, const float*, const float*,
                                                  const float*, const float*, bool, float*, float*, float*, float*,
                                                  int64_t, int64_t, int, cudaStream_t);
template cudaError_t transform_splats_cuda<double>(const double*, const double*, const double*, const double*,
                                                   const double*, const double*, bool, double*, double*, double*,
                                                   double*, int64_t, int64_t, int, cudaStream_t);

}  // namespace transforms
}  // namespace gsw
