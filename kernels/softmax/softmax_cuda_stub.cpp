// softmax_cuda.cu in a build without CUDA: every function throws (kernels/common/cuda_stub.h).
#include "kernels/common/cuda_stub.h"
#include "kernels/softmax/softmax.h"

namespace engine::kernels {

void logsumexp_cuda(const float*, int64_t, int64_t, int64_t, float*) { no_cuda("logsumexp_cuda"); }

void logsumexp_backward_cuda(const float*, const float*, const float*, int64_t, int64_t, int64_t,
                             float*) {
  no_cuda("logsumexp_backward_cuda");
}

void softmax_cuda(const float*, int64_t, int64_t, int64_t, float*) { no_cuda("softmax_cuda"); }

void softmax_backward_cuda(const float*, const float*, int64_t, int64_t, int64_t, float*) {
  no_cuda("softmax_backward_cuda");
}

void log_softmax_cuda(const float*, int64_t, int64_t, int64_t, float*) {
  no_cuda("log_softmax_cuda");
}

void log_softmax_backward_cuda(const float*, const float*, int64_t, int64_t, int64_t, float*) {
  no_cuda("log_softmax_backward_cuda");
}

void cross_entropy_cuda(const float*, const int64_t*, int64_t, int64_t, float*, float*) {
  no_cuda("cross_entropy_cuda");
}

void cross_entropy_backward_cuda(const float*, const int64_t*, const float*, int64_t, int64_t,
                                 const float*, float*) {
  no_cuda("cross_entropy_backward_cuda");
}

}  // namespace engine::kernels
