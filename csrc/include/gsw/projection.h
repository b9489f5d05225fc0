// EWA projection of one 3D Gaussian into one pinhole camera (gsplat conventions), forward and
// analytic backward. Shared by the CPU (csrc/cpu/splat_*.cpp) and CUDA (csrc/cuda/splat_project.cu) kernels.
//
// Conventions: quaternions wxyz (normalised here), Sigma = R S S^T R^T, viewmat = [W | t] world to
// camera, K = [[fx,0,cx],[0,fy,cy],[0,0,1]]; pixel centres at (i + 0.5, j + 0.5). The 2D covariance
// gets eps2d (0.3 px^2) added to its diagonal; the compensation sqrt(det / det_blurred) is returned for
// the antialiased mode. A Gaussian is culled (radius 0) when its depth is outside [near, far], its
// blurred 2D covariance is not positive definite, or its 3-sigma disc misses the image.
#pragma once

#include "gsw/common.h"
#include "gsw/quat.h"

namespace gsw {
namespace splat {

using std::ceil;
using std::sqrt;

template <typename T>
struct Camera {
  T W[9];  // row-major rotation (world to camera)
  T t[3];
  T fx, fy, cx, cy;
};

template <typename T>
GSW_HD Camera<T> load_camera(const T* viewmat, const T* K) {
  Camera<T> c;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) c.W[3 * i + j] = viewmat[4 * i + j];
    c.t[i] = viewmat[4 * i + 3];
  }
  c.fx = K[0];
  c.cx = K[2];
  c.fy = K[4];
  c.cy = K[5];
  return c;
}

// Row-major 3x3 helpers.
template <typename T>
GSW_HD void mat3_mul(const T* A, const T* B, T* out) {
  GSW_UNROLL
  for (int i = 0; i < 3; ++i)
    GSW_UNROLL
    for (int j = 0; j < 3; ++j) out[3 * i + j] = A[3 * i] * B[j] + A[3 * i + 1] * B[3 + j] + A[3 * i + 2] * B[6 + j];
}
template <typename T>
GSW_HD void mat3_mul_bt(const T* A, const T* B, T* out) {  // A B^T
  GSW_UNROLL
  for (int i = 0; i < 3; ++i)
    GSW_UNROLL
    for (int j = 0; j < 3; ++j)
      out[3 * i + j] = A[3 * i] * B[3 * j] + A[3 * i + 1] * B[3 * j + 1] + A[3 * i + 2] * B[3 * j + 2];
}
template <typename T>
GSW_HD void mat3_mul_at(const T* A, const T* B, T* out) {  // A^T B
  GSW_UNROLL
  for (int i = 0; i < 3; ++i)
    GSW_UNROLL
    for (int j = 0; j < 3; ++j) out[3 * i + j] = A[i] * B[j] + A[3 + i] * B[3 + j] + A[6 + i] * B[6 + j];
}

// Everything the forward computes for one (Gaussian, camera) pair; the backward recomputes it.
template <typename T>
struct Projected {
  T p[3];        // camera-space mean
  T Rq[9];       // rotation of the Gaussian
  T M[9];        // Rq * diag(scale)
  T Sigma[9];    // world covariance
  T covc[9];     // camera covariance W Sigma W^T
  T J[6];        // 2x3 Jacobian (row-major)
  T tx, ty;      // clamped camera x, y used in J
  T clip_x, clip_y;  // 1 where x/z (y/z) was clamped, else 0 (T, not bool: keeps SIMD masks one width)
  T a, b, c;     // blurred 2D covariance
  T det_orig, det;
  T comp;
  T conic[3];
  T mean2d[2];
  int32_t radius;
};

// Writes projection i (radius, mean2d, depth, conic, compensation) into the stage's output arrays; a
// culled Gaussian (ok == false) gets zeros. Shared by the CPU and CUDA projection kernels.
template <typename T>
GSW_HD void store_projected(bool ok, const Projected<T>& o, int64_t i, int32_t* radii, T* means2d, T* depths,
                            T* conics, T* comps) {
  radii[i] = ok ? o.radius : 0;
  means2d[2 * i] = ok ? o.mean2d[0] : T(0);
  means2d[2 * i + 1] = ok ? o.mean2d[1] : T(0);
  depths[i] = ok ? o.p[2] : T(0);
  GSW_UNROLL
  for (int k = 0; k < 3; ++k) conics[3 * i + k] = ok ? o.conic[k] : T(0);
  comps[i] = ok ? o.comp : T(0);
}

// Returns false when the pair is culled. Branch-free (a culled pair's fields are finite but
// meaningless; p[2] is then 1), so CPU loops over Gaussians vectorize.
template <typename T>
GSW_HD bool project_forward(const T* mean, const T* quat, const T* scale, const Camera<T>& cam, int64_t width,
                            int64_t height, T eps2d, T near_plane, T far_plane, Projected<T>& o) {
  GSW_UNROLL
  for (int i = 0; i < 3; ++i)
    o.p[i] = cam.W[3 * i] * mean[0] + cam.W[3 * i + 1] * mean[1] + cam.W[3 * i + 2] * mean[2] + cam.t[i];
  const T in_depth = o.p[2] >= near_plane && o.p[2] <= far_plane ? T(1) : T(0);
  o.p[2] = in_depth > T(0) ? o.p[2] : T(1);  // keeps the culled pair's arithmetic finite
  const T z = o.p[2];
  quat_to_rotmat(quat, o.Rq);
  GSW_UNROLL
  for (int i = 0; i < 3; ++i)
    GSW_UNROLL
    for (int j = 0; j < 3; ++j) o.M[3 * i + j] = o.Rq[3 * i + j] * scale[j];
  mat3_mul_bt(o.M, o.M, o.Sigma);
  T tmp[9];
  mat3_mul(cam.W, o.Sigma, tmp);
  mat3_mul_bt(tmp, cam.W, o.covc);
  // Jacobian of the perspective projection, with the camera x/z, y/z clamped to 1.3x the fov.
  const T tan_fovx = T(0.5) * T(width) / cam.fx, tan_fovy = T(0.5) * T(height) / cam.fy;
  const T lim_xp = (T(width) - cam.cx) / cam.fx + T(0.3) * tan_fovx;
  const T lim_xn = cam.cx / cam.fx + T(0.3) * tan_fovx;
  const T lim_yp = (T(height) - cam.cy) / cam.fy + T(0.3) * tan_fovy;
  const T lim_yn = cam.cy / cam.fy + T(0.3) * tan_fovy;
  const T iz = T(1) / z;
  const T xz = o.p[0] * iz, yz = o.p[1] * iz;
  o.clip_x = xz < -lim_xn || xz > lim_xp ? T(1) : T(0);
  o.clip_y = yz < -lim_yn || yz > lim_yp ? T(1) : T(0);
  o.tx = z * (xz < -lim_xn ? -lim_xn : (xz > lim_xp ? lim_xp : xz));
  o.ty = z * (yz < -lim_yn ? -lim_yn : (yz > lim_yp ? lim_yp : yz));
  o.J[0] = cam.fx * iz;
  o.J[1] = 0;
  o.J[2] = -cam.fx * o.tx * iz * iz;
  o.J[3] = 0;
  o.J[4] = cam.fy * iz;
  o.J[5] = -cam.fy * o.ty * iz * iz;
  // cov2 = J covc J^T
  T JC[6];
  GSW_UNROLL
  for (int i = 0; i < 2; ++i)
    GSW_UNROLL
    for (int j = 0; j < 3; ++j)
      JC[3 * i + j] = o.J[3 * i] * o.covc[j] + o.J[3 * i + 1] * o.covc[3 + j] + o.J[3 * i + 2] * o.covc[6 + j];
  const T a0 = JC[0] * o.J[0] + JC[1] * o.J[1] + JC[2] * o.J[2];
  const T b0 = JC[0] * o.J[3] + JC[1] * o.J[4] + JC[2] * o.J[5];
  const T c0 = JC[3] * o.J[3] + JC[4] * o.J[4] + JC[5] * o.J[5];
  o.det_orig = a0 * c0 - b0 * b0;
  o.a = a0 + eps2d;
  o.b = b0;
  o.c = c0 + eps2d;
  const T det = o.a * o.c - o.b * o.b;
  const T pos_det = det > T(0) ? T(1) : T(0);
  o.det = pos_det > T(0) ? det : T(1);
  const T ratio = o.det_orig / o.det;
  o.comp = ratio > T(0) ? sqrt(ratio > T(0) ? ratio : T(0)) : T(0);
  const T idet = T(1) / o.det;
  o.conic[0] = o.c * idet;
  o.conic[1] = -o.b * idet;
  o.conic[2] = o.a * idet;
  // 3-sigma extent of the larger eigenvalue
  const T bm = T(0.5) * (o.a + o.c);
  T disc = bm * bm - o.det;
  disc = disc < T(0.01) ? T(0.01) : disc;
  const T v1 = bm + sqrt(disc);
  T r = ceil(T(3) * sqrt(v1 > T(0) ? v1 : T(0)));
  r = r < T(1073741824) ? r : T(1073741824);  // keeps the int32 cast defined (degenerate pairs only)
  o.radius = static_cast<int32_t>(r);
  o.mean2d[0] = cam.fx * o.p[0] * iz + cam.cx;
  o.mean2d[1] = cam.fy * o.p[1] * iz + cam.cy;
  const T on_image = o.mean2d[0] + r > T(0) && o.mean2d[0] - r < T(width) && o.mean2d[1] + r > T(0) &&
                             o.mean2d[1] - r < T(height)
                         ? T(1)
                         : T(0);
  return in_depth * pos_det * (r > T(0) ? T(1) : T(0)) * on_image > T(0);
}

// Backward of one visible pair. Adds to v_mean[3], v_quat[4], v_scale[3] and to vW[9], vt[3] (the
// viewmat gradient). v_conic are the gradients of the stored conic (a, b, c) entries.
template <typename T>
GSW_HD void project_backward(const T* mean, const T* quat, const T* scale, const Camera<T>& cam, T eps2d,
                             const Projected<T>& o, const T* v_mean2d, T v_depth, const T* v_conic, T v_comp,
                             T* v_mean, T* v_quat, T* v_scale, T* vW, T* vt) {
  const T z = o.p[2], iz = T(1) / z;
  // conic = inv(A): G_A = -C V C with V = [[va, vb/2], [vb/2, vc]]
  const T C0 = o.conic[0], C1 = o.conic[1], C2 = o.conic[2];
  const T V0 = v_conic[0], V1 = T(0.5) * v_conic[1], V2 = v_conic[2];
  // C V
  const T CV00 = C0 * V0 + C1 * V1, CV01 = C0 * V1 + C1 * V2;
  const T CV10 = C1 * V0 + C2 * V1, CV11 = C1 * V1 + C2 * V2;
  T G00 = -(CV00 * C0 + CV01 * C1);
  T G01 = -(CV00 * C1 + CV01 * C2);
  T G11 = -(CV10 * C1 + CV11 * C2);
  // compensation = sqrt(det_orig / det)
  {
    const T vr = o.comp > T(0) ? v_comp * T(0.5) / (o.comp > T(0) ? o.comp : T(1)) : T(0);
    const T ao = o.a - eps2d, co = o.c - eps2d;
    const T id = T(1) / o.det, r = o.det_orig * id * id;
    G00 += vr * (co * id - r * o.c);
    G11 += vr * (ao * id - r * o.a);
    G01 += vr * (-o.b * id + r * o.b);
  }
  // cov2 = J covc J^T (G symmetric): G_covc = J^T G J, G_J = 2 G J covc
  const T G[4] = {G00, G01, G01, G11};
  T GJ[6];  // G J  (2x3)
  GSW_UNROLL
  for (int i = 0; i < 2; ++i)
    GSW_UNROLL
    for (int j = 0; j < 3; ++j) GJ[3 * i + j] = G[2 * i] * o.J[j] + G[2 * i + 1] * o.J[3 + j];
  T Gc[9];
  GSW_UNROLL
  for (int i = 0; i < 3; ++i)
    GSW_UNROLL
    for (int j = 0; j < 3; ++j) Gc[3 * i + j] = o.J[i] * GJ[j] + o.J[3 + i] * GJ[3 + j];
  T vJ[6];
  GSW_UNROLL
  for (int i = 0; i < 2; ++i)
    GSW_UNROLL
    for (int j = 0; j < 3; ++j)
      vJ[3 * i + j] = 2 * (GJ[3 * i] * o.covc[j] + GJ[3 * i + 1] * o.covc[3 + j] + GJ[3 * i + 2] * o.covc[6 + j]);
  // camera-space mean gradient
  T vp[3] = {0, 0, 0};
  vp[0] += cam.fx * iz * v_mean2d[0];
  vp[1] += cam.fy * iz * v_mean2d[1];
  vp[2] += -cam.fx * o.p[0] * iz * iz * v_mean2d[0] - cam.fy * o.p[1] * iz * iz * v_mean2d[1] + v_depth;
  const T iz2 = iz * iz, iz3 = iz2 * iz;
  vp[2] += -cam.fx * iz2 * vJ[0] + 2 * cam.fx * o.tx * iz3 * vJ[2] - cam.fy * iz2 * vJ[4] +
           2 * cam.fy * o.ty * iz3 * vJ[5];
  const T v_tx = -cam.fx * iz2 * vJ[2], v_ty = -cam.fy * iz2 * vJ[5];
  vp[2] += o.clip_x * (v_tx * o.tx * iz) + o.clip_y * (v_ty * o.ty * iz);
  vp[0] += (T(1) - o.clip_x) * v_tx;
  vp[1] += (T(1) - o.clip_y) * v_ty;
  // covc = W Sigma W^T: G_Sigma = W^T Gc W, G_W += 2 Gc W Sigma
  T tmp[9], GS[9], WS[9];
  mat3_mul_at(cam.W, Gc, tmp);
  mat3_mul(tmp, cam.W, GS);
  mat3_mul(cam.W, o.Sigma, WS);
  mat3_mul(Gc, WS, tmp);
  GSW_UNROLL
  for (int k = 0; k < 9; ++k) vW[k] += 2 * tmp[k];
  // p = W mean + t
  GSW_UNROLL
  for (int i = 0; i < 3; ++i) {
    GSW_UNROLL
    for (int j = 0; j < 3; ++j) vW[3 * i + j] += vp[i] * mean[j];
    vt[i] += vp[i];
    v_mean[i] += cam.W[i] * vp[0] + cam.W[3 + i] * vp[1] + cam.W[6 + i] * vp[2];
  }
  // Sigma = M M^T: G_M = 2 G_Sigma M; M = Rq diag(s)
  T GM[9];
  mat3_mul(GS, o.M, GM);
  T GR[9];
  GSW_UNROLL
  for (int i = 0; i < 3; ++i)
    GSW_UNROLL
    for (int j = 0; j < 3; ++j) GR[3 * i + j] = 2 * GM[3 * i + j] * scale[j];
  GSW_UNROLL
  for (int j = 0; j < 3; ++j)
    v_scale[j] += 2 * (GM[j] * o.Rq[j] + GM[3 + j] * o.Rq[3 + j] + GM[6 + j] * o.Rq[6 + j]);
  T vq[4];
  quat_to_rotmat_vjp(quat, GR, vq);
  GSW_UNROLL
  for (int i = 0; i < 4; ++i) v_quat[i] += vq[i];
}

}  // namespace splat
}  // namespace gsw
