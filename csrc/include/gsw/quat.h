// Quaternion and rotation math of every kernel (CPU and CUDA): the product, the conversions between
// quaternions and rotation matrices both ways, and their vector-Jacobian products (VJPs). The torch
// twin is gsworkbench/gaussians.py (tests/test_quat_header.py compares the two).
//
// Conventions: quaternions wxyz (Hamilton), not necessarily unit length where an argument says q;
// rotation matrices are row-major 3x3 and act on column vectors. A VJP takes the gradient of a
// function's output (v_out) and returns the gradient of its inputs (v_in = J^T v_out); it overwrites
// its outputs.
#pragma once

#include "gsw/common.h"

namespace gsw {

// ---- product ------------------------------------------------------------------------------------

// (ow, ox, oy, oz) = a * (bw, bx, by, bz) (Hamilton product): the rotation by a after the rotation by b.
// This scalar form keeps b and the result in registers inside SIMD loops over Gaussians (GCC does not
// vectorize a loop whose body passes local arrays to it).
template <typename T>
GSW_HD void quat_mul(const T* a, T bw, T bx, T by, T bz, T& ow, T& ox, T& oy, T& oz) {
  ow = a[0] * bw - a[1] * bx - a[2] * by - a[3] * bz;
  ox = a[0] * bx + a[1] * bw + a[2] * bz - a[3] * by;
  oy = a[0] * by - a[1] * bz + a[2] * bw + a[3] * bx;
  oz = a[0] * bz + a[1] * by - a[2] * bx + a[3] * bw;
}

// out = a * b; out may be a or b.
template <typename T>
GSW_HD void quat_mul(const T* a, const T* b, T* out) {
  T w, x, y, z;
  quat_mul(a, b[0], b[1], b[2], b[3], w, x, y, z);
  out[0] = w, out[1] = x, out[2] = y, out[3] = z;
}

// VJP of quat_mul: v_a = v_out * conj(b), v_b = conj(a) * v_out (left and right multiplication are
// linear maps whose transposes multiply by the conjugate).
template <typename T>
GSW_HD void quat_mul_vjp(const T* a, const T* b, const T* v_out, T* v_a, T* v_b) {
  const T ca[4] = {a[0], -a[1], -a[2], -a[3]};
  const T cb[4] = {b[0], -b[1], -b[2], -b[3]};
  T va[4], vb[4];
  quat_mul(v_out, cb, va);
  quat_mul(ca, v_out, vb);
  GSW_UNROLL
  for (int i = 0; i < 4; ++i) v_a[i] = va[i], v_b[i] = vb[i];
}

// ---- normalisation ------------------------------------------------------------------------------

// qn = q / |q| with |q| clamped at 1e-12 (as gaussians.quat_normalize); returns the clamped norm.
template <typename T>
GSW_HD T quat_normalize(const T* q, T* qn) {
  using std::sqrt;  // the float overload for T = float
  T n = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
  n = n < T(1e-12) ? T(1e-12) : n;
  GSW_UNROLL
  for (int i = 0; i < 4; ++i) qn[i] = q[i] / n;
  return n;
}

// VJP of quat_normalize at q (norm n and qn as it returned them): v_q = (v_qn - qn (qn . v_qn)) / n,
// or v_qn / n where the norm was clamped.
template <typename T>
GSW_HD void quat_normalize_vjp(const T* qn, T n, const T* v_qn, T* v_q) {
  const T dot = qn[0] * v_qn[0] + qn[1] * v_qn[1] + qn[2] * v_qn[2] + qn[3] * v_qn[3];
  const T unclamped = n <= T(1e-12) ? T(0) : T(1);
  GSW_UNROLL
  for (int i = 0; i < 4; ++i) v_q[i] = (v_qn[i] - qn[i] * (unclamped * dot)) / n;
}

// ---- quaternion -> rotation matrix --------------------------------------------------------------

// R(q) for a unit quaternion q (no normalisation).
template <typename T>
GSW_HD void unit_quat_to_rotmat(const T* q, T* R) {
  const T w = q[0], x = q[1], y = q[2], z = q[3];
  R[0] = 1 - 2 * (y * y + z * z), R[1] = 2 * (x * y - w * z), R[2] = 2 * (x * z + w * y);
  R[3] = 2 * (x * y + w * z), R[4] = 1 - 2 * (x * x + z * z), R[5] = 2 * (y * z - w * x);
  R[6] = 2 * (x * z - w * y), R[7] = 2 * (y * z + w * x), R[8] = 1 - 2 * (x * x + y * y);
}

// VJP of unit_quat_to_rotmat: G = dL/dR (row-major) -> v_q = dL/dq.
template <typename T>
GSW_HD void unit_quat_to_rotmat_vjp(const T* q, const T* G, T* v_q) {
  const T w = q[0], x = q[1], y = q[2], z = q[3];
  v_q[0] = 2 * (-z * G[1] + y * G[2] + z * G[3] - x * G[5] - y * G[6] + x * G[7]);
  v_q[1] = 2 * (y * G[1] + z * G[2] + y * G[3] - 2 * x * G[4] - w * G[5] + z * G[6] + w * G[7] - 2 * x * G[8]);
  v_q[2] = 2 * (-2 * y * G[0] + x * G[1] + w * G[2] + x * G[3] + z * G[5] - w * G[6] + z * G[7] - 2 * y * G[8]);
  v_q[3] = 2 * (-2 * z * G[0] - w * G[1] + x * G[2] + w * G[3] - 2 * z * G[4] + y * G[5] + x * G[6] + y * G[7]);
}

// R(q / |q|) for any quaternion q (gaussians.quat_to_rotmat); q = 0 gives the identity.
template <typename T>
GSW_HD void quat_to_rotmat(const T* q, T* R) {
  T qn[4];
  quat_normalize(q, qn);
  unit_quat_to_rotmat(qn, R);
}

// VJP of quat_to_rotmat: G = dL/dR -> v_q = dL/dq (through the normalisation).
template <typename T>
GSW_HD void quat_to_rotmat_vjp(const T* q, const T* G, T* v_q) {
  T qn[4], v_qn[4];
  const T n = quat_normalize(q, qn);
  unit_quat_to_rotmat_vjp(qn, G, v_qn);
  quat_normalize_vjp(qn, n, v_qn, v_q);
}

// ---- rotation matrix -> quaternion --------------------------------------------------------------

// The unnormalised quaternion c of the rotation m from its best-conditioned diagonal combination
// (the largest of trace, m00, m11, m22; gaussians.rotmat_to_quat picks the same). Returns which one
// (0..3): c is linear in m for a given branch, which the VJP uses.
template <typename T>
GSW_HD int rotmat_to_quat_candidate(const T* m, T* c) {
  const T t = m[0] + m[4] + m[8];
  if (t >= m[0] && t >= m[4] && t >= m[8]) {
    c[0] = 1 + t, c[1] = m[7] - m[5], c[2] = m[2] - m[6], c[3] = m[3] - m[1];
    return 0;
  }
  if (m[0] >= m[4] && m[0] >= m[8]) {
    c[0] = m[7] - m[5], c[1] = 1 + 2 * m[0] - t, c[2] = m[1] + m[3], c[3] = m[2] + m[6];
    return 1;
  }
  if (m[4] >= m[8]) {
    c[0] = m[2] - m[6], c[1] = m[1] + m[3], c[2] = 1 + 2 * m[4] - t, c[3] = m[5] + m[7];
    return 2;
  }
  c[0] = m[3] - m[1], c[1] = m[2] + m[6], c[2] = m[5] + m[7], c[3] = 1 + 2 * m[8] - t;
  return 3;
}

// Unit quaternion q (w >= 0) of a rotation matrix m.
template <typename T>
GSW_HD void rotmat_to_quat(const T* m, T* q) {
  using std::sqrt;
  T c[4];
  rotmat_to_quat_candidate(m, c);
  T inv = T(1) / sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2] + c[3] * c[3]);
  if (c[0] < 0) inv = -inv;
  GSW_UNROLL
  for (int i = 0; i < 4; ++i) q[i] = c[i] * inv;
}

// VJP of rotmat_to_quat (away from the branch switches and w = 0): v_q = dL/dq -> v_m = dL/dm.
// q = +-c / |c|, so v_c = +-(v_q - q (q . v_q)) / |c|, then through the branch's linear map c(m).
template <typename T>
GSW_HD void rotmat_to_quat_vjp(const T* m, const T* v_q, T* v_m) {
  using std::sqrt;
  T c[4];
  const int branch = rotmat_to_quat_candidate(m, c);
  T inv = T(1) / sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2] + c[3] * c[3]);
  if (c[0] < 0) inv = -inv;
  T q[4];
  GSW_UNROLL
  for (int i = 0; i < 4; ++i) q[i] = c[i] * inv;
  const T dot = q[0] * v_q[0] + q[1] * v_q[1] + q[2] * v_q[2] + q[3] * v_q[3];
  T vc[4];
  GSW_UNROLL
  for (int i = 0; i < 4; ++i) vc[i] = (v_q[i] - q[i] * dot) * inv;
  GSW_UNROLL
  for (int i = 0; i < 9; ++i) v_m[i] = T(0);
  // the diagonal entry of c that holds 1 + 2 m_kk - t (k = branch - 1), or 1 + t (branch 0)
  const T vd = vc[branch];
  if (branch == 0) {
    v_m[0] += vd, v_m[4] += vd, v_m[8] += vd;
  } else {
    v_m[0] -= vd, v_m[4] -= vd, v_m[8] -= vd;
    v_m[4 * (branch - 1)] += 2 * vd;
  }
  // the other three entries of c, each m_ij - m_ji (with w) or m_ij + m_ji (two axes):
  //   branch 0: c1 = m21 - m12, c2 = m02 - m20, c3 = m10 - m01
  //   branch 1: c0 = m21 - m12, c2 = m01 + m10, c3 = m02 + m20
  //   branch 2: c0 = m02 - m20, c1 = m01 + m10, c3 = m12 + m21
  //   branch 3: c0 = m10 - m01, c1 = m02 + m20, c2 = m12 + m21
  auto add = [&](int k, int i, int j, T sign_ji) {
    v_m[3 * i + j] += vc[k];
    v_m[3 * j + i] += sign_ji * vc[k];
  };
  switch (branch) {
    case 0: add(1, 2, 1, T(-1)), add(2, 0, 2, T(-1)), add(3, 1, 0, T(-1)); break;
    case 1: add(0, 2, 1, T(-1)), add(2, 0, 1, T(1)), add(3, 0, 2, T(1)); break;
    case 2: add(0, 0, 2, T(-1)), add(1, 0, 1, T(1)), add(3, 1, 2, T(1)); break;
    default: add(0, 1, 0, T(-1)), add(1, 0, 2, T(1)), add(2, 1, 2, T(1)); break;
  }
}

}  // namespace gsw
