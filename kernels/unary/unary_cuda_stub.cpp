// unary_cuda.cu in a build without CUDA: every function throws (kernels/common/cuda_stub.h).
#include "kernels/common/cuda_stub.h"
#include "kernels/unary/unary.h"

namespace engine::kernels {

void unary_cuda(UnaryOp, const float*, int64_t, UnaryParams, float*) { no_cuda("unary_cuda"); }

void unary_backward_cuda(UnaryOp, const float*, const float*, const float*, int64_t, UnaryParams,
                         float*) {
  no_cuda("unary_backward_cuda");
}

}  // namespace engine::kernels
