// CPU kernels of the splat transforms: one fused pass over the splats per frame, OpenMP over blocks
// of kBlock Gaussians; each block is transposed to SoA in a small stack buffer so the per-Gaussian
// math (csrc/include/gsw/transforms.h) runs as SIMD across the Gaussians of the block.
#include <ATen/ATen.h>
#include <omp.h>
#include <torch/library.h>

#include "gsw/transforms.h"

namespace gsw {
namespace transforms {
namespace {

constexpr int64_t kBlock = 16;

struct Frame {
  const void* affine;  // [12]: A row-major, then b
  const void* quat;    // [4]
  const void* log_s;   // [1]
  const void* sh_rot;  // [K,K]
};

// Means, quaternions and log-scales of Gaussians [n0, n0+count) of one frame (uniform case).
template <typename T>
void similarity_block(const T* A, const T* b, const T* qr, T log_s, const T* means, const T* quats,
                      const T* log_scales, T* om, T* oq, T* os, int64_t n0, int64_t count) {
  alignas(64) T m[3][kBlock], q[4][kBlock], s[3][kBlock];
  if (count == kBlock) {
    for (int64_t j = 0; j < kBlock; ++j)
      for (int c = 0; c < 3; ++c) m[c][j] = means[3 * (n0 + j) + c];
    for (int64_t j = 0; j < kBlock; ++j)
      for (int c = 0; c < 4; ++c) q[c][j] = quats[4 * (n0 + j) + c];
    for (int64_t j = 0; j < kBlock; ++j)
      for (int c = 0; c < 3; ++c) s[c][j] = log_scales[3 * (n0 + j) + c];
#pragma omp simd aligned(m, q, s : 64)
    for (int64_t j = 0; j < kBlock; ++j) {
      T x, y, z, w, qx, qy, qz;
      affine_point(A, b, m[0][j], m[1][j], m[2][j], x, y, z);
      m[0][j] = x, m[1][j] = y, m[2][j] = z;
      quat_left_mul(qr, q[0][j], q[1][j], q[2][j], q[3][j], w, qx, qy, qz);
      q[0][j] = w, q[1][j] = qx, q[2][j] = qy, q[3][j] = qz;
      s[0][j] += log_s, s[1][j] += log_s, s[2][j] += log_s;
    }
    for (int64_t j = 0; j < kBlock; ++j)
      for (int c = 0; c < 3; ++c) om[3 * (n0 + j) + c] = m[c][j];
    for (int64_t j = 0; j < kBlock; ++j)
      for (int c = 0; c < 4; ++c) oq[4 * (n0 + j) + c] = q[c][j];
    for (int64_t j = 0; j < kBlock; ++j)
      for (int c = 0; c < 3; ++c) os[3 * (n0 + j) + c] = s[c][j];
  } else {  // tail
    for (int64_t n = n0; n < n0 + count; ++n) {
      affine_point(A, b, means[3 * n], means[3 * n + 1], means[3 * n + 2], om[3 * n], om[3 * n + 1], om[3 * n + 2]);
      quat_left_mul(qr, quats[4 * n], quats[4 * n + 1], quats[4 * n + 2], quats[4 * n + 3], oq[4 * n],
                    oq[4 * n + 1], oq[4 * n + 2], oq[4 * n + 3]);
      for (int c = 0; c < 3; ++c) os[3 * n + c] = log_scales[3 * n + c] + log_s;
    }
  }
}

// Means (affine) and covariance re-decomposition of one block (general case; scalar, double inside).
template <typename T>
void general_block(const T* A, const T* b, const T* means, const T* quats, const T* log_scales, T* om, T* oq,
                   T* os, int64_t n0, int64_t count) {
  double Ad[9];
  for (int i = 0; i < 9; ++i) Ad[i] = A[i];
  for (int64_t n = n0; n < n0 + count; ++n) {
    affine_point(A, b, means[3 * n], means[3 * n + 1], means[3 * n + 2], om[3 * n], om[3 * n + 1], om[3 * n + 2]);
    double q[4], ls[3];
    general_covariance(Ad, quats[4 * n], quats[4 * n + 1], quats[4 * n + 2], quats[4 * n + 3], log_scales[3 * n],
                       log_scales[3 * n + 1], log_scales[3 * n + 2], q, ls);
    for (int c = 0; c < 4; ++c) oq[4 * n + c] = static_cast<T>(q[c]);
    for (int c = 0; c < 3; ++c) os[3 * n + c] = static_cast<T>(ls[c]);
  }
}

// SH rest of one block: [count, K, 3] AoS -> per-channel SoA -> bands rotated as SIMD over Gaussians.
template <typename T, int Deg>
void sh_block(const T* D, const T* sh, T* osh, int64_t n0, int64_t count) {
  constexpr int K = (Deg + 1) * (Deg + 1) - 1;
  constexpr int E = 3 * K;  // floats per Gaussian
  alignas(64) T in[3][K][kBlock], out[3][K][kBlock];
  const T* src = sh + n0 * E;
  for (int64_t j = 0; j < kBlock; ++j) {
    const int64_t jj = j < count ? j : 0;  // padded lanes repeat the first Gaussian
    for (int k = 0; k < K; ++k)
      for (int c = 0; c < 3; ++c) in[c][k][j] = src[jj * E + 3 * k + c];
  }
  for (int c = 0; c < 3; ++c) {
#pragma omp simd aligned(in, out : 64)
    for (int64_t j = 0; j < kBlock; ++j) {
      if constexpr (Deg >= 1) rotate_band<T, 1>(D, K, &in[c][0][j], &out[c][0][j], kBlock);
      if constexpr (Deg >= 2) rotate_band<T, 2>(D, K, &in[c][0][j], &out[c][0][j], kBlock);
      if constexpr (Deg >= 3) rotate_band<T, 3>(D, K, &in[c][0][j], &out[c][0][j], kBlock);
    }
  }
  T* dst = osh + n0 * E;
  for (int64_t j = 0; j < count; ++j)
    for (int k = 0; k < K; ++k)
      for (int c = 0; c < 3; ++c) dst[j * E + 3 * k + c] = out[c][k][j];
}

template <typename T, int Deg>
void run(const at::Tensor& means, const at::Tensor& quats, const at::Tensor& log_scales, const at::Tensor& sh_rest,
         const at::Tensor& affine, const at::Tensor& quat_r, const at::Tensor& log_s, const at::Tensor& sh_rot,
         bool general, at::Tensor& out_means, at::Tensor& out_quats, at::Tensor& out_log_scales,
         at::Tensor& out_sh_rest) {
  constexpr int K = (Deg + 1) * (Deg + 1) - 1;
  const int64_t F = affine.size(0), N = means.size(0);
  const int64_t nblocks = (N + kBlock - 1) / kBlock;
  const T* mu = means.data_ptr<T>();
  const T* q = quats.data_ptr<T>();
  const T* ls = log_scales.data_ptr<T>();
  const T* sh = K ? sh_rest.data_ptr<T>() : nullptr;
  const T* aff = affine.data_ptr<T>();
  const T* qr = quat_r.data_ptr<T>();
  const T* lsr = log_s.data_ptr<T>();
  const T* D = K ? sh_rot.data_ptr<T>() : nullptr;
  T* om = out_means.data_ptr<T>();
  T* oq = out_quats.data_ptr<T>();
  T* os = out_log_scales.data_ptr<T>();
  T* osh = K ? out_sh_rest.data_ptr<T>() : nullptr;
  const int64_t total = F * nblocks;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < total; ++t) {
    DenormalsOff ftz;
    const int64_t f = t / nblocks, blk = t - f * nblocks;
    const int64_t n0 = blk * kBlock, count = N - n0 < kBlock ? N - n0 : kBlock;
    const T* A = aff + 12 * f;
    T* fm = om + f * N * 3;
    T* fq = oq + f * N * 4;
    T* fs = os + f * N * 3;
    if (general) {
      general_block(A, A + 9, mu, q, ls, fm, fq, fs, n0, count);
    } else {
      similarity_block(A, A + 9, qr + 4 * f, lsr[f], mu, q, ls, fm, fq, fs, n0, count);
    }
    if constexpr (K > 0) sh_block<T, Deg>(D + f * K * K, sh, osh + f * N * K * 3, n0, count);
  }
}

void check_tensor(const at::Tensor& t, const char* name, at::IntArrayRef shape, at::ScalarType dtype) {
  TORCH_CHECK(t.device().is_cpu(), "transform_splats: ", name, " must be a CPU tensor");
  TORCH_CHECK(t.scalar_type() == dtype, "transform_splats: ", name, " has dtype ", t.scalar_type(), ", expected ",
              dtype);
  TORCH_CHECK(t.sizes() == shape, "transform_splats: ", name, " must have shape ", shape, ", got ", t.sizes());
  TORCH_CHECK(t.is_contiguous(), "transform_splats: ", name, " must be contiguous");
}

void transform_splats_cpu(const at::Tensor& means, const at::Tensor& quats, const at::Tensor& log_scales,
                          const at::Tensor& sh_rest, const at::Tensor& affine, const at::Tensor& quat_r,
                          const at::Tensor& log_s, const at::Tensor& sh_rot, bool general, at::Tensor out_means,
                          at::Tensor out_quats, at::Tensor out_log_scales, at::Tensor out_sh_rest) {
  const auto dt = means.scalar_type();
  TORCH_CHECK(dt == at::kFloat || dt == at::kDouble, "transform_splats: dtype must be float32 or float64");
  TORCH_CHECK(means.dim() == 2 && affine.dim() == 2 && sh_rest.dim() == 3, "transform_splats: bad ranks");
  const int64_t N = means.size(0), F = affine.size(0), K = sh_rest.size(1);
  TORCH_CHECK(K == 0 || K == 3 || K == 8 || K == 15, "transform_splats: sh_rest must have 0, 3, 8 or 15 coefficients");
  check_tensor(means, "means", {N, 3}, dt);
  check_tensor(quats, "quats", {N, 4}, dt);
  check_tensor(log_scales, "log_scales", {N, 3}, dt);
  check_tensor(sh_rest, "sh_rest", {N, K, 3}, dt);
  check_tensor(affine, "affine", {F, 12}, dt);
  check_tensor(quat_r, "quat_r", {F, 4}, dt);
  check_tensor(log_s, "log_s", {F}, dt);
  check_tensor(sh_rot, "sh_rot", {F, K, K}, dt);
  check_tensor(out_means, "out_means", {F, N, 3}, dt);
  check_tensor(out_quats, "out_quats", {F, N, 4}, dt);
  check_tensor(out_log_scales, "out_log_scales", {F, N, 3}, dt);
  check_tensor(out_sh_rest, "out_sh_rest", {F, N, K, 3}, dt);
  AT_DISPATCH_FLOATING_TYPES(dt, "transform_splats_cpu", [&] {
    switch (K) {
      case 0: run<scalar_t, 0>(means, quats, log_scales, sh_rest, affine, quat_r, log_s, sh_rot, general, out_means, out_quats, out_log_scales, out_sh_rest); break;
      case 3: run<scalar_t, 1>(means, quats, log_scales, sh_rest, affine, quat_r, log_s, sh_rot, general, out_means, out_quats, out_log_scales, out_sh_rest); break;
      case 8: run<scalar_t, 2>(means, quats, log_scales, sh_rest, affine, quat_r, log_s, sh_rot, general, out_means, out_quats, out_log_scales, out_sh_rest); break;
      default: run<scalar_t, 3>(means, quats, log_scales, sh_rest, affine, quat_r, log_s, sh_rot, general, out_means, out_quats, out_log_scales, out_sh_rest); break;
    }
  });
}

}  // namespace
}  // namespace transforms
}  // namespace gsw

TORCH_LIBRARY_IMPL(gsworkbench, CPU, m) { m.impl("transform_splats", &gsw::transforms::transform_splats_cpu); }
