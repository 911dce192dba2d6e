// linear_l2_normalize on CUDA (f32): the SGEMM with the bias in its store, then the row
// normalization (math, costs and why it stops there in linear_l2_normalize.h).
#include "kernels/l2_normalize/l2_normalize.h"
#include "kernels/linear_l2_normalize/linear_l2_normalize.h"
#include "kernels/matmul/matmul.h"

namespace engine::kernels {

void linear_l2_normalize_forward_cuda(int64_t m, int64_t n, int64_t k, const float* x,
                                      const float* w, const float* bias, float eps, float* z,
                                      float* y, float* norm) {
  matmul_bias_relu_cuda(m, n, k, x, w, /*trans_a=*/false, /*trans_b=*/true, bias, /*relu=*/false,
                        z);
  l2_normalize_forward_cuda(z, m, n, eps, y, norm);
}

}  // namespace engine::kernels
