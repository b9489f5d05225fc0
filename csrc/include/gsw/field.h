// Per-Gaussian and per-pair math of the Gaussian field, shared by csrc/cpu/field.cpp and
// csrc/cuda/field.cu.
//
//   value(x) = sum_n w_n * exp(-1/2 * |M_n (x - mu_n)|^2),   M_n = L_n^{-1},  Sigma_n = L_n L_n^T.
//
// L is lower-triangular with a positive diagonal, stored row-major [3,3]. M is packed as
// (m00, m10, m11, m20, m21, m22).
#pragma once

#include "gsw/common.h"

namespace gsw {
namespace field {

template <typename T>
struct Gauss {
  T m00, m10, m11, m20, m21, m22;  // inverse Cholesky factor, lower
  T mx, my, mz;                    // mean
  T w;                             // weight
};

// Packs one Gaussian: inverts the lower-triangular factor L (row-major, 9 values).
template <typename T>
GSW_HD Gauss<T> prepare(const T* L, const T* mu, T w) {
  Gauss<T> g;
  g.m00 = T(1) / L[0];
  g.m11 = T(1) / L[4];
  g.m22 = T(1) / L[8];
  g.m10 = -L[3] * g.m00 * g.m11;
  g.m21 = -L[7] * g.m11 * g.m22;
  g.m20 = -(L[6] * g.m00 + L[7] * g.m10) * g.m22;
  g.mx = mu[0];
  g.my = mu[1];
  g.mz = mu[2];
  g.w = w;
  return g;
}

// Whitened offset z = M (x - mu) and its squared norm q.
template <typename T>
struct Pair {
  T d0, d1, d2, z0, z1, z2, q;
};

template <typename T>
GSW_HD Pair<T> whiten(const Gauss<T>& g, T x, T y, T z) {
  Pair<T> p;
  p.d0 = x - g.mx;
  p.d1 = y - g.my;
  p.d2 = z - g.mz;
  p.z0 = g.m00 * p.d0;
  p.z1 = g.m10 * p.d0 + g.m11 * p.d1;
  p.z2 = g.m20 * p.d0 + g.m21 * p.d1 + g.m22 * p.d2;
  p.q = p.z0 * p.z0 + p.z1 * p.z1 + p.z2 * p.z2;
  return p;
}

// exp(-q/2): the unweighted kernel value of one pair.
template <typename T>
GSW_HD T kernel(T q) {
  return exp_nonpos(T(-0.5) * q);
}

// The forward's form of a Gaussian: M scaled by sqrt(log2(e) / 2), so that the squared norm of the
// scaled whitened offset is the base-2 exponent, value = w * 2^-|A (x - mu)|^2. Folding the -1/2 and
// log2(e) into the six entries once per Gaussian saves two multiplications per pair.
template <typename T>
GSW_HD Gauss<T> forward_form(const Gauss<T>& g) {
  const T k = T(0.84932180028801904272);  // sqrt(log2(e) / 2)
  return {k * g.m00, k * g.m10, k * g.m11, k * g.m20, k * g.m21, k * g.m22, g.mx, g.my, g.mz, g.w};
}

// One pair's weighted value, w * exp(-q/2), from the forward form (whiten's q is then the exponent).
template <typename T>
GSW_HD T forward_value(const Gauss<T>& g, T x, T y, T z) {
  return g.w * exp2_nonpos(-whiten(g, x, y, z).q);
}

// Per-Gaussian sums of the backward pass over points b, with ge = grad_b * exp(-q/2):
//   a = sum ge,  s_i = sum ge z_i,  t_ij = sum ge z_i d_j  (lower i >= j).
// Layout of the 10 accumulators: a, s0, s1, s2, t00, t10, t11, t20, t21, t22.
constexpr int kAccum = 10;

// From the sums to the gradients of one Gaussian:
//   dvalue/dw = a,  dvalue/dmu = w M^T s,  dvalue/dM_ij = -w t_ij,  dvalue/dL = -M^T (dvalue/dM) M^T (lower).
template <typename T>
GSW_HD void finish_gaussian(const Gauss<T>& g, const T* acc, T* grad_mu, T* grad_L, T* grad_w) {
  const T w = g.w;
  *grad_w = acc[0];
  const T s0 = acc[1], s1 = acc[2], s2 = acc[3];
  grad_mu[0] = w * (g.m00 * s0 + g.m10 * s1 + g.m20 * s2);
  grad_mu[1] = w * (g.m11 * s1 + g.m21 * s2);
  grad_mu[2] = w * (g.m22 * s2);
  // G = dvalue/dM (lower)
  const T G00 = -w * acc[4], G10 = -w * acc[5], G11 = -w * acc[6];
  const T G20 = -w * acc[7], G21 = -w * acc[8], G22 = -w * acc[9];
  // P = M^T G  (M^T upper, G lower) -> full 3x3
  const T m00 = g.m00, m10 = g.m10, m11 = g.m11, m20 = g.m20, m21 = g.m21, m22 = g.m22;
  // (only the entries that reach the lower part of P M^T are formed)
  const T P00 = m00 * G00 + m10 * G10 + m20 * G20;
  const T P10 = m11 * G10 + m21 * G20, P11 = m11 * G11 + m21 * G21;
  const T P20 = m22 * G20, P21 = m22 * G21, P22 = m22 * G22;
  // grad_L = -(P M^T), lower part only; (M^T)_{kj} = M_{jk}.
  grad_L[0] = -(P00 * m00);
  grad_L[1] = 0;
  grad_L[2] = 0;
  grad_L[3] = -(P10 * m00);
  grad_L[4] = -(P10 * m10 + P11 * m11);
  grad_L[5] = 0;
  grad_L[6] = -(P20 * m00);
  grad_L[7] = -(P20 * m10 + P21 * m11);
  grad_L[8] = -(P20 * m20 + P21 * m21 + P22 * m22);
}

}  // namespace field
}  // namespace gsw
