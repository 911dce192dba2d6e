// linear_relu on the CPU: the reference, composed of the unfused reference ops (linear_relu.h).
#include "kernels/linear_relu/linear_relu.h"

#include "kernels/common/instantiate.h"
#include "kernels/matmul/matmul.h"
#include "kernels/unary/unary.h"

namespace engine::kernels {

template <typename T>
void linear_relu_forward_cpu(int64_t m, int64_t n, int64_t k, const T* x, const T* w, const T* bias,
                             T* y) {
  matmul_cpu(m, n, k, x, w, /*trans_a=*/false, /*trans_b=*/true, y, /*accumulate=*/false);
  if (bias != nullptr) add_row_bias_cpu(m, n, bias, y);
  unary_cpu(UnaryOp::Relu, y, m * n, UnaryParams{}, y);
}

ENGINE_INSTANTIATE_FLOATING(linear_relu_forward_cpu);

}  // namespace engine::kernels
