// Host entry points of tests/emulator/sample_kernels.cu; each returns cudaGetLastError() after
// its launch. Pointers are device memory (cudaMalloc), except where a test passes host memory
// on purpose.
#pragma once

#include <cuda_runtime.h>

namespace sample {

cudaError_t block_sums(const float* x, int n, float* sums);  // sums[b] = sum of block b's 256
cudaError_t warp_ops(const int* x, int* sum, int* max, int* scan, unsigned* odd);  // x: 32 ints
cudaError_t read_unwritten_shared(unsigned* out);  // out: 6 words from shared memory
cudaError_t deadlock(int* out);
cudaError_t trap(int* out);
// *total += the sum of x (n floats), one block per 256 values, with or without atomicAdd.
cudaError_t block_total(const float* x, int n, float* total, bool use_atomic);
// y[t] = x[t - 1] (y[0] = 0) for 256 values, through shared memory; racy unless synchronized.
cudaError_t shift_right(const float* x, float* y, bool synchronized);
cudaError_t fill(int* out, int n, int value, unsigned blocks, unsigned threads);
// One block of `threads`: with x and y of 80 * threads floats, y[i threads + t] = x[i threads + t]
// times the sum over i of x[i threads + t]. Uses well over 128 registers per thread.
cudaError_t register_hungry(const float* x, float* y, unsigned threads);
// out[t] = value for each of `threads`; the kernel has __launch_bounds__(64).
cudaError_t bounded_fill(int* out, int value, unsigned threads);
// x[i] += value for n floats, launched on `stream` (2 blocks of 32 threads).
cudaError_t add_on_stream(float* x, int n, float value, cudaStream_t stream);

// y[t] = x[n - 1 - t] for one block of n threads through `shared_bytes` of dynamic shared memory
// (extern __shared__; n floats used). With opt_in_bytes > 0 it first calls cudaFuncSetAttribute(
// kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, opt_in_bytes) and returns that call's
// error, if any.
cudaError_t reverse_through_dynamic_shared(const float* x, float* y, int n,
                                           std::size_t shared_bytes, int opt_in_bytes);
// out[4 b + i], i < 4: the first 4 words of block b's dynamic shared memory as the block found it
// (each block then writes its own); 32 threads and 128 bytes per block.
cudaError_t read_dynamic_shared(unsigned* out, unsigned blocks);

}  // namespace sample
