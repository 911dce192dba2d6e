// batch_norm_cuda.cu in a build without CUDA: every function throws (kernels/common/cuda_stub.h).
#include "kernels/batch_norm/batch_norm.h"
#include "kernels/common/cuda_stub.h"

namespace engine::kernels {

void batch_norm_forward_train_cuda(const BatchNormShape&, const float*, const float*, const float*,
                                   float, float, float*, float*, float*, float*, float*) {
  no_cuda("batch_norm_forward_train_cuda");
}

void batch_norm_forward_eval_cuda(const BatchNormShape&, const float*, const float*, const float*,
                                  const float*, const float*, float, float*, float*, float*) {
  no_cuda("batch_norm_forward_eval_cuda");
}

void batch_norm_backward_cuda(const BatchNormShape&, bool, const float*, const float*, const float*,
                              const float*, const float*, float*, float*, float*) {
  no_cuda("batch_norm_backward_cuda");
}

}  // namespace engine::kernels
