// matmul on CUDA tensor cores: C (+)= op(A) op(B) with TF32 or BF16 operands and FP32
// accumulation, through WMMA (nvcuda::wmma): TF32 as m16n16k8 (precision::tf32), BF16 as
// m16n16k16 (__nv_bfloat16). The strict-FP32 SGEMM is matmul_cuda.cu; matmul_tensor_core_cuda
// picks by the precision policy (kernels/common/precision.h). One kernel body serves both:
// tensor_core_gemm_kernel<Operands>, where Operands (Tf32Operands, Bf16Operands) gives the type
// the operands are staged in, the WMMA shape's depth and the FP32 -> operand conversion. The
// tile, its stages, the multiply, the register-staged main loop and the trip to the shared C
// tile are kernels/common/tensor_core_tile.cuh's, shared with the tensor-core convolutions
// (kernels/conv2d/conv2d_tensor_core_cuda.cu); this file has the GEMM's loads and epilogue.
//
// Math:    C[i, j] (+)= sum_p r(op(A)[i, p]) r(op(B)[p, j]) (matmul.h's contract with each operand
//          first rounded by r): TF32 r = cvt.rna (10 mantissa bits, round to nearest, ties away
//          from zero, wmma::__float_to_tf32); BF16 r = __float2bfloat16 (7 mantissa bits, round
//          to nearest, ties to even). Each product of two rounded values is exact in FP32 (22 or
//          16 significant bits) and the sums round in FP32. With `accumulate`, C's old value is
//          added once at the end, in FP32.
// Tile:    tensor_core_tile.cuh's: 64 (rows of C) x 64 (columns) x 16 (p), 128 threads = 4 warps
//          of 32 x 32; 34,816 bytes of shared memory in TF32, 26,624 in BF16.
// Pipeline: tensor_core_tile.cuh's two stages through registers, as the SGEMM; one __syncthreads
//          per step. No cp.async yet: the multi-stage asynchronous pipeline is the next step
//          (issue 33).
// Loads:   an operand is read along p (A untransposed, B transposed: 16 consecutive floats per
//          row; staged k-fast) or along its rows (A^T, B untransposed: 64 consecutive floats;
//          staged row-fast), consecutive threads on consecutive addresses either way. Edges (M, N,
//          K not multiples of the tile) read zeros; the epilogue goes through the shared C tile
//          (store_matrix_sync) and skips elements outside C, so no code depends on WMMA's opaque
//          fragment layout.
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
#include <climits>

#include "kernels/common/cuda_check.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/tensor_core_tile.cuh"
#include "kernels/matmul/matmul.h"

namespace engine::kernels {

namespace {

using namespace tensor_core_tile;

// Loads this thread's values of rows [row0, row0 + 64) x p [k0, k0 + 16) of an operand with
// `rows` rows and k p-values, stored p-contiguous (element (row, p) at src[row k + p]: staged
// k-fast) or row-contiguous (at src[p rows + row]: staged row-fast); outside the operand, zero.
__device__ __forceinline__ void load_tile(const float* __restrict__ src, bool p_contiguous,
                                          int rows, int k, int row0, int k0,
                                          float (&values)[kValues]) {
#pragma unroll
  for (int v = 0; v < kValues; ++v) {
    const int row = row0 + (p_contiguous ? k_fast_row(v) : row_fast_row());
    const int p = k0 + (p_contiguous ? k_fast_k() : row_fast_k(v));
    values[v] = row < rows && p < k ? src[p_contiguous ? row * k + p : p * rows + row] : 0.0f;
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
  // op(A) is p-contiguous when A is stored [m, k]; op(B) when B is stored transposed [n, k].
  const bool a_p_contiguous = !trans_a, b_p_contiguous = trans_b;
  auto load_step = [&](int step, float(&a_values)[kValues], float(&b_values)[kValues]) {
    const int k0 = step * kTileK;
    load_tile(a, a_p_contiguous, m, k, m0, k0, a_values);
    load_tile(b, b_p_contiguous, n, k, n0, k0, b_values);
  };
  Accumulator<Operands> acc[2][2];
  multiply_pipelined<Operands>(tiles, (k + kTileK - 1) / kTileK, a_p_contiguous, b_p_contiguous,
                               load_step, acc);

  // Epilogue through shared memory (row-major: C's rows are contiguous along its columns).
  accumulators_to_shared<Operands>(acc, /*column_major=*/false, tiles.c);
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
