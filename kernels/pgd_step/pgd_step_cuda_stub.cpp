// pgd_step_cuda.cu in a build without CUDA: every function throws (kernels/common/cuda_stub.h).
#include "kernels/common/cuda_stub.h"
#include "kernels/pgd_step/pgd_step.h"

namespace engine::kernels {

void pgd_step_cuda(int64_t, const float*, const float*, const float*, float, float, float*,
                   float*) {
  no_cuda("pgd_step_cuda");
}

}  // namespace engine::kernels
