// knn_cuda.cu in a build without CUDA: every function throws (kernels/common/cuda_stub.h).
#include "kernels/common/cuda_stub.h"
#include "kernels/knn/knn.h"

namespace engine::kernels {

void knn_self_cuda(const float*, const float*, int64_t, int64_t, KnnKey, int64_t, const KnnTiling&,
                   int64_t*, float*) {
  no_cuda("knn_self_cuda");
}

}  // namespace engine::kernels
