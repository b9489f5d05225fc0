// CUDA kernel of the splat transforms: one thread per (splat, frame), the per-Gaussian math of
// csrc/include/gsw/transforms.h (the same functions the CPU kernel uses). The per-frame quaternion and
// log-scale of the similarity path come precomputed (gsworkbench.transforms.Frames.params).
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
__global__ void transform_kernel(const TransformParams<T> a) {
  constexpr int K = (Deg + 1) * (Deg + 1) - 1;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t N = a.N;
  if (n >= N) return;
  const T mu[3] = {a.means[3 * n], a.means[3 * n + 1], a.means[3 * n + 2]};
  const T qu[4] = {a.quats[4 * n], a.quats[4 * n + 1], a.quats[4 * n + 2], a.quats[4 * n + 3]};
  const T ls_in[3] = {a.log_scales[3 * n], a.log_scales[3 * n + 1], a.log_scales[3 * n + 2]};
  T in[K > 0 ? 3 * K : 1];
  if constexpr (K > 0) {
#pragma unroll
    for (int i = 0; i < 3 * K; ++i) in[i] = a.sh_rest[n * K * 3 + i];
  }
  for (int64_t f = blockIdx.y; f < a.F; f += gridDim.y) {
    const T* A = a.affine + 12 * f;
    T* om = a.out_means + (f * N + n) * 3;
    T* oq = a.out_quats + (f * N + n) * 4;
    T* os = a.out_log_scales + (f * N + n) * 3;
    affine_point(A, A + 9, mu[0], mu[1], mu[2], om[0], om[1], om[2]);
    if (a.general) {
      double Ad[9];
      for (int i = 0; i < 9; ++i) Ad[i] = A[i];
      const double qd[4] = {qu[0], qu[1], qu[2], qu[3]}, lsd[3] = {ls_in[0], ls_in[1], ls_in[2]};
      double q[4], ls[3];
      general_covariance(Ad, qd, lsd, q, ls);
      for (int c = 0; c < 4; ++c) oq[c] = static_cast<T>(q[c]);
      for (int c = 0; c < 3; ++c) os[c] = static_cast<T>(ls[c]);
    } else {
      quat_mul(a.quat_r + 4 * f, qu, oq);
      const T log_s = a.log_s[f];
      for (int c = 0; c < 3; ++c) os[c] = ls_in[c] + log_s;
    }
    if constexpr (K > 0) {
      const T* D = a.sh_rot + f * K * K;
      T* out = a.out_sh_rest + (f * N + n) * K * 3;
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
cudaError_t launch(const TransformParams<T>& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((a.N + kThreads - 1) / kThreads),
                  static_cast<unsigned>(a.F < 65535 ? a.F : 65535));
  transform_kernel<T, Deg><<<grid, kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

template <typename T>
cudaError_t transform_splats_cuda(const TransformParams<T>& a, cudaStream_t stream) {
  if (a.F == 0 || a.N == 0) return cudaSuccess;
  if ((a.N + kThreads - 1) / kThreads > 2147483647LL) return cudaErrorInvalidValue;
  switch (a.K) {
    case 0: return launch<T, 0>(a, stream);
    case 3: return launch<T, 1>(a, stream);
    case 8: return launch<T, 2>(a, stream);
    case 15: return launch<T, 3>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

template cudaError_t transform_splats_cuda<float>(const TransformParams<float>&, cudaStream_t);
template cudaError_t transform_splats_cuda<double>(const TransformParams<double>&, cudaStream_t);

}  // namespace transforms
}  // namespace gsw
