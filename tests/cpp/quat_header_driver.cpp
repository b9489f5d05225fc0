// Test driver of csrc/include/gsw/quat.h and gsw/svd3.h (built and run by tests/test_quat_header.py).
// stdin: a count, then per case 39 doubles: a[4] b[4] v[4] G[9] M[9] S[9] (quaternions a, b; a
// quaternion gradient v; a matrix gradient G; a rotation M; any matrix S). stdout: per case one line of
// quat_mul(a, b)[4], its VJP at v (v_a[4], v_b[4]), quat_to_rotmat(a)[9], its VJP at G [4],
// rotmat_to_quat(M)[4], its VJP at v [9], svd3_jacobi(S): U[9], sigma[3].
#include <cstdio>

#include "gsw/quat.h"
#include "gsw/svd3.h"

namespace {

void print(const double* x, int n) {
  for (int i = 0; i < n; ++i) std::printf("%.17g ", x[i]);
}

}  // namespace

int main() {
  int count = 0;
  if (std::scanf("%d", &count) != 1) return 1;
  for (int c = 0; c < count; ++c) {
    double in[39];
    for (double& x : in)
      if (std::scanf("%lf", &x) != 1) return 1;
    const double *a = in, *b = in + 4, *v = in + 8, *G = in + 12, *M = in + 21, *S = in + 30;
    double ab[4], va[4], vb[4], R[9], vq[4], q[4], vm[9], U[9], sigma[3];
    gsw::quat_mul(a, b, ab);
    gsw::quat_mul_vjp(a, b, v, va, vb);
    gsw::quat_to_rotmat(a, R);
    gsw::quat_to_rotmat_vjp(a, G, vq);
    gsw::rotmat_to_quat(M, q);
    gsw::rotmat_to_quat_vjp(M, v, vm);
    gsw::svd3_jacobi(S, U, sigma);
    print(ab, 4), print(va, 4), print(vb, 4), print(R, 9), print(vq, 4), print(q, 4), print(vm, 9);
    print(U, 9), print(sigma, 3);
    std::printf("\n");
  }
  return 0;
}
