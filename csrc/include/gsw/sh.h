// Real spherical harmonics to colour (3DGS convention, degree <= 3), forward and analytic backward.
// The constants and basis order are those of gsworkbench/gaussians.py. colour = SH(dir/|dir|) + 0.5,
// clamped at 0, with dir the (unnormalised) vector from the camera centre to the Gaussian.
#pragma once

#include "gsw/common.h"

namespace gsw {
namespace splat {

using std::sqrt;

constexpr double kShC0 = 0.28209479177387814;
constexpr double kShC1 = 0.4886025119029199;
// Scalars, not arrays: constexpr arrays cannot be read from CUDA device code.
constexpr double kShC2_0 = 1.0925484305920792, kShC2_1 = -1.0925484305920792, kShC2_2 = 0.31539156525252005,
                 kShC2_3 = -1.0925484305920792, kShC2_4 = 0.5462742152960396;
constexpr double kShC3_0 = -0.5900435899266435, kShC3_1 = 2.890611442640554, kShC3_2 = -0.4570457994644658,
                 kShC3_3 = 0.3731763325901154, kShC3_4 = -0.4570457994644658, kShC3_5 = 1.445305721320277,
                 kShC3_6 = -0.5900435899266435;

// Basis values b[0..(d+1)^2) at a unit direction (basis k at b[k S]); their gradients contracted with
// a vector: sh_basis_vjp below.
template <typename T, int S = 1>
GSW_HD void sh_basis(int degree, T x, T y, T z, T* b) {
  b[0 * S] = T(kShC0);
  if (degree < 1) return;
  const T c1 = T(kShC1);
  b[1 * S] = -c1 * y;
  b[2 * S] = c1 * z;
  b[3 * S] = -c1 * x;
  if (degree < 2) return;
  const T xx = x * x, yy = y * y, zz = z * z;
  const T c20 = T(kShC2_0), c21 = T(kShC2_1), c22 = T(kShC2_2), c23 = T(kShC2_3), c24 = T(kShC2_4);
  b[4 * S] = c20 * x * y;
  b[5 * S] = c21 * y * z;
  b[6 * S] = c22 * (2 * zz - xx - yy);
  b[7 * S] = c23 * x * z;
  b[8 * S] = c24 * (xx - yy);
  if (degree < 3) return;
  const T c30 = T(kShC3_0), c31 = T(kShC3_1), c32 = T(kShC3_2), c33 = T(kShC3_3), c34 = T(kShC3_4),
          c35 = T(kShC3_5), c36 = T(kShC3_6);
  b[9 * S] = c30 * y * (3 * xx - yy);
  b[10 * S] = c31 * x * y * z;
  b[11 * S] = c32 * y * (4 * zz - xx - yy);
  b[12 * S] = c33 * z * (2 * zz - 3 * xx - 3 * yy);
  b[13 * S] = c34 * x * (4 * zz - xx - yy);
  b[14 * S] = c35 * z * (xx - yy);
  b[15 * S] = c36 * x * (xx - 3 * yy);
}

// vd[0..3) = sum_i vb[i] db_i/d(x,y,z) over the basis of `degree` (sh_basis's gradients, contracted as
// they are formed: a vectorized caller keeps 3 sums live instead of 48 gradient values).
template <typename T>
GSW_HD void sh_basis_vjp(int degree, T x, T y, T z, const T* vb, T* vd) {
  vd[0] = vd[1] = vd[2] = T(0);
  if (degree < 1) return;
  const T c1 = T(kShC1);
  vd[0] = -c1 * vb[3];
  vd[1] = -c1 * vb[1];
  vd[2] = c1 * vb[2];
  if (degree < 2) return;
  const T xx = x * x, yy = y * y, zz = z * z;
  const T c20 = T(kShC2_0), c21 = T(kShC2_1), c22 = T(kShC2_2), c23 = T(kShC2_3), c24 = T(kShC2_4);
  vd[0] += c20 * y * vb[4] - 2 * c22 * x * vb[6] + c23 * z * vb[7] + 2 * c24 * x * vb[8];
  vd[1] += c20 * x * vb[4] + c21 * z * vb[5] - 2 * c22 * y * vb[6] - 2 * c24 * y * vb[8];
  vd[2] += c21 * y * vb[5] + 4 * c22 * z * vb[6] + c23 * x * vb[7];
  if (degree < 3) return;
  const T c30 = T(kShC3_0), c31 = T(kShC3_1), c32 = T(kShC3_2), c33 = T(kShC3_3), c34 = T(kShC3_4),
          c35 = T(kShC3_5), c36 = T(kShC3_6);
  const T xy = x * y, xz = x * z, yz = y * z;
  vd[0] += c30 * 6 * xy * vb[9] + c31 * yz * vb[10] - 2 * c32 * xy * vb[11] - 6 * c33 * xz * vb[12] +
           c34 * (4 * zz - 3 * xx - yy) * vb[13] + 2 * c35 * xz * vb[14] + c36 * (3 * xx - 3 * yy) * vb[15];
  vd[1] += c30 * (3 * xx - 3 * yy) * vb[9] + c31 * xz * vb[10] + c32 * (4 * zz - xx - 3 * yy) * vb[11] -
           6 * c33 * yz * vb[12] - 2 * c34 * xy * vb[13] - 2 * c35 * yz * vb[14] - 6 * c36 * xy * vb[15];
  vd[2] += c31 * xy * vb[10] + 8 * c32 * yz * vb[11] + c33 * (6 * zz - 3 * xx - 3 * yy) * vb[12] +
           8 * c34 * xz * vb[13] + c35 * (xx - yy) * vb[14];
}

// The coefficients of one Gaussian as two pieces: row 0 (the DC term) at c0[0..3), rows i >= 1 at
// cr[3 (i - 1) ..]. One [K,3] block is c0 = coeffs, cr = coeffs + 3; 3DGS's two parameters (sh0 [N,1,3],
// shN [N,K-1,3]) are read where they lie, with no concatenation. The loops below are fully unrolled,
// so the row choice is resolved at compile time.
template <typename T>
GSW_HD const T* sh_row(const T* c0, const T* cr, int i) {
  return i == 0 ? c0 : cr + 3 * (i - 1);
}

// colour[3] from the coefficients (c0, cr) (row k = coefficient k, 3 channels; the first (d+1)^2 rows are used).
template <typename T>
GSW_HD void sh_to_color_forward(int degree, const T* c0, const T* cr, const T* dir, T* color) {
  T n = sqrt(dir[0] * dir[0] + dir[1] * dir[1] + dir[2] * dir[2]);
  n = n < T(1e-12) ? T(1e-12) : n;
  T b[16];
  sh_basis<T>(degree, dir[0] / n, dir[1] / n, dir[2] / n, b);
  const int k = (degree + 1) * (degree + 1);
  GSW_UNROLL
  for (int ch = 0; ch < 3; ++ch) {
    T s = 0;
    GSW_UNROLL
    for (int i = 0; i < k; ++i) s += b[i] * sh_row(c0, cr, i)[ch];
    s += T(0.5);
    color[ch] = s > T(0) ? s : T(0);
  }
}

// colour[3] from coeffs[K*3] (one block of rows).
template <typename T>
GSW_HD void sh_to_color_forward(int degree, const T* coeffs, const T* dir, T* color) {
  sh_to_color_forward<T>(degree, coeffs, coeffs + 3, dir, color);
}

// The backward's per-Gaussian core: the basis b[0..(d+1)^2) at the unit direction and the colour
// gradient v[3] through the clamp at 0 (element k at b[k S], v[k S]), the coefficient gradients being
// b[i] v[ch] (written by the callers: sh_to_color_backward below, or the CPU kernel's blocked writer);
// adds dL/d(dir) to v_dir[3].
// Branch-free, with the loops fully unrolled, so a CPU loop over Gaussians calling it vectorizes.
template <typename T, int S = 1>
GSW_HD void sh_backward_core(int degree, const T* c0, const T* cr, const T* dir, const T* v_color, T* b, T* v,
                             T* v_dir) {
  T n = sqrt(dir[0] * dir[0] + dir[1] * dir[1] + dir[2] * dir[2]);
  const T unclamped = n < T(1e-12) ? T(0) : T(1);  // a T flag, not bool: keeps the SIMD masks one width
  n = n < T(1e-12) ? T(1e-12) : n;
  const T d[3] = {dir[0] / n, dir[1] / n, dir[2] / n};
  sh_basis<T, S>(degree, d[0], d[1], d[2], b);
  const int k = (degree + 1) * (degree + 1);
  T vc[3];
  GSW_UNROLL
  for (int ch = 0; ch < 3; ++ch) {
    T s = 0;
    GSW_UNROLL
    for (int i = 0; i < k; ++i) s += b[i * S] * sh_row(c0, cr, i)[ch];
    vc[ch] = v_color[ch] * (s + T(0.5) > T(0) ? T(1) : T(0));  // product, not a conditional load (SIMD)
    v[ch * S] = vc[ch];
  }
  if (degree == 0) return;
  T vb[16];
  GSW_UNROLL
  for (int i = 0; i < k; ++i) {
    const T* row = sh_row(c0, cr, i);
    vb[i] = row[0] * vc[0] + row[1] * vc[1] + row[2] * vc[2];
  }
  T vd[3];
  sh_basis_vjp<T>(degree, d[0], d[1], d[2], vb, vd);
  // d/d(dir) of dir/|dir|: (I - d d^T) / n; a clamped norm is a constant (branch-free for SIMD)
  const T dot = unclamped * (d[0] * vd[0] + d[1] * vd[1] + d[2] * vd[2]);
  GSW_UNROLL
  for (int a = 0; a < 3; ++a) v_dir[a] += (vd[a] - d[a] * dot) / n;
}

// Backward: adds the gradients to the coefficient rows (v_c0, v_cr laid out as c0, cr; rows < (d+1)^2;
// kAssign: writes them instead) and to v_dir[3].
template <typename T, bool kAssign = false>
GSW_HD void sh_to_color_backward(int degree, const T* c0, const T* cr, const T* dir, const T* v_color, T* v_c0,
                                 T* v_cr, T* v_dir) {
  T b[16], v[3];
  sh_backward_core<T>(degree, c0, cr, dir, v_color, b, v, v_dir);
  const int k = (degree + 1) * (degree + 1);
  GSW_UNROLL
  for (int i = 0; i < k; ++i) {
    T* vrow = i == 0 ? v_c0 : v_cr + 3 * (i - 1);
    GSW_UNROLL
    for (int ch = 0; ch < 3; ++ch) vrow[ch] = (kAssign ? T(0) : vrow[ch]) + b[i] * v[ch];
  }
}

// The backward for one block of rows: coeffs[K*3], v_coeffs[K*3].
template <typename T, bool kAssign = false>
GSW_HD void sh_to_color_backward(int degree, const T* coeffs, const T* dir, const T* v_color, T* v_coeffs,
                                 T* v_dir) {
  sh_to_color_backward<T, kAssign>(degree, coeffs, coeffs + 3, dir, v_color, v_coeffs, v_coeffs + 3, v_dir);
}

}  // namespace splat
}  // namespace gsw
