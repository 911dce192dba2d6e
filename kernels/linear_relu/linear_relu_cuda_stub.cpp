// linear_relu_cuda.cu in a build without CUDA: every function throws (kernels/common/cuda_stub.h).
#include "kernels/common/cuda_stub.h"
#include "kernels/linear_relu/linear_relu.h"

namespace engine::kernels {

void linear_relu_forward_cuda(int64_t, int64_t, int64_t, const float*, const float*, const float*,
                              float*) {
  no_cuda("linear_relu_forward_cuda");
}

}  // namespace engine::kernels
