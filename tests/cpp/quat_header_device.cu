// Device instantiation of every function of csrc/include/gsw/quat.h and gsw/svd3.h, for float and
// double: compiled (not run) by tests/test_quat_header.py wherever nvcc exists, because the CUDA
// kernels instantiate only some of them.
#include "gsw/quat.h"
#include "gsw/svd3.h"

template <typename T>
__global__ void every_quat_function(const T* in, T* out) {
  T ab[4], va[4], vb[4], R[9], vq[4], q[4], vm[9];
  gsw::quat_mul(in, in + 4, ab);
  gsw::quat_mul_vjp(in, in + 4, in + 8, va, vb);
  gsw::quat_to_rotmat(in, R);
  gsw::quat_to_rotmat_vjp(in, in + 12, vq);
  gsw::rotmat_to_quat(in + 21, q);
  gsw::rotmat_to_quat_vjp(in + 21, in + 8, vm);
  double M[9], U[9], sigma[3];
  for (int i = 0; i < 9; ++i) M[i] = in[30 + i];
  gsw::svd3_jacobi(M, U, sigma);
  out[0] = ab[0] + va[0] + vb[0] + R[0] + vq[0] + q[0] + vm[0] + T(U[0] + sigma[0]);
}

template __global__ void every_quat_function<float>(const float*, float*);
template __global__ void every_quat_function<double>(const double*, double*);
