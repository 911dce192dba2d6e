// binary_cuda.cu in a build without CUDA: every function throws (kernels/common/cuda_stub.h).
#include "kernels/binary/binary.h"
#include "kernels/common/cuda_stub.h"

namespace engine::kernels {

void binary_cuda(BinaryOp, const float*, StridedLayout, const float*, StridedLayout, float*,
                 StridedLayout) {
  no_cuda("binary_cuda");
}

}  // namespace engine::kernels
