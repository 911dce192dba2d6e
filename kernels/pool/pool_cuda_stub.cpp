// pool_cuda.cu in a build without CUDA: every function throws (kernels/common/cuda_stub.h).
#include "kernels/common/cuda_stub.h"
#include "kernels/pool/pool.h"

namespace engine::kernels {

void max_pool2d_forward_cuda(const Pool2dShape&, const float*, float*) {
  no_cuda("max_pool2d_forward_cuda");
}

void max_pool2d_backward_cuda(const Pool2dShape&, const float*, const float*, float*) {
  no_cuda("max_pool2d_backward_cuda");
}

void avg_pool2d_forward_cuda(const Pool2dShape&, const float*, float*) {
  no_cuda("avg_pool2d_forward_cuda");
}

void avg_pool2d_backward_cuda(const Pool2dShape&, const float*, float*) {
  no_cuda("avg_pool2d_backward_cuda");
}

void adaptive_avg_pool2d_forward_cuda(int64_t, int64_t, const float*, float*) {
  no_cuda("adaptive_avg_pool2d_forward_cuda");
}

void adaptive_avg_pool2d_backward_cuda(int64_t, int64_t, const float*, float*) {
  no_cuda("adaptive_avg_pool2d_backward_cuda");
}

}  // namespace engine::kernels
