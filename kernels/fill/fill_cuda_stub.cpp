// fill_cuda.cu in a build without CUDA: every function throws (kernels/common/cuda_stub.h).
#include "kernels/common/cuda_stub.h"
#include "kernels/fill/fill.h"

namespace engine::kernels {

void fill_cuda(int64_t, float, float*) { no_cuda("fill_cuda"); }

}  // namespace engine::kernels
