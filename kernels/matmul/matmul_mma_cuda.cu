// matmul on CUDA tensor cores through mma.sync, with a three-stage cp.async pipeline: C (+)= op(A)
// op(B) with TF32 operands and FP32 accumulation. The WMMA version with a register pipeline is
// matmul_tensor_core_cuda.cu; ENGINE_TC_GEMM=wmma|mma (engine/backend.h) picks one for matmul
// under the tf32 policy (wmma by default until a GPU has timed this one).
//
// Math:    C[i, j] (+)= sum_p tf32(op(A)[i, p]) tf32(op(B)[p, j]), each operand rounded by cvt.rna
//          (round to nearest, ties away from zero) when it goes from shared memory into registers;
//          each product is exact in FP32 and the sums round in FP32, 8 p per instruction. With
//          `accumulate`, C's old value is added once at the end, in FP32. The same contract and
//          test bound as the WMMA kernel (tests/ops/matmul_mma_cuda_test.cpp).
// Tile:    block tile 128 (rows of C) x 64 (columns) x 16 (p), 128 threads = 4 warps in 2 x 2, each
//          warp a 64 x 32 piece of C as 4 x 4 mma.sync.m16n8k8 tiles (64 FP32 accumulators per
//          thread, in the instruction's documented layout, kernels/common/mma_sync.cuh). The
//          epilogue writes them straight to C from registers: this layout is documented, unlike
//          WMMA's.
// Pipeline: three stages of shared memory (45 KiB of the 48 KiB static limit): while the warps
//          multiply stage s, the copies of stages s + 1 and s + 2 are in flight (cp.async,
//          global -> shared without registers); one cp.async.wait_group 1 and one __syncthreads per
//          16 p. The stage a step overwrites is the one every warp finished in the step before,
//          which that __syncthreads separates.
// Loads:   an operand's stage keeps its layout in global memory: p-contiguous [rows][16 + 4] (A
//          untransposed, B transposed) or row-contiguous [16][rows + 8] (A^T, B untransposed); the
//          paddings make the fragment reads (8 rows x 4 p per instruction) fall in 32 different
//          banks and keep every 16-byte copy aligned. A copy moves 16 bytes (cp.async.cg) when the
//          operand's contiguous length is a multiple of 4 floats and its pointer 16-byte aligned,
//          else 4 bytes (cp.async.ca); copies outside the operand read nothing and write zeros
//          (src-size 0), so odd M, N and K need no other edge code.
// Cost:    2 m n k FLOPs; 4 (m k + k n + m n) bytes at least. Per block and 16 p it reads
//          12 KiB for 262 kFLOP (21.3 FLOP/byte, against 16 for the WMMA kernel's 64 x 64 tile), so
//          it is still bound by L2 bandwidth rather than the tensor cores: at 5.5 TB/s of L2 an
//          H100 would feed it about 117 TFLOP/s, so expect at most about 25% of the dense TF32 peak
//          (495 TFLOP/s, H100 SXM) -- more than the WMMA kernel's register pipeline allows, still
//          below cuBLAS's TF32 GEMM (128 x 256 tiles, 4+ stages in dynamic shared memory).
//          Expected, not measured: no GPU was available when it was written.
// Indexing: 32-bit within each matrix (each < 2^31 elements, checked).
#include <climits>
#include <cstdint>

#include "kernels/common/cuda_check.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/mma_sync.cuh"
#include "kernels/matmul/matmul_mma.h"

namespace engine::kernels {

namespace {

constexpr int kTileM = 128;                      // rows of C per block
constexpr int kTileN = 64;                       // columns of C per block
constexpr int kTileK = 16;                       // p per stage: two instructions deep
constexpr int kStages = 3;                       // shared-memory stages in the pipeline
constexpr int kThreads = 128;                    // 4 warps in 2 x 2
constexpr int kWarpM = 64, kWarpN = 32;          // each warp's piece of C
constexpr int kMmaM = 16, kMmaN = 8, kMmaK = 8;  // one mma.sync.m16n8k8
constexpr int kWarpTilesM = kWarpM / kMmaM;      // 4 instructions down
constexpr int kWarpTilesN = kWarpN / kMmaN;      // 4 across
constexpr int kPStride = kTileK + 4;             // a p-contiguous stage's row length
constexpr int kWarpLanes = 32;                   // warpSize, which host code cannot read under nvcc

// Floats of one operand's stage with `rows` rows of C's side, in either layout.
__host__ __device__ constexpr int row_contiguous_stride(int rows) { return rows + 8; }
__host__ __device__ constexpr int stage_floats(int rows) {
  return rows * kPStride > kTileK * row_contiguous_stride(rows)
             ? rows * kPStride
             : kTileK * row_contiguous_stride(rows);
}

struct alignas(16) Stage {
  float a[stage_floats(kTileM)];  // rows of C x p
  float b[stage_floats(kTileN)];  // columns of C x p
};
struct alignas(16) SharedStages {
  Stage stages[kStages];
};

// Issues this thread's copies of rows [row0, row0 + kRows) x p [k0, k0 + 16) of an operand with
// `rows` rows and k p-values, stored p-contiguous (element (row, p) at src[row k + p]) or
// row-contiguous (at src[p rows + row]), into `stage` in the same layout. With `vectors`, 16-byte
// copies (the contiguous length is a multiple of 4 and src 16-byte aligned, so a copy is wholly
// inside or wholly outside), else 4-byte ones.
template <int kRows>
__device__ __forceinline__ void load_operand_stage(float* stage, const float* __restrict__ src,
                                                   bool p_contiguous, bool vectors, int rows, int k,
                                                   int row0, int k0) {
  constexpr int kRowStride = row_contiguous_stride(kRows);
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
    float* to = stage + (p_contiguous ? row * kPStride + p : p * kRowStride + row);
    if (vectors) {
      cp_async_16(to, from, inside ? 16 : 0);
    } else {
      cp_async_4(to, from, inside ? 4 : 0);
    }
  }
}

// Element (row, p) of an operand's stage, rounded to TF32.
template <int kRows>
__device__ __forceinline__ uint32_t staged_tf32(const float* stage, bool p_contiguous, int row,
                                                int p) {
  return float_to_tf32(p_contiguous ? stage[row * kPStride + p]
                                    : stage[p * row_contiguous_stride(kRows) + row]);
}

// The warp's 4 x 4 instruction tiles += its 64 rows of the A stage times its 32 columns of B, with
// the fragments of kernels/common/mma_sync.cuh (g = lane >> 2, t = lane % 4).
__device__ __forceinline__ void multiply_stage(const Stage& stage, bool a_p_contiguous,
                                               bool b_p_contiguous, int warp_m, int warp_n,
                                               float (&acc)[kWarpTilesM][kWarpTilesN][4]) {
  const int lane = threadIdx.x % warpSize, g = lane >> 2, t = lane % 4;
#pragma unroll
  for (int kk = 0; kk < kTileK; kk += kMmaK) {
    uint32_t a[kWarpTilesM][4], b[kWarpTilesN][2];
#pragma unroll
    for (int i = 0; i < kWarpTilesM; ++i) {
      const int row = warp_m + i * kMmaM + g;
      a[i][0] = staged_tf32<kTileM>(stage.a, a_p_contiguous, row, kk + t);
      a[i][1] = staged_tf32<kTileM>(stage.a, a_p_contiguous, row + 8, kk + t);
      a[i][2] = staged_tf32<kTileM>(stage.a, a_p_contiguous, row, kk + t + 4);
      a[i][3] = staged_tf32<kTileM>(stage.a, a_p_contiguous, row + 8, kk + t + 4);
    }
#pragma unroll
    for (int j = 0; j < kWarpTilesN; ++j) {
      const int col = warp_n + j * kMmaN + g;
      b[j][0] = staged_tf32<kTileN>(stage.b, b_p_contiguous, col, kk + t);
      b[j][1] = staged_tf32<kTileN>(stage.b, b_p_contiguous, col, kk + t + 4);
    }
#pragma unroll
    for (int i = 0; i < kWarpTilesM; ++i) {
#pragma unroll
      for (int j = 0; j < kWarpTilesN; ++j) mma_m16n8k8_tf32(acc[i][j], a[i], b[j], acc[i][j]);
    }
  }
}

// Block (x, y) computes the 128 x 64 tile (y, x) of C.
__global__ void __launch_bounds__(kThreads)
    tf32_mma_gemm_kernel(int m, int n, int k, const float* __restrict__ a,
                         const float* __restrict__ b, bool trans_a, bool trans_b, bool a_vectors,
                         bool b_vectors, float* __restrict__ c, bool accumulate) {
  __shared__ SharedStages tiles;
  const int m0 = blockIdx.y * kTileM, n0 = blockIdx.x * kTileN;
  const int warp = threadIdx.x / warpSize;
  const int warp_m = warp / 2 * kWarpM, warp_n = warp % 2 * kWarpN;
  // op(A) is p-contiguous when A is stored [m, k]; op(B) when B is stored transposed [n, k].
  const bool a_p_contiguous = !trans_a, b_p_contiguous = trans_b;
  const auto load_stage = [&](Stage& stage, int k0) {
    load_operand_stage<kTileM>(stage.a, a, a_p_contiguous, a_vectors, m, k, m0, k0);
    load_operand_stage<kTileN>(stage.b, b, b_p_contiguous, b_vectors, n, k, n0, k0);
  };

  float acc[kWarpTilesM][kWarpTilesN][4];
#pragma unroll
  for (int i = 0; i < kWarpTilesM; ++i) {
#pragma unroll
    for (int j = 0; j < kWarpTilesN; ++j) {
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;
    }
  }
  const int steps = (k + kTileK - 1) / kTileK;
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
    multiply_stage(tiles.stages[step % kStages], a_p_contiguous, b_p_contiguous, warp_m, warp_n,
                   acc);
  }

  // Epilogue from registers: d[r] of tile (i, j) is C(g + 8 (r / 2), 2 t + r % 2) of the tile.
  const int lane = threadIdx.x % warpSize, g = lane >> 2, t = lane % 4;
#pragma unroll
  for (int i = 0; i < kWarpTilesM; ++i) {
#pragma unroll
    for (int j = 0; j < kWarpTilesN; ++j) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int row = m0 + warp_m + i * kMmaM + g + 8 * (r / 2);
        const int col = n0 + warp_n + j * kMmaN + 2 * t + r % 2;
        if (row >= m || col >= n) continue;
        float* out = c + row * n + col;
        *out = accumulate ? *out + acc[i][j][r] : acc[i][j][r];
      }
    }
  }
}

// The layout test's instructions: registers in, registers out (matmul_mma.h).
__global__ void mma_tf32_registers_kernel(const float* a_registers, const float* b_registers,
                                          const float* c_registers, float* d_registers) {
  const int lane = threadIdx.x;
  uint32_t a[4], b[2];
  float c[4], d[4];
  for (int i = 0; i < 4; ++i) {
    a[i] = float_to_tf32(a_registers[4 * lane + i]);
    c[i] = c_registers[4 * lane + i];
  }
  for (int i = 0; i < 2; ++i) b[i] = float_to_tf32(b_registers[2 * lane + i]);
  mma_m16n8k8_tf32(d, a, b, c);
  for (int i = 0; i < 4; ++i) d_registers[4 * lane + i] = d[i];
}

__global__ void mma_bf16_registers_kernel(const float* a_registers, const float* b_registers,
                                          const float* c_registers, float* d_registers) {
  const int lane = threadIdx.x;
  uint32_t a[4], b[2];
  float c[4], d[4];
  for (int i = 0; i < 4; ++i) {
    a[i] = pack_bf16x2(a_registers[8 * lane + 2 * i], a_registers[8 * lane + 2 * i + 1]);
    c[i] = c_registers[4 * lane + i];
  }
  for (int i = 0; i < 2; ++i) {
    b[i] = pack_bf16x2(b_registers[4 * lane + 2 * i], b_registers[4 * lane + 2 * i + 1]);
  }
  mma_m16n8k16_bf16(d, a, b, c);
  for (int i = 0; i < 4; ++i) d_registers[4 * lane + i] = d[i];
}

bool aligned_16(const float* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

}  // namespace

void matmul_mma_cuda(int64_t m, int64_t n, int64_t k, const float* a, const float* b, bool trans_a,
                     bool trans_b, float* c, bool accumulate) {
  ENGINE_CHECK(m >= 0 && n >= 0 && k >= 0 && m * k < INT_MAX && k * n < INT_MAX && m * n < INT_MAX,
               "matmul_mma_cuda: m=", m, " n=", n, " k=", k,
               " is negative or needs 64-bit indexing (the kernel indexes in 32 bits)");
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: C unchanged when accumulating, else zeros
    if (!accumulate) cuda_memset_zero(c, static_cast<size_t>(m * n) * sizeof(float));
    return;
  }
  // 16-byte copies where every row of the stored operand starts 16-byte aligned: A stored [m, k]
  // (k contiguous) or [k, m]; B stored [k, n] or [n, k].
  const bool a_vectors = (trans_a ? m : k) % 4 == 0 && aligned_16(a);
  const bool b_vectors = (trans_b ? k : n) % 4 == 0 && aligned_16(b);
  const dim3 grid(static_cast<unsigned>(ceil_div(n, kTileN)),
                  static_cast<unsigned>(ceil_div(m, kTileM)));
  ENGINE_CHECK(grid.y <= 65535, "matmul_mma_cuda: m=", m, " has too many row tiles for the grid");
  tf32_mma_gemm_kernel<<<grid, kThreads, 0, current_stream()>>>(
      int(m), int(n), int(k), a, b, trans_a, trans_b, a_vectors, b_vectors, c, accumulate);
  CUDA_CHECK_LAUNCH("matmul_mma_cuda (tf32) m=", m, " n=", n, " k=", k, " trans_a=", trans_a,
                    " trans_b=", trans_b);
}

void mma_m16n8k8_tf32_registers_cuda(const float* a_registers, const float* b_registers,
                                     const float* c_registers, float* d_registers) {
  mma_tf32_registers_kernel<<<1, kWarpLanes, 0, current_stream()>>>(a_registers, b_registers,
                                                                    c_registers, d_registers);
  CUDA_CHECK_LAUNCH("mma_m16n8k8_tf32_registers_cuda");
}

void mma_m16n8k16_bf16_registers_cuda(const float* a_registers, const float* b_registers,
                                      const float* c_registers, float* d_registers) {
  mma_bf16_registers_kernel<<<1, kWarpLanes, 0, current_stream()>>>(a_registers, b_registers,
                                                                    c_registers, d_registers);
  CUDA_CHECK_LAUNCH("mma_m16n8k16_bf16_registers_cuda");
}

}  // namespace engine::kernels
