// matmul on CUDA tensor cores: C (+)= op(A) op(B) with TF32 operands and FP32 accumulation,
// through WMMA (nvcuda::wmma, m16n16k8, precision::tf32). The strict-FP32 SGEMM is
// matmul_cuda.cu; matmul_tensor_core_cuda picks by the precision policy (kernels/common/
// precision.h).
//
// Math:    C[i, j] (+)= sum_p tf32(op(A)[i, p]) tf32(op(B)[p, j]) (matmul.h's contract with each
//          operand first rounded to TF32 by cvt.rna, round to nearest, ties away from zero); each
//          product is exact in FP32 and the sums round in FP32. With `accumulate`, C's old value
//          is added once at the end, in FP32.
// Tile:    block tile 64 (rows of C) x 64 (columns) x 16 (p), 128 threads = 4 warps in 2 x 2, each
//          warp a 32 x 32 piece of C as 2 x 2 accumulator fragments of 16 x 16 (32 floats of
//          accumulators per thread). Shared memory (36 KiB): two stages of A [64][16 + 4] and
//          B [16][64 + 4] (the +4 keeps every fragment pointer 32-byte aligned and ldm a multiple
//          of 16 bytes, as WMMA requires, and staggers the banks), plus a C tile [64][64 + 4] for
//          the epilogue.
// Pipeline: two stages through registers, as the SGEMM: each thread brings its 8 values of A and
//          8 of B for the next p step from global memory into registers (rounding them to TF32)
//          while the warps multiply the current stage; one __syncthreads per step. No cp.async
//          yet: the multi-stage asynchronous pipeline is the next step (issue 33).
// Loads:   an operand is read along p (A untransposed, B transposed: 16 consecutive floats per
//          row) or along its rows (A^T, B untransposed: 64 consecutive floats), consecutive
//          threads on consecutive addresses either way. Edges (M, N, K not multiples of the tile)
//          read zeros; the epilogue goes through the shared C tile (store_matrix_sync) and skips
//          elements outside C, so no code depends on WMMA's opaque fragment layout.
// Cost:    2 m n k FLOPs; 4 (m k + k n + m n) bytes at least. Per block and p step it reads
//          8 KiB for 131 kFLOP (16 FLOP/byte), so the kernel is bound by L2 bandwidth well before
//          the tensor cores: expected at most about 30% of the dense TF32 peak (495 TFLOP/s on an
//          H100 SXM), i.e. several times our FFMA SGEMM but below cuBLAS's TF32 GEMM (128 x 256
//          tiles, cp.async pipeline). Not yet measured: no GPU was available when it was written.
// Indexing: 32-bit within each matrix (each < 2^31 elements, checked).
#include <mma.h>

#include <climits>

#include "kernels/common/cuda_check.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/matmul/matmul.h"

namespace engine::kernels {

namespace {

namespace wmma = nvcuda::wmma;

constexpr int kTile = 64;                           // rows and columns of C per block
constexpr int kTileK = 16;                          // p per step: two m16n16k8 instructions deep
constexpr int kFragK = 8;                           // p per WMMA instruction
constexpr int kThreads = 128;                       // 4 warps
constexpr int kWarpTile = 32;                       // each warp's square of C
constexpr int kFrag = 16;                           // a fragment's rows and columns
constexpr int kValues = kTile * kTileK / kThreads;  // values of each operand a thread stages
constexpr int kLdA = kTileK + 4, kLdB = kTile + 4, kLdC = kTile + 4;

struct alignas(32) Stage {
  float a[kTile][kLdA];   // a[row of C][p]
  float b[kTileK][kLdB];  // b[p][column of C]
};
struct alignas(32) SharedTiles {
  Stage stages[2];
  float c[kTile][kLdC];
};

using FragmentA =
    wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFragK, wmma::precision::tf32, wmma::row_major>;
using FragmentB =
    wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFragK, wmma::precision::tf32, wmma::row_major>;
using Accumulator = wmma::fragment<wmma::accumulator, kFrag, kFrag, kFragK, float>;

// Where this thread's value v of an operand tile (64 rows of C's side x 16 p) sits: along p
// fastest when the operand is p-contiguous in memory, else along its rows.
__device__ __forceinline__ void staged_place(bool p_contiguous, int v, int& row, int& p) {
  if (p_contiguous) {
    p = threadIdx.x % kTileK;
    row = threadIdx.x / kTileK + (kThreads / kTileK) * v;
  } else {
    row = threadIdx.x % kTile;
    p = threadIdx.x / kTile + (kThreads / kTile) * v;
  }
}

// Loads this thread's values of rows [row0, row0 + 64) x p [k0, k0 + 16) of an operand with
// `rows` rows and k p-values, stored p-contiguous (element (row, p) at src[row k + p]) or
// row-contiguous (at src[p rows + row]), rounded to TF32; outside the operand, zero.
__device__ __forceinline__ void load_tile(const float* __restrict__ src, bool p_contiguous,
                                          int rows, int k, int row0, int k0,
                                          float (&values)[kValues]) {
#pragma unroll
  for (int v = 0; v < kValues; ++v) {
    int row, p;
    staged_place(p_contiguous, v, row, p);
    row += row0;
    p += k0;
    const float x = row < rows && p < k ? src[p_contiguous ? row * k + p : p * rows + row] : 0.0f;
    values[v] = wmma::__float_to_tf32(x);
  }
}

__device__ __forceinline__ void store_tiles(Stage& stage, bool a_p_contiguous, bool b_p_contiguous,
                                            const float (&a_values)[kValues],
                                            const float (&b_values)[kValues]) {
#pragma unroll
  for (int v = 0; v < kValues; ++v) {
    int row, p;
    staged_place(a_p_contiguous, v, row, p);
    stage.a[row][p] = a_values[v];
    staged_place(b_p_contiguous, v, row, p);
    stage.b[p][row] = b_values[v];
  }
}

// The warp's 2 x 2 accumulators += its 32 rows of the A stage times its 32 columns of B.
__device__ __forceinline__ void multiply_stage(const Stage& stage, int warp_row, int warp_col,
                                               Accumulator (&acc)[2][2]) {
#pragma unroll
  for (int kk = 0; kk < kTileK; kk += kFragK) {
    FragmentA a[2];
    FragmentB b[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      wmma::load_matrix_sync(a[i], &stage.a[warp_row + i * kFrag][kk], kLdA);
      wmma::load_matrix_sync(b[i], &stage.b[kk][warp_col + i * kFrag], kLdB);
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
  }
}

// Block (x, y) computes the 64 x 64 tile (y, x) of C.
__global__ void __launch_bounds__(kThreads)
    tf32_gemm_kernel(int m, int n, int k, const float* __restrict__ a, const float* __restrict__ b,
                     bool trans_a, bool trans_b, float* __restrict__ c, bool accumulate) {
  __shared__ SharedTiles tiles;
  const int m0 = blockIdx.y * kTile, n0 = blockIdx.x * kTile;
  const int warp = threadIdx.x / warpSize;
  const int warp_row = warp / 2 * kWarpTile, warp_col = warp % 2 * kWarpTile;
  // op(A) is p-contiguous when A is stored [m, k]; op(B) when B is stored transposed [n, k].
  const bool a_p_contiguous = !trans_a, b_p_contiguous = trans_b;

  Accumulator acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  }
  float a_values[kValues], b_values[kValues];
  const int steps = (k + kTileK - 1) / kTileK;
  for (int t = -1; t < steps; ++t) {
    // t == -1 only fills stage 0; step t multiplies stage t & 1 while step t + 1 is loaded.
    const bool more = t + 1 < steps;
    if (more) {
      const int k0 = (t + 1) * kTileK;
      load_tile(a, a_p_contiguous, m, k, m0, k0, a_values);
      load_tile(b, b_p_contiguous, n, k, n0, k0, b_values);
    }
    if (t >= 0) multiply_stage(tiles.stages[t & 1], warp_row, warp_col, acc);
    if (more)
      store_tiles(tiles.stages[(t + 1) & 1], a_p_contiguous, b_p_contiguous, a_values, b_values);
    __syncthreads();
  }

  // Epilogue through shared memory: the fragments' own layout is opaque.
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      wmma::store_matrix_sync(&tiles.c[warp_row + i * kFrag][warp_col + j * kFrag], acc[i][j], kLdC,
                              wmma::mem_row_major);
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < kTile * kTile; e += kThreads) {
    const int row = m0 + e / kTile, col = n0 + e % kTile;  // lanes along C's columns: coalesced
    if (row >= m || col >= n) continue;
    const float value = tiles.c[e / kTile][e % kTile];
    float* out = c + row * n + col;
    *out = accumulate ? *out + value : value;
  }
}

}  // namespace

void matmul_tensor_core_cuda(int64_t m, int64_t n, int64_t k, const float* a, const float* b,
                             bool trans_a, bool trans_b, float* c, bool accumulate,
                             Precision precision) {
  if (precision == Precision::Fp32) {
    matmul_cuda(m, n, k, a, b, trans_a, trans_b, c, accumulate);
    return;
  }
  ENGINE_CHECK(precision == Precision::Tf32,
               "matmul: precision bf16 is not implemented yet on CUDA (no BF16 GEMM kernel; use "
               "fp32 or tf32)");
  ENGINE_CHECK(m >= 0 && n >= 0 && k >= 0 && m * k < INT_MAX && k * n < INT_MAX && m * n < INT_MAX,
               "matmul_tensor_core_cuda: m=", m, " n=", n, " k=", k,
               " is negative or needs 64-bit indexing (the kernel indexes in 32 bits)");
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: C unchanged when accumulating, else zeros
    if (!accumulate) cuda_memset_zero(c, static_cast<size_t>(m * n) * sizeof(float));
    return;
  }
  const dim3 grid(static_cast<unsigned>(ceil_div(n, kTile)),
                  static_cast<unsigned>(ceil_div(m, kTile)));
  ENGINE_CHECK(grid.y <= 65535, "matmul_tensor_core_cuda: m=", m,
               " has too many row tiles for the grid");
  tf32_gemm_kernel<<<grid, kThreads, 0, current_stream()>>>(int(m), int(n), int(k), a, b, trans_a,
                                                            trans_b, c, accumulate);
  CUDA_CHECK_LAUNCH("matmul_tensor_core_cuda (tf32) m=", m, " n=", n, " k=", k,
                    " trans_a=", trans_a, " trans_b=", trans_b);
}

}  // namespace engine::kernels
