// l2_normalize, CPU reference (math, layout and cost in l2_normalize.h).
#include <algorithm>
#include <cmath>

#include "kernels/common/instantiate.h"
#include "kernels/l2_normalize/l2_normalize.h"

namespace engine::kernels {

template <typename T>
void l2_normalize_forward_cpu(const T* x, int64_t N, int64_t D, T eps, T* y, T* norm) {
  for (int64_t i = 0; i < N; ++i) {
    const T* row = x + i * D;
    double squares = 0.0;
    for (int64_t d = 0; d < D; ++d) squares += double(row[d]) * row[d];
    norm[i] = static_cast<T>(std::sqrt(squares));
    const T divisor = std::max(norm[i], eps);
    for (int64_t d = 0; d < D; ++d) y[i * D + d] = row[d] / divisor;
  }
}

template <typename T>
void l2_normalize_backward_cpu(const T* dy, const T* x, const T* norm, int64_t N, int64_t D, T eps,
                               T* dx) {
  for (int64_t i = 0; i < N; ++i) {
    const T* x_row = x + i * D;
    const T* dy_row = dy + i * D;
    T* dx_row = dx + i * D;
    if (norm[i] < eps) {
      for (int64_t d = 0; d < D; ++d) dx_row[d] = dy_row[d] / eps;
      continue;
    }
    // With y = x / n:  dx = dy / n - x <x, dy> / n^3  (the projection of dy off the direction y).
    const double n = norm[i];
    double x_dot_dy = 0.0;
    for (int64_t d = 0; d < D; ++d) x_dot_dy += double(x_row[d]) * dy_row[d];
    const double along = x_dot_dy / (n * n * n);
    for (int64_t d = 0; d < D; ++d) {
      dx_row[d] = static_cast<T>(dy_row[d] / n - x_row[d] * along);
    }
  }
}

ENGINE_INSTANTIATE_FLOATING(l2_normalize_forward_cpu);
ENGINE_INSTANTIATE_FLOATING(l2_normalize_backward_cpu);

}  // namespace engine::kernels
