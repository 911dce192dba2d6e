// matmul: C = op(A) op(B) (or C += op(A) op(B) when `accumulate`), the GEMM behind matmul and
// linear, plus the two small loops that linear needs around it (bias add, bias gradient).
//
// Math:    C[i, j] (+)= sum_p op(A)[i, p] op(B)[p, j],  i < m, j < n, p < k,
//          op(A) = A (stored [m, k]) or A^T (A stored [k, m]),
//          op(B) = B (stored [k, n]) or B^T (B stored [n, k]).
// Layout:  every matrix is a dense row-major buffer with no leading-dimension padding, so a
//          transposed operand is read in place instead of being materialized.
// Parallelization: plain loops for the reference. The fast version cuts C into fixed tiles of
//          at most 128 x 256 and runs one single-threaded Eigen GEMM per tile, the tiles spread
//          over OpenMP threads; the bits do not depend on the number of threads
//          (kernels/common/cpu_gemm.h).
// Work:    2 m n k FLOPs; reads (m k + k n) elements, writes (reads too when accumulating) m n.
//
// Two CPU versions with identical signatures:
//   matmul_cpu       the reference: the triple loop of the formula, the oracle in tests;
//   matmul_fast_cpu  Eigen's blocked GEMM on Eigen::Map views of the same buffers, tile by
//                    tile; the engine calls this one for CPU tensors.
// Two CUDA versions (f32), chosen at run time by engine::gemm_backend() (engine/backend.h):
//   matmul_cuda      our tiled SGEMM (tiles, loads and costs in matmul_cuda.cu);
//   matmul_cublas    cublasSgemm with the row-major <-> column-major swap (matmul_cublas.cu).
// and, under the precision policy (engine/precision.h) when it is not fp32:
//   matmul_tensor_core_cuda  our TF32 and BF16 tensor-core GEMM (matmul_tensor_core_cuda.cu);
//   matmul_mma_cuda          TF32 and BF16 on mma.sync with a cp.async pipeline (matmul_mma.h).
#pragma once

#include <cstdint>

#include "kernels/common/precision.h"
#include "kernels/common/split_k.h"

namespace engine::kernels {

// Work of C = A B by count (device_counters.h): 2 m n k FLOPs; A, B and C once each in f32, C
// read as well when accumulating.
inline double matmul_flops(int64_t m, int64_t n, int64_t k) {
  return 2.0 * double(m) * double(n) * double(k);
}
inline double matmul_bytes(int64_t m, int64_t n, int64_t k, bool accumulate) {
  return 4.0 * (double(m) * double(k) + double(k) * double(n) +
                (accumulate ? 2.0 : 1.0) * double(m) * double(n));
}

template <typename T>
void matmul_cpu(int64_t m, int64_t n, int64_t k, const T* a, const T* b, bool trans_a, bool trans_b,
                T* c, bool accumulate);

template <typename T>
void matmul_fast_cpu(int64_t m, int64_t n, int64_t k, const T* a, const T* b, bool trans_a,
                     bool trans_b, T* c, bool accumulate);

// linear's bias: c[i, j] += bias[j] for a row-major c [m, n]. m n FLOPs.
template <typename T>
void add_row_bias_cpu(int64_t m, int64_t n, const T* bias, T* c);

// linear's bias gradient: db[j] = sum_i dy[i, j] (column sums of a row-major dy [m, n]).
template <typename T>
void column_sums_cpu(int64_t m, int64_t n, const T* dy, T* db);

// ---- CUDA: f32, device pointers, current stream; same contracts as the CPU versions ----
// Our tiled SGEMM (matmul_cuda.cu).
void matmul_cuda(int64_t m, int64_t n, int64_t k, const float* a, const float* b, bool trans_a,
                 bool trans_b, float* c, bool accumulate);
// How matmul_cuda cuts p on the current device (kernels/common/split_k.h): one chunk of k when C
// has tiles enough for the GPU or k is short. Exposed so tests can pick shapes that take the
// split path.
SplitK matmul_cuda_splits(int64_t m, int64_t n, int64_t k);
// cublasSgemm on the same row-major buffers (matmul_cublas.cu), strict FP32.
void matmul_cublas(int64_t m, int64_t n, int64_t k, const float* a, const float* b, bool trans_a,
                   bool trans_b, float* c, bool accumulate);
// The same in the cuBLAS math mode of `precision` (kernels/common/library_math.h): fp32 strict
// (matmul_cublas), tf32 TF32 tensor cores allowed, bf16 cublasGemmEx on A and B rounded to BF16
// with FP32 accumulation and output (what matmul_tensor_core_cuda computes in BF16).
void matmul_cublas_precision(int64_t m, int64_t n, int64_t k, const float* a, const float* b,
                             bool trans_a, bool trans_b, float* c, bool accumulate,
                             Precision precision);
// matmul_cuda's contract in the given precision: Fp32 is matmul_cuda itself; Tf32 rounds every
// operand to TF32 (cvt.rna) and multiplies on tensor cores with FP32 accumulation; Bf16 rounds
// every operand to BF16 (__float2bfloat16, ties to even), the same with FP32 accumulation.
void matmul_tensor_core_cuda(int64_t m, int64_t n, int64_t k, const float* a, const float* b,
                             bool trans_a, bool trans_b, float* c, bool accumulate,
                             Precision precision);
void add_row_bias_cuda(int64_t m, int64_t n, const float* bias, float* c);
// matmul_cuda (never accumulating) with linear's epilogue in the tile's store:
// c = relu(op(A) op(B) + bias[j]), the add skipped when bias is nullptr, the relu when !relu.
// Bit for bit matmul_cuda, add_row_bias_cuda and relu in turn, without their passes over c.
void matmul_bias_relu_cuda(int64_t m, int64_t n, int64_t k, const float* a, const float* b,
                           bool trans_a, bool trans_b, const float* bias, bool relu, float* c);
void column_sums_cuda(int64_t m, int64_t n, const float* dy, float* db);

}  // namespace engine::kernels
