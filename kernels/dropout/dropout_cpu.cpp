// dropout, CPU reference (math and layout in dropout.h). Parallelization: plain loops.
#include "kernels/common/instantiate.h"
#include "kernels/dropout/dropout.h"

namespace engine::kernels {

template <typename T>
void dropout_forward_cpu(const T* x, const T* u, int64_t n, T p, T* y, T* mask) {
  const T keep_scale = p < T(1) ? T(1) / (T(1) - p) : T(0);
  for (int64_t i = 0; i < n; ++i) {
    mask[i] = u[i] >= p ? keep_scale : T(0);
    y[i] = x[i] * mask[i];
  }
}

template <typename T>
void dropout_backward_cpu(const T* dy, const T* mask, int64_t n, T* dx) {
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * mask[i];
}

ENGINE_INSTANTIATE_FLOATING(dropout_forward_cpu);
ENGINE_INSTANTIATE_FLOATING(dropout_backward_cpu);

}  // namespace engine::kernels
