// Every op schema of the gsworkbench library, in one place. Implementations register per backend in
// csrc/cpu/*.cpp (CPU) and csrc/cuda/*.cpp (CUDA). Python wrappers, fake kernels and autograd live
// beside each capability in gsworkbench/ (e.g. gsworkbench/field/ops.py).
#include <Python.h>
#include <torch/library.h>

extern "C" {
// An empty module: importing gsworkbench._C loads this library, which registers the ops.
PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  return PyModule_Create(&module_def);
}
}

TORCH_LIBRARY(gsworkbench, m) {
  // ---- field (gsworkbench/field/ops.py) ----
  // points [B,3], means [N,3], factors [N,3,3] lower Cholesky, weights [N] -> values [B]
  m.def("field_forward(Tensor points, Tensor means, Tensor factors, Tensor weights) -> Tensor");
  // -> (grad_points [B,3], grad_means [N,3], grad_factors [N,3,3], grad_weights [N])
  m.def(
      "field_backward(Tensor grad_values, Tensor points, Tensor means, Tensor factors, Tensor weights)"
      " -> (Tensor, Tensor, Tensor, Tensor)");

  // ---- transforms (gsworkbench/transforms/) ----
  // Writes F transformed copies of N splats into the out tensors (see csrc/include/gsw/transforms.h):
  // means [N,3], quats [N,4], log_scales [N,3], sh_rest [N,K,3]; per frame: affine [F,12] (A row-major,
  // then b) and sh_rot [F,K,K]; general=false: A = s R (quats rotated, log s added), general=true:
  // any A with det > 0 (covariances re-decomposed per Gaussian).
  // out_means [F,N,3], out_quats [F,N,4], out_log_scales [F,N,3], out_sh_rest [F,N,K,3].
  m.def(
      "transform_splats(Tensor means, Tensor quats, Tensor log_scales, Tensor sh_rest, Tensor affine,"
      " Tensor sh_rot, bool general, Tensor(a!) out_means, Tensor(b!) out_quats,"
      " Tensor(c!) out_log_scales, Tensor(d!) out_sh_rest) -> ()");

  // ---- splat rasterizer (gsworkbench/splat/) ----
}
