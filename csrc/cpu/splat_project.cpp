// CPU kernels of the 3DGS rasterizer, stage 1: projection of the 3D Gaussians into each camera
// (means2d, depths, conics, compensation, radii) and its analytic backward. The per-Gaussian math is
// gsw/projection.h, shared with the CUDA kernels (csrc/cuda/splat_project.cu); bound to the ops by
// splat_cpu.cpp.
#include <omp.h>

#include <algorithm>
#include <vector>

#include "gsw/parallel.h"
#include "gsw/projection.h"
#include "scan_values.h"
#include "splat.h"

namespace gsw {
namespace splat {
namespace cpu {
namespace {

template <typename T>
std::vector<Camera<T>> load_cameras(const ProjectInputs<T>& in) {
  std::vector<Camera<T>> cams(static_cast<size_t>(in.C));
  for (int64_t c = 0; c < in.C; ++c) cams[c] = load_camera(in.viewmats + 16 * c, in.Ks + 9 * c);
  return cams;
}

// Camera-Gaussian pairs per thread below which the projection wakes no further thread (waking a
// sleeping thread under OMP_WAIT_POLICY=PASSIVE costs more than projecting fewer pairs).
constexpr int64_t kMinProjectPerThread = 4096;

// Gaussians that a checking projection scans and then projects at a time (their 40 bytes in float stay
// in the L1 cache between the two).
constexpr int64_t kProjScanBlock = 256;

// Gaussians [n0, n1) of one camera (n1 - n0 <= kProjBlock): adds their mean, quaternion and scale
// gradients, and writes their viewmat gradients to vw[k * kProjBlock + n - n0] (k < 12; 0 if culled).
constexpr int64_t kProjBlock = 256;

template <typename T>
void project_backward_block(const T* mu, const T* q, const T* s, const Camera<T>& cam, int64_t width, int64_t height,
                            T eps2d, T near_plane, T far_plane, const int32_t* r, const T* vm2, const T* vd,
                            const T* vco, const T* vcp, T* gm, T* gq, T* gs, T* vw, int64_t n0, int64_t n1,
                            int64_t off) {
#pragma GCC ivdep
  for (int64_t n = n0; n < n1; ++n) {
    const int64_t i = off + n;
    Projected<T> o;
    const T okf = (project_forward<T>(mu + 3 * n, q + 4 * n, s + 3 * n, cam, width, height, eps2d, near_plane,
                                      far_plane, o)
                       ? T(1)
                       : T(0)) *
                  T(r[i] > 0 ? 1 : 0);
    const bool ok = okf > T(0);
    T vW[9] = {}, vt[3] = {}, vmu[3] = {}, vq[4] = {}, vs[3] = {};
    project_backward<T>(mu + 3 * n, q + 4 * n, s + 3 * n, cam, eps2d, o, vm2 + 2 * i, vd[i], vco + 3 * i, vcp[i], vmu,
                        vq, vs, vW, vt);
    for (int k = 0; k < 3; ++k) gm[3 * n + k] += ok ? vmu[k] : T(0);
    for (int k = 0; k < 4; ++k) gq[4 * n + k] += ok ? vq[k] : T(0);
    for (int k = 0; k < 3; ++k) gs[3 * n + k] += ok ? vs[k] : T(0);
    for (int k = 0; k < 9; ++k) vw[k * kProjBlock + (n - n0)] = ok ? vW[k] : T(0);
    for (int k = 0; k < 3; ++k) vw[(9 + k) * kProjBlock + (n - n0)] = ok ? vt[k] : T(0);
  }
}

}  // namespace

// The projection loops run over Gaussians for one camera at a time with branch-free per-Gaussian math
// (gsw/projection.h), which the compiler vectorizes (ivdep: the Gaussians are independent).
template <typename T>
void project_forward_kernel(const ProjectForwardParams<T>& p, ProjectionScan* scan) {
  const T* mu = p.in.means;
  const T* q = p.in.quats;
  const T* s = p.in.scales;
  const std::vector<Camera<T>> cams = load_cameras(p.in);
  const int64_t C = p.in.C, N = p.in.N, width = p.in.width, height = p.in.height;
  const T eps2d = p.in.eps2d, near_plane = p.in.near_plane, far_plane = p.in.far_plane;
  int32_t* r = p.radii;
  T* m2 = p.means2d;
  T* d = p.depths;
  T* co = p.conics;
  T* cp = p.comps;
  bool fm = true, fq = true, fs = true, nonneg = true;
#pragma omp parallel num_threads(threads_for(C * N, kMinProjectPerThread)) reduction(&& : fm, fq, fs, nonneg)
  {
    const Range share = thread_range(N);
    // Gaussians [n0, n1) projected into camera c
    const auto project = [&](int64_t c, int64_t n0, int64_t n1) {
      const Camera<T> cam = cams[c];
      const int64_t off = c * N;
#pragma GCC ivdep
      for (int64_t n = n0; n < n1; ++n) {
        Projected<T> o;
        const bool ok =
            project_forward<T>(mu + 3 * n, q + 4 * n, s + 3 * n, cam, width, height, eps2d, near_plane, far_plane, o);
        store_projected(ok, o, off + n, r, m2, d, co, cp);
      }
    };
    const auto scan_block = [&](int64_t n0, int64_t n1) {
      const int64_t k = n1 - n0;
      const ValueStats sc = value_stats(s + 3 * n0, 3 * k);
      fm = fm && value_stats(mu + 3 * n0, 3 * k).nonfinite == 0;
      fq = fq && value_stats(q + 4 * n0, 4 * k).nonfinite == 0;
      fs = fs && sc.nonfinite == 0;
      nonneg = nonneg && sc.lo >= 0.0;
    };
    scan_then_compute(share, C, scan != nullptr, kProjScanBlock, scan_block, project);
  }
  if (scan != nullptr) *scan = {fm, fq, fs, nonneg};
}

template <typename T>
void project_backward_kernel(const ProjectBackwardParams<T>& p) {
  const int64_t N = p.in.N, C = p.in.C, width = p.in.width, height = p.in.height;
  const T eps2d = p.in.eps2d, near_plane = p.in.near_plane, far_plane = p.in.far_plane;
  const auto cams = load_cameras(p.in);
  const T* mu = p.in.means;
  const T* q = p.in.quats;
  const T* s = p.in.scales;
  const int32_t* r = p.radii;
  const T* vm2 = p.v_means2d;
  const T* vd = p.v_depths;
  const T* vco = p.v_conics;
  const T* vcp = p.v_comps;
  T* gm = p.v_means;
  T* gq = p.v_quats;
  T* gs = p.v_scales;
  const int nthreads = threads_for(C * N, kMinProjectPerThread);
  std::vector<double> vview(static_cast<size_t>(nthreads) * C * 12, 0.0);
  const int64_t nblocks = (N + kProjBlock - 1) / kProjBlock;
#pragma omp parallel num_threads(nthreads)
  {
    double* my = vview.data() + static_cast<size_t>(omp_get_thread_num()) * C * 12;
    std::vector<T> vw(static_cast<size_t>(12 * kProjBlock));
#pragma omp for schedule(static)
    for (int64_t b = 0; b < nblocks; ++b) {
      const int64_t n0 = b * kProjBlock, n1 = std::min(N, n0 + kProjBlock);
      for (int64_t c = 0; c < C; ++c) {
        project_backward_block<T>(mu, q, s, cams[c], width, height, eps2d, near_plane, far_plane, r, vm2, vd, vco, vcp,
                                  gm, gq, gs, vw.data(), n0, n1, c * N);
        for (int k = 0; k < 12; ++k) {
          double sum = 0;
          for (int64_t j = 0; j < n1 - n0; ++j) sum += vw[k * kProjBlock + j];
          my[12 * c + k] += sum;
        }
      }
    }
  }
  T* gv = p.v_viewmats;
  for (int64_t c = 0; c < C; ++c) {
    double acc[12] = {0};
    for (int t = 0; t < nthreads; ++t)
      for (int k = 0; k < 12; ++k) acc[k] += vview[(static_cast<size_t>(t) * C + c) * 12 + k];
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) gv[16 * c + 4 * i + j] = static_cast<T>(acc[3 * i + j]);
      gv[16 * c + 4 * i + 3] = static_cast<T>(acc[9 + i]);
    }
  }
}

template void project_forward_kernel<float>(const ProjectForwardParams<float>&, ProjectionScan*);
template void project_forward_kernel<double>(const ProjectForwardParams<double>&, ProjectionScan*);
template void project_backward_kernel<float>(const ProjectBackwardParams<float>&);
template void project_backward_kernel<double>(const ProjectBackwardParams<double>&);

}  // namespace cpu
}  // namespace splat
}  // namespace gsw
