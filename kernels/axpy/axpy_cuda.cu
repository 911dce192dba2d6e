// axpy, CUDA.
// Math:      y[i] += alpha * x[i], i in [0, n).
// Layout:    contiguous f32.
// Parallel:  grid-stride loop, 256 threads per block.
// Cost:      2n FLOPs; 12n bytes (read x, read y, write y). Memory bound: floor 12n / bandwidth.
#include "kernels/axpy/axpy.h"
#include "kernels/common/cuda_check.cuh"
#include "kernels/common/launch.cuh"

namespace engine::kernels {

namespace {
__global__ void axpy_kernel(int64_t n, float alpha, const float* x, float* y) {
  for (int64_t i = grid_thread_index(); i < n; i += grid_thread_count()) {
    y[i] += alpha * x[i];
  }
}
}  // namespace

void axpy_cuda(int64_t n, float alpha, const float* x, float* y) {
  if (n == 0) return;
  constexpr int kThreads = 256;
  axpy_kernel<<<grid_for(n, kThreads), kThreads, 0, current_stream()>>>(n, alpha, x, y);
  CUDA_CHECK_LAUNCH("axpy_cuda n=", n);
}

}  // namespace engine::kernels
