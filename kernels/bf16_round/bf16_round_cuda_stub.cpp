// bf16_round_cuda.cu in a build without CUDA: every function throws (kernels/common/cuda_stub.h).
#include "kernels/bf16_round/bf16_round.h"
#include "kernels/common/cuda_stub.h"

namespace engine::kernels {

void round_to_bf16_cuda(int64_t, const float*, uint16_t*) { no_cuda("round_to_bf16_cuda"); }
void bf16_to_float_cuda(int64_t, const uint16_t*, float*) { no_cuda("bf16_to_float_cuda"); }

}  // namespace engine::kernels
