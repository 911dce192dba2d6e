// conv2d_mma_cuda.cu in a build without CUDA: every function throws (kernels/common/cuda_stub.h).
#include "kernels/common/cuda_stub.h"
#include "kernels/conv2d/conv2d_mma.h"

namespace engine::kernels {

void conv2d_fprop_mma_cuda(const Conv2dShape&, const float*, const float*, const float*, float*,
                           Precision) {
  no_cuda("conv2d_fprop_mma_cuda");
}

void conv2d_dgrad_mma_cuda(const Conv2dShape&, const float*, const float*, float*, Precision) {
  no_cuda("conv2d_dgrad_mma_cuda");
}

int64_t conv2d_wgrad_mma_cuda_workspace_size(const Conv2dShape&) {
  no_cuda("conv2d_wgrad_mma_cuda_workspace_size");
}

void conv2d_wgrad_mma_cuda(const Conv2dShape&, const float*, const float*, float*, float*, float*,
                           Precision) {
  no_cuda("conv2d_wgrad_mma_cuda");
}

}  // namespace engine::kernels
