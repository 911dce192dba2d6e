// optim_cuda.cu in a build without CUDA: every function throws (kernels/common/cuda_stub.h).
#include "kernels/common/cuda_stub.h"
#include "kernels/optim/optim.h"

namespace engine::kernels {

void sgd_update_multi_cuda(const SgdTensorRef*, int64_t, const SgdHyper&) {
  no_cuda("sgd_update_multi_cuda");
}

void adam_update_multi_cuda(const AdamTensorRef*, int64_t, const AdamHyper&) {
  no_cuda("adam_update_multi_cuda");
}

}  // namespace engine::kernels
