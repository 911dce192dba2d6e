// reduce_cuda.cu in a build without CUDA: every function throws (kernels/common/cuda_stub.h).
#include "kernels/common/cuda_stub.h"
#include "kernels/reduce/reduce.h"

namespace engine::kernels {

void sum_axis_cuda(const float*, int64_t, int64_t, int64_t, float, float*) {
  no_cuda("sum_axis_cuda");
}

void broadcast_cuda(const float*, StridedLayout, float, float*) { no_cuda("broadcast_cuda"); }

}  // namespace engine::kernels
