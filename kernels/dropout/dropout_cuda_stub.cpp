// dropout_cuda.cu in a build without CUDA: every function throws (kernels/common/cuda_stub.h).
#include "kernels/common/cuda_stub.h"
#include "kernels/dropout/dropout.h"

namespace engine::kernels {

void dropout_forward_cuda(const float*, const float*, int64_t, float, float*, float*) {
  no_cuda("dropout_forward_cuda");
}

void dropout_backward_cuda(const float*, const float*, int64_t, float*) {
  no_cuda("dropout_backward_cuda");
}

}  // namespace engine::kernels
