// Per-Gaussian math of the splat transforms, shared by csrc/cpu/transforms.cpp and
// csrc/cuda/transforms.cu.
//
// A frame is the affine map x -> A x + b (A row-major [3,3]). Uniform case (A = s R):
//   mean' = A mean + b,  quat' = q_R * quat (Hamilton, wxyz),  log_scale' = log_scale + log s,
// with q_R and log s computed once per frame by the caller (gsworkbench.transforms.Frames).
// General case (any A with det A > 0): the covariance A Sigma A^T is re-decomposed per Gaussian:
//   M = A R(quat) diag(exp(log_scale)) = U diag(sigma) V^T  ->  quat' = quat(U), log_scale' = log sigma
// (gsw/svd3.h, in double). SH bands l = 1..3 are multiplied by the band blocks of the block-diagonal
// matrix D [K,K] (K = (d+1)^2 - 1) in both cases. Quaternion math: gsw/quat.h.
#pragma once

#include "gsw/common.h"
#include "gsw/quat.h"
#include "gsw/svd3.h"

// GSW_UNROLL: gsw/common.h.
#if defined(__CUDACC__)
#define GSW_SIMD
#else
#define GSW_SIMD _Pragma("omp simd")
#endif

namespace gsw {
namespace transforms {

template <typename T>
GSW_HD void affine_point(const T* A, const T* b, T x, T y, T z, T& ox, T& oy, T& oz) {
  ox = A[0] * x + A[1] * y + A[2] * z + b[0];
  oy = A[3] * x + A[4] * y + A[5] * z + b[1];
  oz = A[6] * x + A[7] * y + A[8] * z + b[2];
}

// One SH band (l = L) of W lanes (Gaussians or channels) at once: out_i = sum_j D[o+i][o+j] in_j,
// o = L*L - 1. Coefficient k of lane w sits at in[k*S + w] / out[k*S + w]; D is the full [K,K]
// block-diagonal matrix, row-major. The CPU kernel calls it on SoA blocks (W = S = block size, SIMD
// over w); a one-thread-per-Gaussian kernel would use W = 1 and S = 3 (AoS channels).
template <typename T, int L, int W, int S>
GSW_HD void rotate_band(const T* D, int K, const T* in, T* out) {
  constexpr int n = 2 * L + 1, o = L * L - 1;
GSW_UNROLL
  for (int i = 0; i < n; ++i) {
    T acc[W];
GSW_SIMD
    for (int w = 0; w < W; ++w) acc[w] = T(0);
GSW_UNROLL
    for (int j = 0; j < n; ++j) {
      const T d = D[(o + i) * K + o + j];
GSW_SIMD
      for (int w = 0; w < W; ++w) acc[w] += d * in[(o + j) * S + w];
    }
GSW_SIMD
    for (int w = 0; w < W; ++w) out[(o + i) * S + w] = acc[w];
  }
}

// General case for one Gaussian (quaternion q, log-scales ls): M = A R(q) diag(exp(ls)) = U diag(sigma)
// V^T -> a unit quaternion of U (w >= 0) and log sigma, in double.
GSW_HD void general_covariance(const double* A, const double* q, const double* ls, double* out_q, double* out_ls) {
  double R[9];
  quat_to_rotmat(q, R);
  const double s[3] = {exp(ls[0]), exp(ls[1]), exp(ls[2])};
  double M[9];  // M = A R diag(s), row-major; columns are the mapped principal axes
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) M[3 * i + j] = (A[3 * i] * R[j] + A[3 * i + 1] * R[3 + j] + A[3 * i + 2] * R[6 + j]) * s[j];
  double U[9], sigma[3];
  svd3_jacobi(M, U, sigma);
  for (int j = 0; j < 3; ++j) out_ls[j] = log(sigma[j]);
  rotmat_to_quat(U, out_q);
}

}  // namespace transforms
}  // namespace gsw
