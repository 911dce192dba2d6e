// The SGEMM block tile shared by our matrix products (matmul_cuda.cu: C = op(A) op(B);
// conv2d_cuda.cu: the implicit GEMMs of fprop, dgrad and wgrad). Each kernel brings its own
// loaders (where a tile element comes from) and epilogue (where a result goes); the tile, the
// thread layout and the order of the multiply-adds are defined here once.
//
// Tile:     C block 128 x kCols, reduction step 8, 256 threads (16 x 16); kCols = 128 (matmul and
//           conv2d's default), 64 or 32 (conv2d's narrow layers: conv2d_cuda.cu). Each thread owns
//           8 rows x kCols / 16 columns of registers: rows in two 4-wide strips 64 apart
//           (micro_offset); columns likewise for 128, one 4-wide strip for 64, one 2-wide strip
//           for 32 (column_offset). Its shared-memory reads are float4 (float2 for 32 columns),
//           and a warp's stores cover contiguous runs.
// Shared:   one TileStage<kCols> holds the A tile k-major (a[k][row of C]) and the B tile
//           (b[k][column of C]), 8 x (128 + 4) and 8 x (kCols + 4) floats; kernels double-buffer
//           it (16.5 KiB per block for 128 columns, 12.4 for 64, 10.3 for 32). The +4 padding
//           makes the transposing stores of k-contiguous operands bank-conflict free.
// Order:    acc[i][j] = fmaf(a[k][i], b[k][j], acc[i][j]) for k ascending within a stage, stages
//           in ascending k: strict FP32, one rounding per FMA, the same in every kernel and for
//           every kCols, so a given C element gets the same bits from any tile width.
// Staging:  per step each thread brings staged_values(rows) values of an operand with `rows`
//           tile rows (4 for 128, 2 for 64, 1 for 32) from global memory into registers, in one
//           of two layouts (tid = threadIdx.x), chosen so that consecutive threads read
//           consecutive addresses:
//             row-fast: row tid % 128, k = tid / 128 + 2 i   (operand contiguous along its rows;
//                       the A side only, always 128 rows)
//             k-fast:   k = tid % 8,   row = tid / 8 + 32 i  (operand contiguous along k)
// Shared memory cannot be declared here (the emulator's translator rewrites __shared__ only in
// .cu files): each kernel declares `__shared__ Stage stages[2];` (or TileStage<kCols>) itself.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace engine::kernels::gemm_tile {

constexpr int kTileM = 128, kTileN = 128, kTileK = 8;
constexpr int kThreads = 256;
constexpr int kLd = kTileM + 4;  // padded row length of a shared A tile (and of a 128-column B)
constexpr int kStaged = 4;       // global values each thread stages per 128-row operand per k step

// Values a thread stages per k step for an operand of `rows` tile rows (k-fast layout).
__host__ __device__ constexpr int staged_values(int rows) { return rows * kTileK / kThreads; }

template <int kCols>
struct alignas(16) TileStage {
  float a[kTileK][kLd];
  float b[kTileK][kCols + 4];
};
using Stage = TileStage<kTileN>;

// The 8 rows (or 128-tile columns) of a thread's register tile: group g owns g*4 .. g*4+3 and the
// same four 64 further on.
__device__ __forceinline__ int micro_offset(int group, int i) {
  return (i / 4) * 64 + group * 4 + (i % 4);
}

// Column j of group g's kCols / 16 register columns: strips of `width` columns (4, or 2 for 32
// columns), 16 width apart. For 128 columns this is micro_offset.
template <int kCols>
__device__ __forceinline__ int column_offset(int group, int j) {
  constexpr int width = kCols >= 64 ? 4 : kCols / 16;
  return (j / width) * (16 * width) + group * width + (j % width);
}

// acc[i][j] += sum over the stage's 8 k of a[k][row i] b[k][col j], k ascending, one FMA each.
template <int kCols>
__device__ __forceinline__ void multiply_stage(const TileStage<kCols>& stage, int mg, int ng,
                                               float (&acc)[8][kCols / 16]) {
  constexpr int kCn = kCols / 16;
#pragma unroll
  for (int kk = 0; kk < kTileK; ++kk) {
    const float4 a0 = *reinterpret_cast<const float4*>(&stage.a[kk][mg * 4]);
    const float4 a1 = *reinterpret_cast<const float4*>(&stage.a[kk][64 + mg * 4]);
    const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
    float b[kCn];
    if constexpr (kCn == 2) {
      const float2 b0 = *reinterpret_cast<const float2*>(&stage.b[kk][ng * 2]);
      b[0] = b0.x;
      b[1] = b0.y;
    } else {
#pragma unroll
      for (int strip = 0; strip < kCn / 4; ++strip) {
        const float4 v = *reinterpret_cast<const float4*>(&stage.b[kk][strip * 64 + ng * 4]);
        b[4 * strip] = v.x;
        b[4 * strip + 1] = v.y;
        b[4 * strip + 2] = v.z;
        b[4 * strip + 3] = v.w;
      }
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
#pragma unroll
      for (int j = 0; j < kCn; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
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

template <int kLdT, int kCount>
__device__ __forceinline__ void store_k_fast(float (&tile)[kTileK][kLdT],
                                             const float (&v)[kCount]) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int i = 0; i < kCount; ++i) tile[tid % kTileK][tid / kTileK + 32 * i] = v[i];
}

// Loads a k-fast operand stored k-contiguous: element (row, k) at src[row * kdim + k], for tile
// rows [row0, row0 + 32 kCount) and k in [k0, k0 + 8); rows past `rows` and k at or past `k_end`
// read zero.
template <int kCount>
__device__ __forceinline__ void load_k_contiguous(const float* __restrict__ src, int rows, int kdim,
                                                  int row0, int k0, int k_end, float (&v)[kCount]) {
  const int k = k0 + threadIdx.x % kTileK;
#pragma unroll
  for (int i = 0; i < kCount; ++i) {
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
