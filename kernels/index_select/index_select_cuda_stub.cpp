// index_select_cuda.cu in a build without CUDA: every function throws (kernels/common/cuda_stub.h).
#include "kernels/common/cuda_stub.h"
#include "kernels/index_select/index_select.h"

namespace engine::kernels {

void index_select_forward_cuda(const float*, int64_t, int64_t, const int64_t*, int64_t, float*) {
  no_cuda("index_select_forward_cuda");
}

void index_select_forward_cuda(const int64_t*, int64_t, int64_t, const int64_t*, int64_t,
                               int64_t*) {
  no_cuda("index_select_forward_cuda");
}

void index_select_backward_cuda(const float*, const int64_t*, int64_t, int64_t, int64_t, float*) {
  no_cuda("index_select_backward_cuda");
}

}  // namespace engine::kernels
