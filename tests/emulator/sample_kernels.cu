// Kernels that exercise the CUDA emulator itself (tests/emulator/emulator_test.cpp). Built only
// through cuda_translate, like kernels/*.cu in engine_emulated: this file also tests the
// translation of launches (multi-line, templated) and of __shared__ declarations.
#include <cuda_runtime.h>

#include "tests/emulator/sample_kernels.h"

namespace sample {
namespace {

constexpr int kThreads = 256;

// Block-wide tree sum in shared memory: correct only if __syncthreads is a real barrier.
template <typename T>
__global__ void block_sum_kernel(const T* x, int n, T* sums) {
  __shared__ T partial[kThreads];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  partial[threadIdx.x] = i < n ? x[i] : T(0);
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) sums[blockIdx.x] = partial[0];
}

// One warp: shuffle-down sum, xor max, inclusive shfl_up scan and a ballot of odd values.
__global__ void warp_ops_kernel(const int* x, int* sum, int* max, int* scan, unsigned* odd) {
  const int lane = threadIdx.x;
  int v = x[lane];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  if (lane == 0) *sum = v;
  int m = x[lane];
  for (int offset = 16; offset > 0; offset /= 2) {
    const int other = __shfl_xor_sync(0xffffffffu, m, offset);
    m = other > m ? other : m;
  }
  max[lane] = m;
  int running = x[lane];
  for (int offset = 1; offset < 32; offset *= 2) {
    const int below = __shfl_up_sync(0xffffffffu, running, offset);
    if (lane >= offset) running += below;
  }
  scan[lane] = running;
  const unsigned bits = __ballot_sync(0xffffffffu, x[lane] % 2 != 0);
  if (lane == 0) *odd = bits;
}

// Reads shared memory that no thread wrote.
__global__ void read_unwritten_shared_kernel(unsigned* out) {
  __shared__ unsigned never_written[4], also[2];
  out[threadIdx.x] = threadIdx.x < 4 ? never_written[threadIdx.x] : also[threadIdx.x - 4];
}

// Lane 0 waits at __syncwarp for lane 1, which waits at __syncthreads for lane 0.
__global__ void deadlock_kernel(int* out) {
  if (threadIdx.x == 0) {
    __syncwarp();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}

__global__ void trap_kernel(int* out) {
  if (threadIdx.x == 3) __trap();
  out[threadIdx.x] = 1;
}

__global__ void add_kernel(float* x, int n, float value) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    x[i] += value;
  }
}

__global__ void fill_kernel(int* out, int n, int value) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    out[i] = value;
  }
}

// Every block sums its 256 values, then thread 0 adds the block's sum into *total: with
// atomicAdd, or (use_atomic false) with a plain += that races with the other blocks'. Blocks
// run in turn on the emulator, so both give the exact total there; only the race checker
// (tests/support/cuda_emulator/racecheck.h) tells them apart.
__global__ void block_total_kernel(const float* x, int n, float* total, bool use_atomic) {
  __shared__ float partial[kThreads];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  partial[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  if (use_atomic) {
    atomicAdd(total, partial[0]);
  } else {
    *total += partial[0];  // the race
  }
}

// y[t] = x[t - 1] through shared memory, with the __syncthreads between writing and reading
// left out when `synchronized` is false. In the emulator's usual order thread t - 1 has
// already written when thread t reads, so the result is right anyway.
__global__ void shift_right_kernel(const float* x, float* y, bool synchronized) {
  __shared__ float staged[kThreads];
  const int t = threadIdx.x;
  staged[t] = x[t];
  if (synchronized) __syncthreads();
  y[t] = t == 0 ? 0.0f : staged[t - 1];  // the race when not synchronized
}

// Keeps kHungryValues loaded values live at once (each output needs its own value and the total
// of all of them), so ptxas gives every thread far more than 128 registers: a block of 256 threads
// fits in a block's 65,536 registers, one of 512 does not, and a GPU refuses that launch.
constexpr int kHungryValues = 80;
__global__ void register_hungry_kernel(const float* x, float* y) {
  float v[kHungryValues];
  float total = 0.0f;
#pragma unroll
  for (int i = 0; i < kHungryValues; ++i) {
    v[i] = x[i * blockDim.x + threadIdx.x];
    total += v[i];
  }
#pragma unroll
  for (int i = 0; i < kHungryValues; ++i) y[i * blockDim.x + threadIdx.x] = v[i] * total;
}

// Compiled for at most 64 threads per block (ptxas may then plan registers for that size only).
__global__ void __launch_bounds__(64) bounded_fill_kernel(int* out, int value) {
  out[threadIdx.x] = value;
}

}  // namespace

cudaError_t bounded_fill(int* out, int value, unsigned threads) {
  bounded_fill_kernel<<<1, threads>>>(out, value);
  return cudaGetLastError();
}

cudaError_t register_hungry(const float* x, float* y, unsigned threads) {
  register_hungry_kernel<<<1, threads>>>(x, y);
  return cudaGetLastError();
}

cudaError_t block_total(const float* x, int n, float* total, bool use_atomic) {
  block_total_kernel<<<(n + kThreads - 1) / kThreads, kThreads>>>(x, n, total, use_atomic);
  return cudaGetLastError();
}

cudaError_t shift_right(const float* x, float* y, bool synchronized) {
  shift_right_kernel<<<1, kThreads>>>(x, y, synchronized);
  return cudaGetLastError();
}

cudaError_t block_sums(const float* x, int n, float* sums) {
  const int blocks = (n + kThreads - 1) / kThreads;
  // Spread over lines on purpose: cuda_translate must handle a launch split anywhere.
  // clang-format off
  block_sum_kernel<float>
      <<<blocks, kThreads, 0,
         nullptr>>>(x, n,
                    sums);
  // clang-format on
  return cudaGetLastError();
}

cudaError_t warp_ops(const int* x, int* sum, int* max, int* scan, unsigned* odd) {
  warp_ops_kernel<<<1, 32, 0, nullptr>>>(x, sum, max, scan, odd);
  return cudaGetLastError();
}

// Dynamic shared memory: y[t] = x[n - 1 - t] through an `extern __shared__` array.
__global__ void reverse_dynamic_kernel(const float* x, float* y, int n) {
  extern __shared__ __align__(16) float staged[];
  const int t = threadIdx.x;
  if (t < n) staged[t] = x[t];
  __syncthreads();
  if (t < n) y[t] = staged[n - 1 - t];
}

// What each block finds in its dynamic shared memory before writing it (4 words per block), then
// writes it, so a second block that saw the first's writes would show them.
__global__ void read_dynamic_shared_kernel(unsigned* out) {
  extern __shared__ unsigned words[];
  if (threadIdx.x < 4) out[4 * blockIdx.x + threadIdx.x] = words[threadIdx.x];
  __syncthreads();
  words[threadIdx.x] = 7u;
}

cudaError_t read_unwritten_shared(unsigned* out) {
  read_unwritten_shared_kernel<<<1, 6>>>(out);
  return cudaGetLastError();
}

cudaError_t deadlock(int* out) {
  deadlock_kernel<<<1, 2>>>(out);
  return cudaGetLastError();
}

cudaError_t trap(int* out) {
  trap_kernel<<<1, 8>>>(out);
  return cudaGetLastError();
}

cudaError_t fill(int* out, int n, int value, unsigned blocks, unsigned threads) {
  fill_kernel<<<blocks, threads>>>(out, n, value);
  return cudaGetLastError();
}

cudaError_t add_on_stream(float* x, int n, float value, cudaStream_t stream) {
  add_kernel<<<2, 32, 0, stream>>>(x, n, value);
  return cudaGetLastError();
}

cudaError_t reverse_through_dynamic_shared(const float* x, float* y, int n,
                                           std::size_t shared_bytes, int opt_in_bytes) {
  if (opt_in_bytes > 0) {
    const cudaError_t set = cudaFuncSetAttribute(
        reverse_dynamic_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, opt_in_bytes);
    if (set != cudaSuccess) {
      (void)cudaGetLastError();  // the failed call also set it, as CUDA's does: clear it
      return set;
    }
  }
  reverse_dynamic_kernel<<<1, n, shared_bytes>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t read_dynamic_shared(unsigned* out, unsigned blocks) {
  read_dynamic_shared_kernel<<<blocks, 32, 32 * sizeof(unsigned)>>>(out);
  return cudaGetLastError();
}

}  // namespace sample
