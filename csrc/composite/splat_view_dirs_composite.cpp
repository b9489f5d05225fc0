// gsworkbench::splat_view_dirs and its backward: the SH view directions, each mean minus each camera
// centre. Device-agnostic (a handful of ATen ops on [C,4,4] camera matrices), registered for every
// backend (CompositeExplicitAutograd; the fake kernel too) except the CPU, which has plain loops
// (csrc/cpu/splat_view_dirs.cpp). Autograd in csrc/autograd/splat_autograd.cpp: one node in place of
// the dozen that the same ops written in Python put in a tiny call's graph. Torch reference:
// gsworkbench/splat/_torch_impl.py view_dirs.
#include "gsw/aten_ops.h"  // first: before any ATen header

#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/matmul.h>
#include <torch/library.h>

#include <tuple>

#include "gsw/autograd_util.h"
#include "gsw/splat_op.h"

namespace gsw {
namespace splat {
namespace {

using at::Tensor;

// dirs[c, n] = means[n] - centre_c, with centre_c = -R_c^T t_c for viewmats_c = [R_c t_c; 0 1]: computed
// as means[n] + t_c^T R_c, broadcast over the means ([N,3] + [C,1,3]).
Tensor view_dirs(const Tensor& means, const Tensor& viewmats) {
  check_view_dirs_inputs(means, viewmats);
  const Tensor top = viewmats.narrow(1, 0, 3);  // [C,3,4]: R | t
  return means.add(at::matmul(top.narrow(2, 3, 1).transpose(1, 2), top.narrow(2, 0, 3)));
}

// With g_c = sum_n v_dirs[c, n] ([C,3]): v_means = sum_c v_dirs[c], v_R_c = t_c g_c^T, v_t_c = R_c g_c;
// the bottom row of v_viewmats is zero.
std::tuple<Tensor, Tensor> view_dirs_backward(const Tensor& v_dirs, const Tensor& means, const Tensor& viewmats) {
  check_view_dirs_grads(v_dirs, means, viewmats);
  const Tensor v = v_dirs.scalar_type() == means.scalar_type() ? v_dirs : v_dirs.to(means.scalar_type());
  const Tensor g = v.sum(1).unsqueeze(1);  // [C,1,3]
  const Tensor top = viewmats.narrow(1, 0, 3);
  const Tensor v_R = top.narrow(2, 3, 1).mul(g);                          // t g^T [C,3,3]
  const Tensor v_t = at::matmul(top.narrow(2, 0, 3), g.transpose(1, 2));  // R g   [C,3,1]
  const Tensor v_viewmats = at::constant_pad_nd(at::cat({v_R, v_t}, 2), {0, 0, 0, 1});  // zero bottom row
  return {v.sum(0), v_viewmats};
}

// splat_sh_colors_from_cameras below autograd (and its fake kernel): the two ops in turn.
Tensor sh_colors_from_cameras(const Tensor& coeffs, const Tensor& means, const Tensor& viewmats, int64_t degree,
                              const c10::optional<Tensor>& coeffs_rest, bool check_finite) {
  static const auto dirs_op = op_handle<Tensor(const Tensor&, const Tensor&)>("gsworkbench::splat_view_dirs");
  static const auto sh_op =
      op_handle<Tensor(const Tensor&, const Tensor&, int64_t, const c10::optional<Tensor>&, bool)>(
          "gsworkbench::splat_sh_to_color");
  return sh_op.call(coeffs, dirs_op.call(means, viewmats), degree, coeffs_rest, check_finite);
}

}  // namespace
}  // namespace splat
}  // namespace gsw

TORCH_LIBRARY_IMPL(gsworkbench, CompositeExplicitAutograd, m) {
  m.impl("splat_sh_colors_from_cameras", &gsw::splat::sh_colors_from_cameras);
  m.impl("splat_view_dirs", &gsw::splat::view_dirs);
  m.impl("splat_view_dirs_backward", &gsw::splat::view_dirs_backward);
}
