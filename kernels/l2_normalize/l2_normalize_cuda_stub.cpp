// l2_normalize_cuda.cu in a build without CUDA: every function throws (kernels/common/cuda_stub.h).
#include "kernels/common/cuda_stub.h"
#include "kernels/l2_normalize/l2_normalize.h"

namespace engine::kernels {

void l2_normalize_forward_cuda(const float*, int64_t, int64_t, float, float*, float*) {
  no_cuda("l2_normalize_forward_cuda");
}

void l2_normalize_backward_cuda(const float*, const float*, const float*, int64_t, int64_t, float,
                                float*) {
  no_cuda("l2_normalize_backward_cuda");
}

}  // namespace engine::kernels
