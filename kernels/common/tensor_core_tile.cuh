// The WMMA tile that our tensor-core GEMM (kernels/matmul/matmul_tensor_core_cuda.cu) and
// convolutions (kernels/conv2d/conv2d_tensor_core_cuda.cu) share: the operand types (TF32, BF16),
// the 64 x 64 x 16 block tile with its shared-memory stages, where each thread stages its values,
// the multiply of one stage, the register-staged two-stage main loop and the accumulators' trip
// to a shared C tile for the epilogue. Each kernel file only says how its operands are read from
// global memory (its loader) and where C's elements go; the files' headers give the math and the
// costs.
//
// Tile:    block tile 64 (rows of C) x 64 (columns) x 16 (reduction k per step), 128 threads =
//          4 warps in 2 x 2, each warp a 32 x 32 piece of C as 2 x 2 accumulator fragments of
//          16 x 16 (32 floats of accumulators per thread). A 16-deep step is two m16n16k8
//          instructions per fragment pair in TF32, one m16n16k16 in BF16 (Operands::kFragK).
// Shared:  two stages of A [16][64 + pad] (k-major: WMMA matrix_a col_major) and B [16][64 + pad]
//          (matrix_b row_major), pad = 16 bytes (4 floats, 8 bfloat16s: keeps every fragment
//          pointer 32-byte aligned and ldm a multiple of 16 bytes, as WMMA requires, and
//          staggers the banks), plus a float C tile [64][64 + 4] for the epilogue: 34,816 bytes
//          in TF32 (stages of 8,704 bytes), 26,624 in BF16 (stages of 4,608).
// Staging: each thread stages kValues = 8 values of each operand tile per step. k-fast
//          (k = tid % 16, row = tid / 16 + 8 v) suits an operand contiguous along k, row-fast
//          (row = tid % 64, k = tid / 64 + 2 v) one contiguous along its rows: consecutive
//          threads on consecutive addresses either way.
// Pipeline: two stages through registers: each thread loads its values for step t + 1 from
//          global memory into float registers while the warps multiply stage t; then it rounds
//          them to the operand type (Operands::convert) into the other stage; one __syncthreads
//          per step. No cp.async (issue 33's next step; the mma.sync kernels have it).
#pragma once

#include <cuda_bf16.h>
#include <mma.h>

namespace engine::kernels::tensor_core_tile {

namespace wmma = nvcuda::wmma;

constexpr int kTile = 64;                           // rows and columns of C per block
constexpr int kTileK = 16;                          // reduction per step
constexpr int kThreads = 128;                       // 4 warps
constexpr int kWarpTile = 32;                       // each warp's square of C
constexpr int kFrag = 16;                           // a fragment's rows and columns
constexpr int kValues = kTile * kTileK / kThreads;  // values of each operand a thread stages
constexpr int kLdC = kTile + 4;                     // padded rows of the C tile

// TF32 operands: staged as floats whose low 13 bits are zero (cvt.rna: round to nearest, ties
// away from zero), m16n16k8.
struct Tf32Operands {
  using Stored = float;                   // the type in shared memory
  using Element = wmma::precision::tf32;  // the fragments' element type
  static constexpr int kFragK = 8;        // k per WMMA instruction
  static constexpr const char* kName = "tf32";
  static __device__ __forceinline__ float convert(float x) { return wmma::__float_to_tf32(x); }
};

// BF16 operands: staged as __nv_bfloat16 (round to nearest, ties to even), m16n16k16.
struct Bf16Operands {
  using Stored = __nv_bfloat16;
  using Element = __nv_bfloat16;
  static constexpr int kFragK = 16;
  static constexpr const char* kName = "bf16";
  static __device__ __forceinline__ __nv_bfloat16 convert(float x) { return __float2bfloat16(x); }
};

// Padded rows of a stage's tiles: 16 bytes of padding (see the header).
template <typename Operands>
constexpr int kLd = kTile + 16 / int(sizeof(typename Operands::Stored));

template <typename Operands>
struct alignas(32) Stage {
  typename Operands::Stored a[kTileK][kLd<Operands>];  // a[k][row of C]
  typename Operands::Stored b[kTileK][kLd<Operands>];  // b[k][column of C]
};
template <typename Operands>
struct alignas(32) SharedTiles {
  Stage<Operands> stages[2];
  float c[kTile][kLdC];  // the epilogue's tile, column- or row-major (accumulators_to_shared)
};

template <typename Operands>
using FragmentA = wmma::fragment<wmma::matrix_a, kFrag, kFrag, Operands::kFragK,
                                 typename Operands::Element, wmma::col_major>;
template <typename Operands>
using FragmentB = wmma::fragment<wmma::matrix_b, kFrag, kFrag, Operands::kFragK,
                                 typename Operands::Element, wmma::row_major>;
template <typename Operands>
using Accumulator = wmma::fragment<wmma::accumulator, kFrag, kFrag, Operands::kFragK, float>;

// Where this thread's staged value v of a 64 x 16 operand tile sits (the header's two orders).
__device__ __forceinline__ int row_fast_row() { return threadIdx.x % kTile; }
__device__ __forceinline__ int row_fast_k(int v) {
  return threadIdx.x / kTile + (kThreads / kTile) * v;
}
__device__ __forceinline__ int k_fast_k() { return threadIdx.x % kTileK; }
__device__ __forceinline__ int k_fast_row(int v) {
  return threadIdx.x / kTileK + (kThreads / kTileK) * v;
}

// The first row and column of C of this thread's warp (warps in 2 x 2).
__device__ __forceinline__ int warp_row() { return threadIdx.x / warpSize / 2 * kWarpTile; }
__device__ __forceinline__ int warp_col() { return threadIdx.x / warpSize % 2 * kWarpTile; }

// Rounds this thread's staged values to the operand type into their (k, row) places of `tile`.
template <typename Operands>
__device__ __forceinline__ void store_staged(
    typename Operands::Stored (&tile)[kTileK][kLd<Operands>], bool k_fast,
    const float (&values)[kValues]) {
#pragma unroll
  for (int v = 0; v < kValues; ++v) {
    const int k = k_fast ? k_fast_k() : row_fast_k(v);
    const int row = k_fast ? k_fast_row(v) : row_fast_row();
    tile[k][row] = Operands::convert(values[v]);
  }
}

// The warp's 2 x 2 accumulators += its 32 rows of the A stage times its 32 columns of B.
template <typename Operands>
__device__ __forceinline__ void multiply_stage(const Stage<Operands>& stage,
                                               Accumulator<Operands> (&acc)[2][2]) {
  const int row0 = warp_row(), col0 = warp_col();
#pragma unroll
  for (int kk = 0; kk < kTileK; kk += Operands::kFragK) {
    FragmentA<Operands> a[2];
    FragmentB<Operands> b[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      wmma::load_matrix_sync(a[i], &stage.a[kk][row0 + i * kFrag], kLd<Operands>);
      wmma::load_matrix_sync(b[i], &stage.b[kk][col0 + i * kFrag], kLd<Operands>);
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
  }
}

// The main loop: acc = the block's 64 x 64 tile of C summed over `steps` reduction steps of 16.
// load_step(t, a_values, b_values) puts this thread's values of step t's A and B tiles (zero
// outside the operands) into the two arrays, at the places store_staged gives them for
// a_k_fast and b_k_fast. t == -1 only fills stage 0; step t multiplies stage t & 1 while step
// t + 1 is loaded. Ends with a barrier: the stages may then be reused.
template <typename Operands, typename LoadStep>
__device__ __forceinline__ void multiply_pipelined(SharedTiles<Operands>& tiles, int steps,
                                                   bool a_k_fast, bool b_k_fast,
                                                   const LoadStep& load_step,
                                                   Accumulator<Operands> (&acc)[2][2]) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  }
  float a_values[kValues], b_values[kValues];
  for (int t = -1; t < steps; ++t) {
    const bool more = t + 1 < steps;
    if (more) load_step(t + 1, a_values, b_values);
    if (t >= 0) multiply_stage<Operands>(tiles.stages[t & 1], acc);
    if (more) {
      store_staged<Operands>(tiles.stages[(t + 1) & 1].a, a_k_fast, a_values);
      store_staged<Operands>(tiles.stages[(t + 1) & 1].b, b_k_fast, b_values);
    }
    __syncthreads();
  }
}

// The accumulators into the shared C tile, then a barrier: afterwards every thread may read any
// element. column_major: c[column][row], for an output contiguous along C's rows (the
// convolutions'); else c[row][column] (the GEMM's row-major C). Either way the epilogue's
// threads then read along the output's contiguous direction, and no code depends on the
// fragments' opaque layout.
template <typename Operands>
__device__ __forceinline__ void accumulators_to_shared(const Accumulator<Operands> (&acc)[2][2],
                                                       bool column_major, float (&c)[kTile][kLdC]) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int row = warp_row() + i * kFrag, col = warp_col() + j * kFrag;
      if (column_major) {
        wmma::store_matrix_sync(&c[col][row], acc[i][j], kLdC, wmma::mem_col_major);
      } else {
        wmma::store_matrix_sync(&c[row][col], acc[i][j], kLdC, wmma::mem_row_major);
      }
    }
  }
  __syncthreads();
}

}  // namespace engine::kernels::tensor_core_tile
