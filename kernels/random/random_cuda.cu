// Random tensors, CUDA.
// Math:      the Philox stream of philox.h; element i computed by one thread. The Philox words
//            and the [0, 1) uniforms are the CPU's bits. Not the rest: nvcc contracts
//            low + (high - low) u and mean + stddev z into FMAs (1 ulp apart from the CPU's for
//            ranges other than [0, 1)), and logf/sinf/cosf differ from glibc's by an ulp or two,
//            so normals agree to ~1e-6, not bit for bit (tests/kernels/random_test.cpp).
// Layout:    contiguous f32.
// Parallel:  grid-stride loop, 256 threads per block; each thread runs one Philox block
//            (10 rounds: 20 32-bit multiplies) per element: compute is tiny next to the write.
// Cost:      4n bytes written. Floor: 4n / bandwidth.
#include "kernels/common/cuda_check.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/random/philox.h"
#include "kernels/random/random.h"

namespace engine::kernels {

namespace {
__global__ void random_uniform_kernel(float* out, int64_t n, uint64_t seed, uint64_t offset,
                                      float low, float high) {
  for (int64_t i = grid_thread_index(); i < n; i += grid_thread_count()) {
    PhiloxBlock block = philox4x32_10(offset + uint64_t(i) / 4, 0, seed);
    out[i] = low + (high - low) * philox_uniform01(block.word[i % 4]);
  }
}

__global__ void random_normal_kernel(float* out, int64_t n, uint64_t seed, uint64_t offset,
                                     float mean, float stddev) {
  for (int64_t i = grid_thread_index(); i < n; i += grid_thread_count()) {
    PhiloxBlock block = philox4x32_10(offset + uint64_t(i) / 2, 0, seed);
    float u1 = philox_uniform01_open_low(block.word[0]);
    float u2 = philox_uniform01(block.word[1]);
    float radius = sqrtf(-2.0f * logf(u1));
    float angle = 6.283185307179586f * u2;
    float z = (i % 2 == 0) ? radius * cosf(angle) : radius * sinf(angle);
    out[i] = mean + stddev * z;
  }
}
}  // namespace

void random_uniform_cuda(int64_t n, uint64_t seed, uint64_t offset, float low, float high,
                         float* out) {
  if (n == 0) return;
  constexpr int kThreads = 256;
  random_uniform_kernel<<<grid_for(n, kThreads), kThreads, 0, current_stream()>>>(
      out, n, seed, offset, low, high);
  CUDA_CHECK_LAUNCH("random_uniform_cuda n=", n);
}

void random_normal_cuda(int64_t n, uint64_t seed, uint64_t offset, float mean, float stddev,
                        float* out) {
  if (n == 0) return;
  constexpr int kThreads = 256;
  random_normal_kernel<<<grid_for(n, kThreads), kThreads, 0, current_stream()>>>(
      out, n, seed, offset, mean, stddev);
  CUDA_CHECK_LAUNCH("random_normal_cuda n=", n);
}

}  // namespace engine::kernels
