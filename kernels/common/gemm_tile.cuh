// The SGEMM block tile shared by our matrix products (matmul_cuda.cu: C = op(A) op(B);
// conv2d_cuda.cu: the implicit GEMMs of fprop, dgrad and wgrad). Each kernel brings its own
// loaders (where a tile element comes from) and epilogue (where a result goes); the tile, the
// thread layout and the order of the multiply-adds are defined here once.
//
// Tile:     C block 128 x 128, reduction step 8, 256 threads (16 x 16). Each thread owns an 8 x 8
//           register tile made of two 4-wide strips 64 apart in each direction (micro_offset), so
//           its shared-memory reads are float4 and a warp's stores cover contiguous runs.
// Shared:   one Stage holds the A tile k-major (a[k][row of C]) and the B tile (b[k][column of
//           C]), 8 x (128 + 4) floats each; kernels double-buffer it (16.5 KiB per block). The +4
//           padding makes the transposing stores of k-contiguous operands bank-conflict free.
// Order:    acc[i][j] = fmaf(a[k][i], b[k][j], acc[i][j]) for k ascending within a stage, stages
//           in ascending k: strict FP32, one rounding per FMA, the same in every kernel.
// Staging:  per step each thread brings kStaged = 4 values of each operand from global memory
//           into registers, in one of two layouts (tid = threadIdx.x), chosen so that consecutive
//           threads read consecutive addresses:
//             row-fast: row tid % 128, k = tid / 128 + 2 i   (operand contiguous along its rows)
//             k-fast:   k = tid % 8,   row = tid / 8 + 32 i  (operand contiguous along k)
// Shared memory cannot be declared here (the emulator's translator rewrites __shared__ only in
// .cu files): each kernel declares `__shared__ Stage stages[2];` itself.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace engine::kernels::gemm_tile {

constexpr int kTileM = 128, kTileN = 128, kTileK = 8;
constexpr int kThreads = 256;
constexpr int kLd = kTileM + 4;  // padded row length of a shared tile (kTileM == kTileN)
constexpr int kStaged = 4;       // global values each thread stages per operand per k step

struct alignas(16) Stage {
  float a[kTileK][kLd];
  float b[kTileK][kLd];
};

// The 8 rows (or columns) of a thread's register tile: group g owns g*4 .. g*4+3 and the same
// four 64 further on.
__device__ __forceinline__ int micro_offset(int group, int i) {
  return (i / 4) * 64 + group * 4 + (i % 4);
}

// acc[i][j] += sum over the stage's 8 k of a[k][row i] b[k][col j], k ascending, one FMA each.
__device__ __forceinline__ void multiply_stage(const Stage& stage, int mg, int ng,
                                               float (&acc)[8][8]) {
#pragma unroll
  for (int kk = 0; kk < kTileK; ++kk) {
    const float4 a0 = *reinterpret_cast<const float4*>(&stage.a[kk][mg * 4]);
    const float4 a1 = *reinterpret_cast<const float4*>(&stage.a[kk][64 + mg * 4]);
    const float4 b0 = *reinterpret_cast<const float4*>(&stage.b[kk][ng * 4]);
    const float4 b1 = *reinterpret_cast<const float4*>(&stage.b[kk][64 + ng * 4]);
    const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
    const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
  }
}

// Stores a thread's staged values at their (k, row) place in a shared tile (layouts above).
__device__ __forceinline__ void store_row_fast(float (&tile)[kTileK][kLd],
                                               const float (&v)[kStaged]) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int i = 0; i < kStaged; ++i) tile[tid / kTileM + 2 * i][tid % kTileM] = v[i];
}

__device__ __forceinline__ void store_k_fast(float (&tile)[kTileK][kLd],
                                             const float (&v)[kStaged]) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int i = 0; i < kStaged; ++i) tile[tid % kTileK][tid / kTileK + 32 * i] = v[i];
}

// Loads a k-fast operand stored k-contiguous: element (row, k) at src[row * kdim + k], for tile
// rows [row0, row0 + 128) and k in [k0, k0 + 8); rows past `rows` and k at or past `k_end` read
// zero.
__device__ __forceinline__ void load_k_contiguous(const float* __restrict__ src, int rows, int kdim,
                                                  int row0, int k0, int k_end,
                                                  float (&v)[kStaged]) {
  const int k = k0 + threadIdx.x % kTileK;
#pragma unroll
  for (int i = 0; i < kStaged; ++i) {
    const int row = row0 + threadIdx.x / kTileK + 32 * i;
    v[i] = (k < k_end && row < rows) ? src[row * kdim + k] : 0.0f;
  }
}

// Split-K's second pass: the sum over chunks s = 0, 1, ... of partial[s * total + i], always in
// that order, so the result does not depend on which chunk finished first (no atomics).
__device__ __forceinline__ float sum_of_splits(const float* __restrict__ partial, int splits,
                                               int64_t total, int64_t i) {
  float sum = 0.0f;
  for (int s = 0; s < splits; ++s) sum += partial[s * total + i];
  return sum;
}

}  // namespace engine::kernels::gemm_tile
