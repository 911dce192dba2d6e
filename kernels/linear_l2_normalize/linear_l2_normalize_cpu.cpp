// linear_l2_normalize on the CPU: the reference, composed of the unfused reference ops
// (linear_l2_normalize.h).
#include "kernels/linear_l2_normalize/linear_l2_normalize.h"

#include "kernels/common/instantiate.h"
#include "kernels/l2_normalize/l2_normalize.h"
#include "kernels/matmul/matmul.h"

namespace engine::kernels {

template <typename T>
void linear_l2_normalize_forward_cpu(int64_t m, int64_t n, int64_t k, const T* x, const T* w,
                                     const T* bias, T eps, T* z, T* y, T* norm) {
  matmul_cpu(m, n, k, x, w, /*trans_a=*/false, /*trans_b=*/true, z, /*accumulate=*/false);
  if (bias != nullptr) add_row_bias_cpu(m, n, bias, z);
  l2_normalize_forward_cpu(z, m, n, eps, y, norm);
}

ENGINE_INSTANTIATE_FLOATING(linear_l2_normalize_forward_cpu);

}  // namespace engine::kernels
