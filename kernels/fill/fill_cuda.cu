// fill, CUDA.
// Math:      out[i] = value, i in [0, n).
// Layout:    contiguous f32.
// Parallel:  grid-stride loop, one element per thread per iteration, 256 threads per block.
// Cost:      0 FLOPs; 4n bytes written. Floor: 4n / (HBM bandwidth).
#include "kernels/common/cuda_check.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/fill/fill.h"

namespace engine::kernels {

namespace {
__global__ void fill_kernel(float* out, int64_t n, float value) {
  for (int64_t i = grid_thread_index(); i < n; i += grid_thread_count()) {
    out[i] = value;
  }
}
}  // namespace

void fill_cuda(int64_t n, float value, float* out) {
  if (n == 0) return;
  constexpr int kThreads = 256;
  fill_kernel<<<grid_for(n, kThreads), kThreads, 0, current_stream()>>>(out, n, value);
  CUDA_CHECK_LAUNCH("fill_cuda n=", n);
}

}  // namespace engine::kernels
