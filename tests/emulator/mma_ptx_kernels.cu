// Kernels that exercise the emulator's mma.sync and cp.async (include/mma_ptx.h, through
// kernels/common/mma_sync.cuh) and wgmma (include/wgmma_ptx.h, through kernels/common/wgmma.cuh)
// for tests/emulator/mma_ptx_test.cpp: copies that land only at the wait, wait_group counts,
// zero-fill, alignment, an mma.sync with unconverted operands or a partial warp, and wgmma's
// accumulators that land at the wait, its fences and its warpgroup. Built through cuda_translate
// only.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/mma_sync.cuh"
#include "kernels/common/wgmma.cuh"
#include "tests/emulator/mma_ptx_kernels.h"

namespace sample {
namespace {

using engine::kernels::cp_async_16;
using engine::kernels::cp_async_4;
using engine::kernels::cp_async_commit;
using engine::kernels::cp_async_wait;

struct alignas(16) Staging {
  float values[32];
};

__global__ void read_before_wait_kernel(const float* src, float* before, float* after) {
  __shared__ Staging staging;
  const int lane = threadIdx.x;
  cp_async_4(&staging.values[lane], src + lane, 4);
  cp_async_commit();
  before[lane] = staging.values[lane];  // the mistake: the copy may not have landed
  cp_async_wait<0>();
  after[lane] = staging.values[lane];
}

__global__ void groups_kernel(const float* src, float* after_wait1, float* after_wait0,
                              float* zero_filled) {
  __shared__ Staging staging;
  cp_async_16(&staging.values[0], src, 16);
  cp_async_commit();
  cp_async_16(&staging.values[4], src + 4, 16);
  cp_async_16(&staging.values[8], src + 8, 8);  // half read, half zero-filled
  cp_async_commit();
  cp_async_wait<1>();  // group 0 has landed; group 1 may not have
  for (int i = 0; i < 8; ++i) after_wait1[i] = staging.values[i];
  cp_async_wait<0>();
  for (int i = 0; i < 8; ++i) after_wait0[i] = staging.values[i];
  for (int i = 0; i < 4; ++i) zero_filled[i] = staging.values[8 + i];
}

__global__ void aligned_kernel(const float* src, int shared_offset) {
  __shared__ Staging staging;
  cp_async_16(&staging.values[shared_offset], src, 16);
  cp_async_commit();
  cp_async_wait<0>();
}

__global__ void mma_bits_kernel(unsigned a_and_b_bits, float* d) {
  const uint32_t a[4] = {a_and_b_bits, a_and_b_bits, a_and_b_bits, a_and_b_bits};
  const uint32_t b[2] = {a_and_b_bits, a_and_b_bits};
  const float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  float result[4];
  engine::kernels::mma_m16n8k8_tf32(result, a, b, c);
  for (int i = 0; i < 4; ++i) d[4 * threadIdx.x + i] = result[i];
}

// A 64 x 8 with its two core matrices along k 1024 bytes apart, the 8 along M 128 bytes apart;
// B 8 x 8 (one core matrix along N) with the two along k 128 bytes apart.
struct alignas(128) WgmmaOperands {
  float a[512];
  float b[64];
};

__global__ void wgmma_ones_kernel(WgmmaMistake mistake, float* early, float* d) {
  __shared__ WgmmaOperands operands;
  for (int i = threadIdx.x; i < 512; i += blockDim.x) operands.a[i] = 1.0f;
  for (int i = threadIdx.x; i < 64; i += blockDim.x) operands.b[i] = 1.0f;
  if (mistake != WgmmaMistake::kNoProxyFence) engine::kernels::fence_proxy_async_shared();
  __syncthreads();
  float result[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (mistake != WgmmaMistake::kNoWgmmaFence) engine::kernels::wgmma_fence();
  engine::kernels::wgmma_m64n8k8_tf32(
      result, engine::kernels::k_major_descriptor(operands.a, 1024, 128),
      engine::kernels::k_major_descriptor(operands.b, 128, 128), false);
  engine::kernels::wgmma_commit_group();
  for (int i = 0; i < 4; ++i) early[4 * threadIdx.x + i] = result[i];  // too early
  if (mistake == WgmmaMistake::kOverwriteBeforeWait ||
      mistake == WgmmaMistake::kStoreWhileInFlight) {
    for (int i = threadIdx.x; i < 512; i += blockDim.x) operands.a[i] = 2.0f;
    if (mistake == WgmmaMistake::kOverwriteBeforeWait) {
      engine::kernels::fence_proxy_async_shared();
    }
    __syncthreads();
  }
  engine::kernels::wgmma_wait_group<0>();
  for (int i = 0; i < 4; ++i) d[4 * threadIdx.x + i] = result[i];
}

}  // namespace

cudaError_t wgmma_ones(WgmmaMistake mistake, unsigned threads, float* early, float* d) {
  wgmma_ones_kernel<<<1, threads>>>(mistake, early, d);
  return cudaGetLastError();
}

cudaError_t cp_async_read_before_wait(const float* src, float* before, float* after) {
  read_before_wait_kernel<<<1, 32>>>(src, before, after);
  return cudaGetLastError();
}

cudaError_t cp_async_groups(const float* src, float* after_wait1, float* after_wait0,
                            float* zero_filled) {
  groups_kernel<<<1, 1>>>(src, after_wait1, after_wait0, zero_filled);
  return cudaGetLastError();
}

cudaError_t cp_async_aligned(const float* src, int shared_offset) {
  aligned_kernel<<<1, 1>>>(src, shared_offset);
  return cudaGetLastError();
}

cudaError_t mma_tf32_bits(unsigned a_and_b_bits, unsigned threads, float* d) {
  mma_bits_kernel<<<1, threads>>>(a_and_b_bits, d);
  return cudaGetLastError();
}

}  // namespace sample
