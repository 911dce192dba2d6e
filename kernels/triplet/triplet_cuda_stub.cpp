// triplet_cuda.cu in a build without CUDA: every function throws (kernels/common/cuda_stub.h).
#include "kernels/common/cuda_stub.h"
#include "kernels/triplet/triplet.h"

namespace engine::kernels {

void fused_triplet_cuda(const float*, const int64_t*, int64_t, int64_t, Miner, Metric, double,
                        uint64_t, uint64_t, float*, float*, int64_t*, int64_t*, int64_t*, float*) {
  no_cuda("fused_triplet_cuda");
}

}  // namespace engine::kernels
