// axpy, CPU reference: y[i] += alpha * x[i].
#include "kernels/axpy/axpy.h"

namespace engine::kernels {

template <typename T>
void axpy_cpu(int64_t n, T alpha, const T* x, T* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

template void axpy_cpu<float>(int64_t, float, const float*, float*);
template void axpy_cpu<double>(int64_t, double, const double*, double*);

}  // namespace engine::kernels
