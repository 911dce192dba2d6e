// copy_cuda.cu in a build without CUDA: every function throws (kernels/common/cuda_stub.h).
#include "kernels/common/cuda_stub.h"
#include "kernels/copy/copy.h"

namespace engine::kernels {

void copy_strided_cuda(const float*, StridedLayout, float*) { no_cuda("copy_strided_cuda"); }

void copy_into_strided_cuda(const float*, float*, StridedLayout) {
  no_cuda("copy_into_strided_cuda");
}

}  // namespace engine::kernels
