// linear_l2_normalize_cuda.cu in a build without CUDA: every function throws
// (kernels/common/cuda_stub.h).
#include "kernels/common/cuda_stub.h"
#include "kernels/linear_l2_normalize/linear_l2_normalize.h"

namespace engine::kernels {

void linear_l2_normalize_forward_cuda(int64_t, int64_t, int64_t, const float*, const float*,
                                      const float*, float, float*, float*, float*) {
  no_cuda("linear_l2_normalize_forward_cuda");
}

}  // namespace engine::kernels
