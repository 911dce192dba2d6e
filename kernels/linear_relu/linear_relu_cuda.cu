// linear_relu on CUDA (f32): one SGEMM whose tile stores relu(acc + bias) (math, costs and the
// bit-exactness argument in linear_relu.h; the tile and its epilogue in kernels/matmul).
#include "kernels/linear_relu/linear_relu.h"
#include "kernels/matmul/matmul.h"

namespace engine::kernels {

void linear_relu_forward_cuda(int64_t m, int64_t n, int64_t k, const float* x, const float* w,
                              const float* bias, float* y) {
  matmul_bias_relu_cuda(m, n, k, x, w, /*trans_a=*/false, /*trans_b=*/true, bias, /*relu=*/true, y);
}

}  // namespace engine::kernels
