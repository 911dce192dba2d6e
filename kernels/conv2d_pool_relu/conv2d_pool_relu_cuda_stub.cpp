// conv2d_pool_relu_cuda.cu in a build without CUDA: every function throws
// (kernels/common/cuda_stub.h).
#include "kernels/common/cuda_stub.h"
#include "kernels/conv2d_pool_relu/conv2d_pool_relu.h"

namespace engine::kernels {

void conv2d_pool_relu_forward_cuda(const Conv2dShape&, const float*, const float*, const float*,
                                   float*, uint8_t*) {
  no_cuda("conv2d_pool_relu_forward_cuda");
}

void conv2d_pool_relu_unpool_cuda(const Conv2dShape&, const float*, const uint8_t*, float*) {
  no_cuda("conv2d_pool_relu_unpool_cuda");
}

}  // namespace engine::kernels
