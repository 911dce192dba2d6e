// concat_cuda.cu in a build without CUDA: every function throws (kernels/common/cuda_stub.h).
#include "kernels/common/cuda_stub.h"
#include "kernels/concat/concat.h"

namespace engine::kernels {

void concat_cuda(int64_t, const float* const*, const int64_t*, int64_t, float*) {
  no_cuda("concat_cuda");
}

void concat_cuda(int64_t, const int64_t* const*, const int64_t*, int64_t, int64_t*) {
  no_cuda("concat_cuda");
}

}  // namespace engine::kernels
