// pairwise_distance_cuda.cu in a build without CUDA: every function throws
// (kernels/common/cuda_stub.h).
#include "kernels/common/cuda_stub.h"
#include "kernels/pairwise_distance/pairwise_distance.h"

namespace engine::kernels {

void pairwise_distance_forward_cuda(const float*, const float*, int64_t, int64_t, int64_t,
                                    PairwiseMetric, float, float*) {
  no_cuda("pairwise_distance_forward_cuda");
}

void pairwise_distance_backward_cuda(const float*, const float*, const float*, int64_t, int64_t,
                                     int64_t, PairwiseMetric, float, float*, float*) {
  no_cuda("pairwise_distance_backward_cuda");
}

}  // namespace engine::kernels
