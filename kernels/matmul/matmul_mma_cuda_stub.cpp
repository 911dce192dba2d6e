// matmul_mma_cuda.cu in a build without CUDA: every function throws (kernels/common/cuda_stub.h).
#include "kernels/common/cuda_stub.h"
#include "kernels/matmul/matmul_mma.h"

namespace engine::kernels {

void matmul_mma_cuda(int64_t, int64_t, int64_t, const float*, const float*, bool, bool, float*,
                     bool, Precision) {
  no_cuda("matmul_mma_cuda");
}

void mma_m16n8k8_tf32_registers_cuda(const float*, const float*, const float*, float*) {
  no_cuda("mma_m16n8k8_tf32_registers_cuda");
}

void mma_m16n8k16_bf16_registers_cuda(const float*, const float*, const float*, float*) {
  no_cuda("mma_m16n8k16_bf16_registers_cuda");
}

}  // namespace engine::kernels
