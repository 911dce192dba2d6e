// random_cuda.cu in a build without CUDA: every function throws (kernels/common/cuda_stub.h).
#include "kernels/common/cuda_stub.h"
#include "kernels/random/random.h"

namespace engine::kernels {

void random_uniform_cuda(int64_t, uint64_t, uint64_t, float, float, float*) {
  no_cuda("random_uniform_cuda");
}

void random_normal_cuda(int64_t, uint64_t, uint64_t, float, float, float*) {
  no_cuda("random_normal_cuda");
}

}  // namespace engine::kernels
