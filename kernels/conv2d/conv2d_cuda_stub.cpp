// conv2d_cuda.cu, conv2d_dgrad_direct_cuda.cu, conv2d_tensor_core_cuda.cu in a build without CUDA:
// every function throws (kernels/common/cuda_stub.h).
#include "kernels/common/cuda_stub.h"
#include "kernels/conv2d/conv2d.h"

namespace engine::kernels {

void conv2d_fprop_cuda(const Conv2dShape&, const float*, const float*, const float*, float*,
                       ConvTile) {
  no_cuda("conv2d_fprop_cuda");
}

void conv2d_dgrad_cuda(const Conv2dShape&, const float*, const float*, float*, ConvTile) {
  no_cuda("conv2d_dgrad_cuda");
}

void conv2d_dgrad_direct_cuda(const Conv2dShape&, const float*, const float*, float*) {
  no_cuda("conv2d_dgrad_direct_cuda");
}

int64_t conv2d_wgrad_cuda_workspace_size(const Conv2dShape&, ConvTile) {
  no_cuda("conv2d_wgrad_cuda_workspace_size");
}

void conv2d_wgrad_cuda(const Conv2dShape&, const float*, const float*, float*, float*, float*,
                       ConvTile) {
  no_cuda("conv2d_wgrad_cuda");
}

void conv2d_fprop_tensor_core_cuda(const Conv2dShape&, const float*, const float*, const float*,
                                   float*, Precision) {
  no_cuda("conv2d_fprop_tensor_core_cuda");
}

void conv2d_dgrad_tensor_core_cuda(const Conv2dShape&, const float*, const float*, float*,
                                   Precision) {
  no_cuda("conv2d_dgrad_tensor_core_cuda");
}

int64_t conv2d_wgrad_tensor_core_cuda_workspace_size(const Conv2dShape&, Precision) {
  no_cuda("conv2d_wgrad_tensor_core_cuda_workspace_size");
}

void conv2d_wgrad_tensor_core_cuda(const Conv2dShape&, const float*, const float*, float*, float*,
                                   float*, Precision) {
  no_cuda("conv2d_wgrad_tensor_core_cuda");
}

}  // namespace engine::kernels
