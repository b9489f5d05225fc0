// Singular value decomposition of a 3x3 matrix by one-sided Jacobi rotations, in double: the one SVD
// of the kernels (csrc/include/gsw/transforms.h re-decomposes covariances with it). Host and device.
#pragma once

#include "gsw/common.h"

namespace gsw {

// M (row-major) = U diag(sigma) V^T with U a proper rotation (det +1), sigma >= 0 (not sorted) and V
// orthogonal (V itself is not formed). The columns of a copy of M are rotated pairwise until they are
// orthogonal (M V = U diag(sigma)); at most 12 sweeps (double converges in 3-5 for any 3x3). When
// det M < 0 the third column of U is negated, which keeps sigma >= 0 and moves the sign into V.
GSW_HD void svd3_jacobi(const double* M_in, double* U, double* sigma) {
  double M[9];
  for (int i = 0; i < 9; ++i) M[i] = M_in[i];
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
  for (int j = 0; j < 3; ++j) {
    const double nrm = sqrt(M[j] * M[j] + M[3 + j] * M[3 + j] + M[6 + j] * M[6 + j]);
    sigma[j] = nrm;
    const double inv = nrm > 0 ? 1.0 / nrm : 0.0;
    for (int i = 0; i < 3; ++i) U[3 * i + j] = M[3 * i + j] * inv;
  }
  const double det = U[0] * (U[4] * U[8] - U[5] * U[7]) - U[1] * (U[3] * U[8] - U[5] * U[6]) +
                     U[2] * (U[3] * U[7] - U[4] * U[6]);
  if (det < 0)
    for (int i = 0; i < 3; ++i) U[3 * i + 2] = -U[3 * i + 2];
}

}  // namespace gsw
