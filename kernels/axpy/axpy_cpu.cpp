// axpy, CPU reference: y[i] += alpha * x[i].
#include "kernels/axpy/axpy.h"
#include "kernels/common/instantiate.h"

namespace engine::kernels {

template <typename T>
void axpy_cpu(int64_t n, T alpha, const T* x, T* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

ENGINE_INSTANTIATE_FLOATING(axpy_cpu);

}  // namespace engine::kernels
