// FP32 <-> BF16 buffer conversion, CUDA (contract in bf16_round.h).
// Parallel: grid-stride loop, 256 threads per block, one element per thread per step.
// Cost:     6n bytes per call (read 4n, write 2n; or read 2n, write 4n). Memory bound.
#include <cuda_bf16.h>

#include "kernels/bf16_round/bf16_round.h"
#include "kernels/common/cuda_check.cuh"
#include "kernels/common/launch.cuh"

namespace engine::kernels {

namespace {

constexpr int kThreads = 256;

__global__ void round_to_bf16_kernel(int64_t n, const float* x, __nv_bfloat16* y) {
  for (int64_t i = grid_thread_index(); i < n; i += grid_thread_count()) {
    y[i] = __float2bfloat16(x[i]);
  }
}

__global__ void bf16_to_float_kernel(int64_t n, const __nv_bfloat16* x, float* y) {
  for (int64_t i = grid_thread_index(); i < n; i += grid_thread_count()) {
    y[i] = __bfloat162float(x[i]);
  }
}

}  // namespace

// __nv_bfloat16 is a 2-byte type holding exactly the BF16 bit pattern, so a uint16_t buffer is
// read and written through it directly.
void round_to_bf16_cuda(int64_t n, const float* x, uint16_t* y) {
  if (n == 0) return;
  round_to_bf16_kernel<<<grid_for(n, kThreads), kThreads, 0, current_stream()>>>(
      n, x, reinterpret_cast<__nv_bfloat16*>(y));
  CUDA_CHECK_LAUNCH("round_to_bf16_cuda n=", n);
}

void bf16_to_float_cuda(int64_t n, const uint16_t* x, float* y) {
  if (n == 0) return;
  bf16_to_float_kernel<<<grid_for(n, kThreads), kThreads, 0, current_stream()>>>(
      n, reinterpret_cast<const __nv_bfloat16*>(x), y);
  CUDA_CHECK_LAUNCH("bf16_to_float_cuda n=", n);
}

}  // namespace engine::kernels
