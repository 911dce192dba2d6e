// The mma.sync tile that our pipelined tensor-core GEMM (kernels/matmul/matmul_mma_cuda.cu) and
// convolutions (kernels/conv2d/conv2d_mma_cuda.cu) share: the operand types (TF32, BF16), the
// 128 x 64 x 16 block tile with its three cp.async stages in either of two layouts, the
// generic loader of an operand stored along p or along its rows, the fragment loads and the
// warp's multiply of one stage, the pipelined main loop, and the walk from the accumulator
// registers to C's (row, column) for the epilogue. Each kernel file only says how its operands
// are gathered from global memory and where C's elements go; the files' headers give the math and
// the costs. (The WMMA kernels' tile is kernels/common/tensor_core_tile.cuh.)
//
// Tile:    block tile 128 (rows of C) x 64 (columns) x 16 (p, the reduction, per stage), 128
//          threads = 4 warps in 2 x 2, each warp a 64 x 32 piece of C as 4 x 4 instruction tiles
//          of 16 x 8 (64 FP32 accumulators per thread in the instruction's documented layout,
//          kernels/common/mma_sync.cuh), written from registers by the epilogue. A 16-deep stage
//          is two mma.sync.m16n8k8 per instruction tile in TF32, one m16n8k16 in BF16
//          (Operands::kMmaK).
// Stages:  an operand's stage is stored p-contiguous [rows][16 + 4] or row-contiguous
//          [16][rows + pad]; a stage holds either (both sizes reserved), so the GEMM picks per
//          call (its operands' storage) and the convolutions per pass. Floats, as the copies
//          bring them: the operands are rounded to TF32 (cvt.rna) or BF16 (cvt.rn, ties to even,
//          as __float2bfloat16) when they go from shared memory into registers. Three stages take
//          3 x 15 KiB = 45 KiB of the 48 KiB static limit. Banks: TF32 reads (row g, p t) of a
//          warp's 8 rows x 4 p, at 20 g + t (p-contiguous) or (rows + 8) t + g words (rows
//          128 or 64): 32 different banks. BF16 reads p = 2 t and 2 t + 1: at (2 t)(rows + 4) + g
//          with pad 4 (32 banks again, hence the smaller pad), but 20 g + 2 t in the p-contiguous
//          layout, a 2-way conflict (a wider row would not fit three GEMM stages in static shared
//          memory).
// Copies:  load_operand_stage moves 16 bytes (cp.async.cg) when the contiguous length is a
//          multiple of 4 floats and the pointer 16-byte aligned, else 4 (cp.async.ca); copies
//          outside the operand read nothing and write zeros (src-size 0), so odd sizes need no
//          other edge code (every stage is wholly written, zeros past the end).
// Pipeline: while the warps multiply stage s, the copies of stages s + 1 and s + 2 are in flight;
//          one cp.async.wait_group 1 and one __syncthreads per 16 p. The stage a step refills is
//          the one every warp finished in the step before, which that __syncthreads separates.
#pragma once

#include <cstdint>

#include "kernels/common/mma_sync.cuh"

namespace engine::kernels::mma_tile {

constexpr int kTileM = 128;                  // rows of C per block
constexpr int kTileN = 64;                   // columns of C per block
constexpr int kTileK = 16;                   // p per stage
constexpr int kStages = 3;                   // shared-memory stages in the pipeline
constexpr int kThreads = 128;                // 4 warps in 2 x 2
constexpr int kWarpM = 64, kWarpN = 32;      // each warp's piece of C
constexpr int kMmaM = 16, kMmaN = 8;         // one instruction's piece of C
constexpr int kWarpTilesM = kWarpM / kMmaM;  // 4 instructions down
constexpr int kWarpTilesN = kWarpN / kMmaN;  // 4 across
constexpr int kPStride = kTileK + 4;         // a p-contiguous stage's row length

// This thread's accumulators: [instruction row][instruction column][d register].
using Accumulators = float[kWarpTilesM][kWarpTilesN][4];

// TF32 operands, mma.sync.m16n8k8: fragments as mma_sync.cuh's m16n8k8 layout (p = kk + t).
struct Tf32Operands {
  static constexpr int kMmaK = 8;    // p per instruction
  static constexpr int kRowPad = 8;  // row-contiguous stage: rows + 8 floats per p
  static constexpr const char* kName = "tf32";

  // A(row | row + 8, p | p + 4); `staged` reads element (row, p) of the stage.
  template <typename Staged>
  static __device__ __forceinline__ void a_fragment(const Staged& staged, int row, int kk, int t,
                                                    uint32_t (&a)[4]) {
    const int p = kk + t;
    a[0] = float_to_tf32(staged.at(row, p));
    a[1] = float_to_tf32(staged.at(row + 8, p));
    a[2] = float_to_tf32(staged.at(row, p + 4));
    a[3] = float_to_tf32(staged.at(row + 8, p + 4));
  }
  // B(p | p + 4, col), read as element (col, p) of the stage.
  template <typename Staged>
  static __device__ __forceinline__ void b_fragment(const Staged& staged, int col, int kk, int t,
                                                    uint32_t (&b)[2]) {
    b[0] = float_to_tf32(staged.at(col, kk + t));
    b[1] = float_to_tf32(staged.at(col, kk + t + 4));
  }
  static __device__ __forceinline__ void mma(float (&acc)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2]) {
    mma_m16n8k8_tf32(acc, a, b, acc);
  }
};

// BF16 operands, mma.sync.m16n8k16: each register packs two p-neighbours (mma_sync.cuh's m16n8k16
// layout, p = kk + 2 t), rounded by cvt.rn.bf16x2 (to nearest, ties to even).
struct Bf16Operands {
  static constexpr int kMmaK = 16;
  static constexpr int kRowPad = 4;
  static constexpr const char* kName = "bf16";

  // A(row | row + 8, p p + 1 | p + 8 p + 9).
  template <typename Staged>
  static __device__ __forceinline__ void a_fragment(const Staged& staged, int row, int kk, int t,
                                                    uint32_t (&a)[4]) {
    const int p = kk + 2 * t;
    a[0] = pack_bf16x2(staged.at(row, p), staged.at(row, p + 1));
    a[1] = pack_bf16x2(staged.at(row + 8, p), staged.at(row + 8, p + 1));
    a[2] = pack_bf16x2(staged.at(row, p + 8), staged.at(row, p + 9));
    a[3] = pack_bf16x2(staged.at(row + 8, p + 8), staged.at(row + 8, p + 9));
  }
  // B(p p + 1 | p + 8 p + 9, col).
  template <typename Staged>
  static __device__ __forceinline__ void b_fragment(const Staged& staged, int col, int kk, int t,
                                                    uint32_t (&b)[2]) {
    const int p = kk + 2 * t;
    b[0] = pack_bf16x2(staged.at(col, p), staged.at(col, p + 1));
    b[1] = pack_bf16x2(staged.at(col, p + 8), staged.at(col, p + 9));
  }
  static __device__ __forceinline__ void mma(float (&acc)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2]) {
    mma_m16n8k16_bf16(acc, a, b, acc);
  }
};

// Floats per p of a row-contiguous stage with `rows` rows, and of one operand's stage in either
// layout.
template <typename Operands>
__host__ __device__ constexpr int row_contiguous_stride(int rows) {
  return rows + Operands::kRowPad;
}
template <typename Operands>
__host__ __device__ constexpr int stage_floats(int rows) {
  return rows * kPStride > kTileK * row_contiguous_stride<Operands>(rows)
             ? rows * kPStride
             : kTileK * row_contiguous_stride<Operands>(rows);
}

template <typename Operands>
struct alignas(16) Stage {
  float a[stage_floats<Operands>(kTileM)];  // rows of C x p
  float b[stage_floats<Operands>(kTileN)];  // columns of C x p
};
template <typename Operands>
struct alignas(16) SharedStages {
  Stage<Operands> stages[kStages];
};

// Where element (row, p) of an operand's stage with kRows rows sits, in either layout.
template <typename Operands, int kRows>
__device__ __forceinline__ int staged_index(bool p_contiguous, int row, int p) {
  return p_contiguous ? row * kPStride + p : p * row_contiguous_stride<Operands>(kRows) + row;
}

// One operand's stage as the fragment loads read it.
template <typename Operands, int kRows>
struct StagedOperand {
  const float* data;
  bool p_contiguous;
  __device__ __forceinline__ float at(int row, int p) const {
    return data[staged_index<Operands, kRows>(p_contiguous, row, p)];
  }
};

// Issues this thread's copies of rows [row0, row0 + kRows) x p [k0, k0 + 16) of an operand with
// `rows` rows and k p-values, stored p-contiguous (element (row, p) at src[row k + p]) or
// row-contiguous (at src[p rows + row]), into `stage` in the same layout. With `vectors`, 16-byte
// copies (the contiguous length is a multiple of 4 and src 16-byte aligned, so a copy is wholly
// inside or wholly outside), else 4-byte ones.
template <typename Operands, int kRows>
__device__ __forceinline__ void load_operand_stage(float* stage, const float* __restrict__ src,
                                                   bool p_contiguous, bool vectors, int rows, int k,
                                                   int row0, int k0) {
  const int per_copy = vectors ? 4 : 1;
  const int copies = kRows * kTileK / per_copy;
  for (int id = threadIdx.x; id < copies; id += kThreads) {
    int row, p;  // the copy's first element in the stage
    if (p_contiguous) {
      row = id / (kTileK / per_copy);
      p = id % (kTileK / per_copy) * per_copy;
    } else {
      p = id / (kRows / per_copy);
      row = id % (kRows / per_copy) * per_copy;
    }
    const int global_row = row0 + row, global_p = k0 + p;
    const bool inside = global_row < rows && global_p < k;
    const float* from =
        inside ? src + (p_contiguous ? global_row * k + global_p : global_p * rows + global_row)
               : src;
    float* to = stage + staged_index<Operands, kRows>(p_contiguous, row, p);
    if (vectors) {
      cp_async_16(to, from, inside ? 16 : 0);
    } else {
      cp_async_4(to, from, inside ? 4 : 0);
    }
  }
}

// The first row and column of C of this thread's warp (warps in 2 x 2).
__device__ __forceinline__ int warp_row() { return threadIdx.x / warpSize / 2 * kWarpM; }
__device__ __forceinline__ int warp_col() { return threadIdx.x / warpSize % 2 * kWarpN; }

// The warp's 4 x 4 instruction tiles += its 64 rows of the A stage times its 32 columns of B
// (g = lane >> 2, t = lane % 4 as in mma_sync.cuh).
template <typename Operands>
__device__ __forceinline__ void multiply_stage(const Stage<Operands>& stage, bool a_p_contiguous,
                                               bool b_p_contiguous, Accumulators& acc) {
  const int lane = threadIdx.x % warpSize, g = lane >> 2, t = lane % 4;
  const int row0 = warp_row(), col0 = warp_col();
  const StagedOperand<Operands, kTileM> a_stage{stage.a, a_p_contiguous};
  const StagedOperand<Operands, kTileN> b_stage{stage.b, b_p_contiguous};
#pragma unroll
  for (int kk = 0; kk < kTileK; kk += Operands::kMmaK) {
    uint32_t a[kWarpTilesM][4], b[kWarpTilesN][2];
#pragma unroll
    for (int i = 0; i < kWarpTilesM; ++i) {
      Operands::a_fragment(a_stage, row0 + i * kMmaM + g, kk, t, a[i]);
    }
#pragma unroll
    for (int j = 0; j < kWarpTilesN; ++j) {
      Operands::b_fragment(b_stage, col0 + j * kMmaN + g, kk, t, b[j]);
    }
#pragma unroll
    for (int i = 0; i < kWarpTilesM; ++i) {
#pragma unroll
      for (int j = 0; j < kWarpTilesN; ++j) Operands::mma(acc[i][j], a[i], b[j]);
    }
  }
}

// acc = the warp's piece of the block's A B over a reduction of `kdim` values, through the
// three-stage pipeline; load_stage(stage, k0) issues this thread's cp.async copies of p
// [k0, k0 + 16) into `stage` (without committing them), in the layouts the two flags name.
template <typename Operands, typename LoadStage>
__device__ __forceinline__ void multiply_pipelined(SharedStages<Operands>& tiles, int kdim,
                                                   const LoadStage& load_stage, bool a_p_contiguous,
                                                   bool b_p_contiguous, Accumulators& acc) {
#pragma unroll
  for (int i = 0; i < kWarpTilesM; ++i) {
#pragma unroll
    for (int j = 0; j < kWarpTilesN; ++j) {
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;
    }
  }
  const int steps = (kdim + kTileK - 1) / kTileK;
  // Prologue: stages 0 .. kStages - 2 in flight, one commit group each (empty past the end, so
  // the group count per step stays fixed).
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < steps) load_stage(tiles.stages[s], s * kTileK);
    cp_async_commit();
  }
  for (int step = 0; step < steps; ++step) {
    cp_async_wait<kStages - 2>();  // this thread's copies of stage `step` have landed ...
    __syncthreads();  // ... everyone's have, and every warp is done with stage step - 1
    const int next = step + kStages - 1;  // into the stage that step - 1 used
    if (next < steps) load_stage(tiles.stages[next % kStages], next * kTileK);
    cp_async_commit();
    multiply_stage<Operands>(tiles.stages[step % kStages], a_p_contiguous, b_p_contiguous, acc);
  }
}

// The epilogue's walk over this thread's 64 accumulators: accumulator e is
// acc[e / 16][e / 4 % 4][e % 4], d[r] of instruction tile (i, j), which holds element
// (g + 8 (r / 2), 2 t + r % 2) of that 16 x 8 tile (mma_sync.cuh); accumulator_place gives its
// row and column in the block's tile. A kernel's epilogue is one unrolled loop over e (not a
// callback: with the store as a lambda, nvcc gave the GEMM 168 registers and spills on sm_80).
constexpr int kAccumulators = kWarpTilesM * kWarpTilesN * 4;

struct TilePlace {
  int row, col;
};
__device__ __forceinline__ TilePlace accumulator_place(int e) {
  const int lane = threadIdx.x % warpSize, g = lane >> 2, t = lane % 4;
  const int i = e / (kWarpTilesN * 4), j = e / 4 % kWarpTilesN, r = e % 4;
  return TilePlace{warp_row() + i * kMmaM + g + 8 * (r / 2),
                   warp_col() + j * kMmaN + 2 * t + r % 2};
}
__device__ __forceinline__ float accumulator(const Accumulators& acc, int e) {
  return acc[e / (kWarpTilesN * 4)][e / 4 % kWarpTilesN][e % 4];
}

}  // namespace engine::kernels::mma_tile
