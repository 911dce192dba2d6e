// matmul on CUDA tensor cores: C (+)= op(A) op(B) with TF32 or BF16 operands and FP32
// accumulation, through WMMA (nvcuda::wmma): TF32 as m16n16k8 (precision::tf32), BF16 as
// m16n16k16 (__nv_bfloat16). The strict-FP32 SGEMM is matmul_cuda.cu; matmul_tensor_core_cuda
// picks by the precision policy (kernels/common/precision.h). One kernel body serves both:
// tensor_core_gemm_kernel<Operands>, where Operands (Tf32Operands, Bf16Operands) gives the type
// the operands are staged in, the WMMA shape's depth and the FP32 -> operand conversion; tiles,
// loads, pipeline and epilogue are the same code.
//
// Math:    C[i, j] (+)= sum_p r(op(A)[i, p]) r(op(B)[p, j]) (matmul.h's contract with each operand
//          first rounded by r): TF32 r = cvt.rna (10 mantissa bits, round to nearest, ties away
//          from zero, wmma::__float_to_tf32); BF16 r = __float2bfloat16 (7 mantissa bits, round
//          to nearest, ties to even). Each product of two rounded values is exact in FP32 (22 or
//          16 significant bits) and the sums round in FP32. With `accumulate`, C's old value is
//          added once at the end, in FP32.
// Tile:    block tile 64 (rows of C) x 64 (columns) x 16 (p), 128 threads = 4 warps in 2 x 2, each
//          warp a 32 x 32 piece of C as 2 x 2 accumulator fragments of 16 x 16 (32 floats of
//          accumulators per thread). A 16-deep p step is two m16n16k8 instructions per fragment
//          pair in TF32, one m16n16k16 in BF16. Shared memory: two stages of A [64][16 + pad] and
//          B [16][64 + pad], pad = 16 bytes (4 floats, 8 bfloat16s: keeps every fragment pointer
//          32-byte aligned and ldm a multiple of 16 bytes, as WMMA requires, and staggers the
//          banks), plus a float C tile [64][64 + 4] for the epilogue: 36,352 bytes in TF32,
//          28,160 in BF16 (stages of 5,376 bytes instead of 9,472).
// Pipeline: two stages through registers, as the SGEMM: each thread brings its 8 values of A and
//          8 of B for the next p step from global memory into registers (rounding them to the
//          operand type) while the warps multiply the current stage; one __syncthreads per step.
//          No cp.async yet: the multi-stage asynchronous pipeline is the next step (issue 33).
// Loads:   an operand is read along p (A untransposed, B transposed: 16 consecutive floats per
//          row) or along its rows (A^T, B untransposed: 64 consecutive floats), consecutive
//          threads on consecutive addresses either way. Edges (M, N, K not multiples of the tile)
//          read zeros; the epilogue goes through the shared C tile (store_matrix_sync) and skips
//          elements outside C, so no code depends on WMMA's opaque fragment layout.
// Cost:    2 m n k FLOPs; 4 (m k + k n + m n) bytes at least (the operands are FP32 tensors in
//          both modes: BF16 is made on the way into shared memory, so it halves shared-memory
//          traffic but not global). Per block and p step it reads 8 KiB for 131 kFLOP
//          (16 FLOP/byte), so the kernel is bound by L2 bandwidth well before the tensor cores:
//          TF32: expected at most about 30% of the dense TF32 peak (495 TFLOP/s on an H100 SXM or
//          H200), i.e. several times our FFMA SGEMM but below cuBLAS's TF32 GEMM (128 x 256
//          tiles, cp.async pipeline). BF16: the same bytes per FLOP, so about the same
//          TFLOP/s, which is at most about 15% of the dense BF16 peak (989 TFLOP/s); what BF16
//          would gain needs larger tiles and BF16 operands in memory. Not yet measured: no GPU
//          was available when either was written.
// Indexing: 32-bit within each matrix (each < 2^31 elements, checked).
#include <cuda_bf16.h>
#include <mma.h>

#include <climits>

#include "kernels/common/cuda_check.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/matmul/matmul.h"

namespace engine::kernels {

namespace {

namespace wmma = nvcuda::wmma;

constexpr int kTile = 64;                           // rows and columns of C per block
constexpr int kTileK = 16;                          // p per step
constexpr int kThreads = 128;                       // 4 warps
constexpr int kWarpTile = 32;                       // each warp's square of C
constexpr int kFrag = 16;                           // a fragment's rows and columns
constexpr int kValues = kTile * kTileK / kThreads;  // values of each operand a thread stages
constexpr int kLdC = kTile + 4;

// TF32 operands: staged as floats whose low 13 bits are zero, m16n16k8.
struct Tf32Operands {
  using Stored = float;                   // the type in registers and shared memory
  using Element = wmma::precision::tf32;  // the fragments' element type
  static constexpr int kFragK = 8;        // p per WMMA instruction
  static constexpr const char* kName = "tf32";
  static __device__ __forceinline__ float convert(float x) { return wmma::__float_to_tf32(x); }
};

// BF16 operands: staged as __nv_bfloat16, m16n16k16.
struct Bf16Operands {
  using Stored = __nv_bfloat16;
  using Element = __nv_bfloat16;
  static constexpr int kFragK = 16;
  static constexpr const char* kName = "bf16";
  static __device__ __forceinline__ __nv_bfloat16 convert(float x) { return __float2bfloat16(x); }
};

// Leading dimensions of the stages: 16 bytes of padding per row (see the header).
template <typename Operands>
constexpr int kPad = 16 / int(sizeof(typename Operands::Stored));
template <typename Operands>
constexpr int kLdA = kTileK + kPad<Operands>;
template <typename Operands>
constexpr int kLdB = kTile + kPad<Operands>;

template <typename Operands>
struct alignas(32) Stage {
  typename Operands::Stored a[kTile][kLdA<Operands>];   // a[row of C][p]
  typename Operands::Stored b[kTileK][kLdB<Operands>];  // b[p][column of C]
};
template <typename Operands>
struct alignas(32) SharedTiles {
  Stage<Operands> stages[2];
  float c[kTile][kLdC];
};

template <typename Operands>
using FragmentA = wmma::fragment<wmma::matrix_a, kFrag, kFrag, Operands::kFragK,
                                 typename Operands::Element, wmma::row_major>;
template <typename Operands>
using FragmentB = wmma::fragment<wmma::matrix_b, kFrag, kFrag, Operands::kFragK,
                                 typename Operands::Element, wmma::row_major>;
template <typename Operands>
using Accumulator = wmma::fragment<wmma::accumulator, kFrag, kFrag, Operands::kFragK, float>;

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
// row-contiguous (at src[p rows + row]), rounded to the operand type; outside the operand, zero.
template <typename Operands>
__device__ __forceinline__ void load_tile(const float* __restrict__ src, bool p_contiguous,
                                          int rows, int k, int row0, int k0,
                                          typename Operands::Stored (&values)[kValues]) {
#pragma unroll
  for (int v = 0; v < kValues; ++v) {
    int row, p;
    staged_place(p_contiguous, v, row, p);
    row += row0;
    p += k0;
    const float x = row < rows && p < k ? src[p_contiguous ? row * k + p : p * rows + row] : 0.0f;
    values[v] = Operands::convert(x);
  }
}

template <typename Operands>
__device__ __forceinline__ void store_tiles(Stage<Operands>& stage, bool a_p_contiguous,
                                            bool b_p_contiguous,
                                            const typename Operands::Stored (&a_values)[kValues],
                                            const typename Operands::Stored (&b_values)[kValues]) {
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
template <typename Operands>
__device__ __forceinline__ void multiply_stage(const Stage<Operands>& stage, int warp_row,
                                               int warp_col, Accumulator<Operands> (&acc)[2][2]) {
#pragma unroll
  for (int kk = 0; kk < kTileK; kk += Operands::kFragK) {
    FragmentA<Operands> a[2];
    FragmentB<Operands> b[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      wmma::load_matrix_sync(a[i], &stage.a[warp_row + i * kFrag][kk], kLdA<Operands>);
      wmma::load_matrix_sync(b[i], &stage.b[kk][warp_col + i * kFrag], kLdB<Operands>);
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
  }
}

// Block (x, y) computes the 64 x 64 tile (y, x) of C.
template <typename Operands>
__global__ void __launch_bounds__(kThreads)
    tensor_core_gemm_kernel(int m, int n, int k, const float* __restrict__ a,
                            const float* __restrict__ b, bool trans_a, bool trans_b,
                            float* __restrict__ c, bool accumulate) {
  __shared__ SharedTiles<Operands> tiles;
  const int m0 = blockIdx.y * kTile, n0 = blockIdx.x * kTile;
  const int warp = threadIdx.x / warpSize;
  const int warp_row = warp / 2 * kWarpTile, warp_col = warp % 2 * kWarpTile;
  // op(A) is p-contiguous when A is stored [m, k]; op(B) when B is stored transposed [n, k].
  const bool a_p_contiguous = !trans_a, b_p_contiguous = trans_b;

  Accumulator<Operands> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  }
  typename Operands::Stored a_values[kValues], b_values[kValues];
  const int steps = (k + kTileK - 1) / kTileK;
  for (int t = -1; t < steps; ++t) {
    // t == -1 only fills stage 0; step t multiplies stage t & 1 while step t + 1 is loaded.
    const bool more = t + 1 < steps;
    if (more) {
      const int k0 = (t + 1) * kTileK;
      load_tile<Operands>(a, a_p_contiguous, m, k, m0, k0, a_values);
      load_tile<Operands>(b, b_p_contiguous, n, k, n0, k0, b_values);
    }
    if (t >= 0) multiply_stage<Operands>(tiles.stages[t & 1], warp_row, warp_col, acc);
    if (more) {
      store_tiles<Operands>(tiles.stages[(t + 1) & 1], a_p_contiguous, b_p_contiguous, a_values,
                            b_values);
    }
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

template <typename Operands>
void launch_tensor_core_gemm(int64_t m, int64_t n, int64_t k, const float* a, const float* b,
                             bool trans_a, bool trans_b, float* c, bool accumulate) {
  const dim3 grid(static_cast<unsigned>(ceil_div(n, kTile)),
                  static_cast<unsigned>(ceil_div(m, kTile)));
  ENGINE_CHECK(grid.y <= 65535, "matmul_tensor_core_cuda: m=", m,
               " has too many row tiles for the grid");
  tensor_core_gemm_kernel<Operands><<<grid, kThreads, 0, current_stream()>>>(
      int(m), int(n), int(k), a, b, trans_a, trans_b, c, accumulate);
  CUDA_CHECK_LAUNCH("matmul_tensor_core_cuda (", Operands::kName, ") m=", m, " n=", n, " k=", k,
                    " trans_a=", trans_a, " trans_b=", trans_b);
}

}  // namespace

void matmul_tensor_core_cuda(int64_t m, int64_t n, int64_t k, const float* a, const float* b,
                             bool trans_a, bool trans_b, float* c, bool accumulate,
                             Precision precision) {
  if (precision == Precision::Fp32) {
    matmul_cuda(m, n, k, a, b, trans_a, trans_b, c, accumulate);
    return;
  }
  ENGINE_CHECK(m >= 0 && n >= 0 && k >= 0 && m * k < INT_MAX && k * n < INT_MAX && m * n < INT_MAX,
               "matmul_tensor_core_cuda: m=", m, " n=", n, " k=", k,
               " is negative or needs 64-bit indexing (the kernel indexes in 32 bits)");
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: C unchanged when accumulating, else zeros
    if (!accumulate) cuda_memset_zero(c, static_cast<size_t>(m * n) * sizeof(float));
    return;
  }
  if (precision == Precision::Tf32) {
    launch_tensor_core_gemm<Tf32Operands>(m, n, k, a, b, trans_a, trans_b, c, accumulate);
  } else {
    launch_tensor_core_gemm<Bf16Operands>(m, n, k, a, b, trans_a, trans_b, c, accumulate);
  }
}

}  // namespace engine::kernels
