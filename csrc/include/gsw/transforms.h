// Per-Gaussian math of the splat transforms, shared by csrc/cpu/transforms.cpp (and any CUDA kernel).
//
// A frame is the affine map x -> A x + b (A row-major [3,3]). Uniform case (A = s R):
//   mean' = A mean + b,  quat' = q_R * quat (Hamilton, wxyz),  log_scale' = log_scale + log s.
// General case (any A with det A > 0): the covariance A Sigma A^T is re-decomposed per Gaussian:
//   M = A R(quat) diag(exp(log_scale)) = U diag(sigma) V^T  ->  quat' = quat(U), log_scale' = log sigma
// (one-sided Jacobi SVD in double). SH bands l = 1..3 are multiplied by the band blocks of the
// block-diagonal matrix D [K,K] (K = (d+1)^2 - 1) in both cases.
#pragma once

#include "gsw/common.h"

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

// out = r * q (Hamilton product, wxyz): rotation by r after q.
template <typename T>
GSW_HD void quat_left_mul(const T* r, T qw, T qx, T qy, T qz, T& ow, T& ox, T& oy, T& oz) {
  ow = r[0] * qw - r[1] * qx - r[2] * qy - r[3] * qz;
  ox = r[0] * qx + r[1] * qw + r[2] * qz - r[3] * qy;
  oy = r[0] * qy - r[1] * qz + r[2] * qw + r[3] * qx;
  oz = r[0] * qz + r[1] * qy - r[2] * qx + r[3] * qw;
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

// Uniform scale s of A = s R (row-major): sqrt(trace(A A^T) / 3).
GSW_HD double similarity_scale(const double* A) {
  double t = 0;
  for (int i = 0; i < 9; ++i) t += A[i] * A[i];
  return sqrt(t / 3.0);
}

// Rotation matrix (row-major) of a quaternion wxyz, normalised here.
GSW_HD void quat_to_rotmat(double w, double x, double y, double z, double* R) {
  const double n2 = w * w + x * x + y * y + z * z;
  const double inv = n2 > 0 ? 1.0 / sqrt(n2) : 0.0;
  w *= inv, x *= inv, y *= inv, z *= inv;
  if (!(n2 > 0)) w = 1.0;
  R[0] = 1 - 2 * (y * y + z * z), R[1] = 2 * (x * y - w * z), R[2] = 2 * (x * z + w * y);
  R[3] = 2 * (x * y + w * z), R[4] = 1 - 2 * (x * x + z * z), R[5] = 2 * (y * z - w * x);
  R[6] = 2 * (x * z - w * y), R[7] = 2 * (y * z + w * x), R[8] = 1 - 2 * (x * x + y * y);
}

// Unit quaternion wxyz (w >= 0) of a rotation matrix (row-major), from its best-conditioned
// diagonal combination.
GSW_HD void rotmat_to_quat(const double* m, double* q) {
  const double t = m[0] + m[4] + m[8];
  double c[4];
  if (t >= m[0] && t >= m[4] && t >= m[8]) {
    c[0] = 1 + t, c[1] = m[7] - m[5], c[2] = m[2] - m[6], c[3] = m[3] - m[1];
  } else if (m[0] >= m[4] && m[0] >= m[8]) {
    c[0] = m[7] - m[5], c[1] = 1 + 2 * m[0] - t, c[2] = m[1] + m[3], c[3] = m[2] + m[6];
  } else if (m[4] >= m[8]) {
    c[0] = m[2] - m[6], c[1] = m[1] + m[3], c[2] = 1 + 2 * m[4] - t, c[3] = m[5] + m[7];
  } else {
    c[0] = m[3] - m[1], c[1] = m[2] + m[6], c[2] = m[5] + m[7], c[3] = 1 + 2 * m[8] - t;
  }
  double inv = 1.0 / sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2] + c[3] * c[3]);
  if (c[0] < 0) inv = -inv;
  for (int i = 0; i < 4; ++i) q[i] = c[i] * inv;
}

// General case for one Gaussian: M = A R(q) diag(s), left singular vectors and singular values by
// one-sided Jacobi (rotating columns of M until orthogonal: M V = U diag(sigma)), in double.
// Writes a unit quaternion (w >= 0) and log singular values.
GSW_HD void general_covariance(const double* A, double qw, double qx, double qy, double qz, double ls0,
                               double ls1, double ls2, double* out_q, double* out_ls) {
  double R[9];
  quat_to_rotmat(qw, qx, qy, qz, R);
  const double s[3] = {exp(ls0), exp(ls1), exp(ls2)};
  double M[9];  // M = A R diag(s), row-major; columns are the mapped principal axes
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) M[3 * i + j] = (A[3 * i] * R[j] + A[3 * i + 1] * R[3 + j] + A[3 * i + 2] * R[6 + j]) * s[j];
  for (int sweep = 0; sweep < 12; ++sweep) {
    bool rotated = false;
    for (int p = 0; p < 2; ++p) {
      for (int r = p + 1; r < 3; ++r) {
        double a = 0, b = 0, g = 0;
        for (int i = 0; i < 3; ++i) {
          a += M[3 * i + p] * M[3 * i + p];
          b += M[3 * i + r] * M[3 * i + r];
          g += M[3 * i + p] * M[3 * i + r];
        }
        if (fabs(g) <= 1e-15 * sqrt(a * b) || g == 0.0) continue;
        rotated = true;
        const double zeta = (b - a) / (2 * g);
        const double t = (zeta >= 0 ? 1.0 : -1.0) / (fabs(zeta) + sqrt(1 + zeta * zeta));
        const double c = 1 / sqrt(1 + t * t), sn = c * t;
        for (int i = 0; i < 3; ++i) {
          const double mp = M[3 * i + p], mr = M[3 * i + r];
          M[3 * i + p] = c * mp - sn * mr;
          M[3 * i + r] = sn * mp + c * mr;
        }
      }
    }
    if (!rotated) break;
  }
  double U[9];
  for (int j = 0; j < 3; ++j) {
    const double nrm = sqrt(M[j] * M[j] + M[3 + j] * M[3 + j] + M[6 + j] * M[6 + j]);
    out_ls[j] = log(nrm);
    const double inv = nrm > 0 ? 1.0 / nrm : 0.0;
    for (int i = 0; i < 3; ++i) U[3 * i + j] = M[3 * i + j] * inv;
  }
  const double det = U[0] * (U[4] * U[8] - U[5] * U[7]) - U[1] * (U[3] * U[8] - U[5] * U[6]) +
                     U[2] * (U[3] * U[7] - U[4] * U[6]);
  if (det < 0)
    for (int i = 0; i < 3; ++i) U[3 * i + 2] = -U[3 * i + 2];
  rotmat_to_quat(U, out_q);
}

}  // namespace transforms
}  // namespace gsw
