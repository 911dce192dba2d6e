// dropout, CUDA, f32 (math: dropout.h).
//
// Math:     mask[i] = u[i] >= p ? 1/(1-p) : 0,  y[i] = x[i] mask[i];  backward dx[i] = dy[i]
// mask[i].
//           The uniforms u come from the Philox stream (engine/random.h), drawn before the call,
//           so the mask is bit-identical to the CPU's for the same generator state. 1/(1-p) is
//           rounded to float once on the host, exactly as dropout_forward_cpu<float> does; p = 1
//           gives mask 0 (no division by zero).
// Layout:   flat contiguous arrays of n elements.
// Parallel: one thread per element, grid-stride loop, 256 threads per block.
// Cost:     forward 1 FLOP/element, reads x and u, writes y and mask: 16n bytes; backward
//           1 FLOP/element, reads dy and mask, writes dx: 12n bytes. Floor: bytes / bandwidth.
#include "kernels/common/cuda_check.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/dropout/dropout.h"

namespace engine::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void dropout_forward_kernel(const float* x, const float* u, int64_t n, float p,
                                       float keep_scale, float* y, float* mask) {
  for (int64_t i = grid_thread_index(); i < n; i += grid_thread_count()) {
    const float m = u[i] >= p ? keep_scale : 0.0f;
    mask[i] = m;
    y[i] = x[i] * m;
  }
}

__global__ void dropout_backward_kernel(const float* dy, const float* mask, int64_t n, float* dx) {
  for (int64_t i = grid_thread_index(); i < n; i += grid_thread_count()) {
    dx[i] = dy[i] * mask[i];
  }
}

}  // namespace

void dropout_forward_cuda(const float* x, const float* u, int64_t n, float p, float* y,
                          float* mask) {
  if (n == 0) return;
  const float keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  dropout_forward_kernel<<<grid_for(n, kThreads), kThreads, 0, current_stream()>>>(
      x, u, n, p, keep_scale, y, mask);
  CUDA_CHECK_LAUNCH("dropout_forward_cuda n=", n, " p=", p);
}

void dropout_backward_cuda(const float* dy, const float* mask, int64_t n, float* dx) {
  if (n == 0) return;
  dropout_backward_kernel<<<grid_for(n, kThreads), kThreads, 0, current_stream()>>>(dy, mask, n,
                                                                                    dx);
  CUDA_CHECK_LAUNCH("dropout_backward_cuda n=", n);
}

}  // namespace engine::kernels
