// axpy_cuda.cu in a build without CUDA: every function throws (kernels/common/cuda_stub.h).
#include "kernels/axpy/axpy.h"
#include "kernels/common/cuda_stub.h"

namespace engine::kernels {

void axpy_cuda(int64_t, float, const float*, float*) { no_cuda("axpy_cuda"); }

}  // namespace engine::kernels
