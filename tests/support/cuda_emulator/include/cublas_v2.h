// The CUDA emulator's stand-in for <cublas_v2.h>: cublasSgemm written from its definition
// (column-major, C = alpha op(A) op(B) + beta C), with cuBLAS's argument checks. It exists so the
// emulated build can run matmul_cublas and check the transposes and leading dimensions it passes;
// it says nothing about cuBLAS's speed. (Contract of the emulator: cuda_runtime.h.)
// Math modes: CUBLAS_DEFAULT_MATH is strict FP32; under CUBLAS_TF32_TENSOR_OP_MATH every operand
// is rounded to TF32 first (cvt.rna, as the tensor cores cuBLAS then may use take them), so a
// caller that asks for TF32 gets TF32 products here. A GPU's cuBLAS may still pick an FFMA kernel
// for a shape in that mode (it is allowed, not forced), so only the emulator promises the rounding.
// cublasGemmEx: the one configuration matmul_cublas uses, BF16 A and B (CUDA_R_16BF), FP32 C,
// CUBLAS_COMPUTE_32F: the BF16 values widened exactly and summed like cublasSgemm; any other
// combination is CUBLAS_STATUS_NOT_SUPPORTED here.
#pragma once

#include <cmath>

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
// library_types.h's and cublas_api.h's numbers.
enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16BF = 14 };
using cudaDataType = cudaDataType_t;
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasMath_t { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TF32_TENSOR_OP_MATH = 3 };
struct cublasContext {
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
};
using cublasHandle_t = cublasContext*;

inline const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "unknown cuBLAS status";
}
inline cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  *handle = new cublasContext();
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t) {
  return handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}
inline cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t math) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (math != CUBLAS_DEFAULT_MATH && math != CUBLAS_TF32_TENSOR_OP_MATH) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  handle->math = math;
  return CUBLAS_STATUS_SUCCESS;
}

// Column-major: element (i, j) of a matrix with leading dimension ld is at [i + j * ld].
// op(A) is m x k, op(B) is k x n, C is m x n. `a_at(index)` and `b_at(index)` read an element
// of A's and B's buffers as the float the product takes.
template <typename ReadA, typename ReadB>
cublasStatus_t emulated_gemm(cublasHandle_t handle, cublasOperation_t trans_a,
                             cublasOperation_t trans_b, int m, int n, int k, const float* alpha,
                             const void* a, ReadA a_at, int lda, const void* b, ReadB b_at, int ldb,
                             const float* beta, float* c, int ldc) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  const int a_rows = trans_a == CUBLAS_OP_N ? m : k;
  const int b_rows = trans_b == CUBLAS_OP_N ? k : n;
  if (m < 0 || n < 0 || k < 0 || lda < (a_rows > 1 ? a_rows : 1) ||
      ldb < (b_rows > 1 ? b_rows : 1) || ldc < (m > 1 ? m : 1)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (!emu::is_device_pointer_or_null(a) || !emu::is_device_pointer_or_null(b) ||
      !emu::is_device_pointer_or_null(c)) {
    return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  // An f32 accumulator with one fused multiply-add per term, in ascending p: FP32 rounding as
  // cuBLAS's SGEMM has (its blocked order differs, and sums k terms with less error than this
  // sequential one), so tests comparing cuBLAS with the CPU meet f32 rounding here too rather
  // than a double sum rounded once.
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      float sum = 0.0f;
      for (int p = 0; p < k; ++p) {
        const float a_ip = trans_a == CUBLAS_OP_N ? a_at(i + static_cast<long>(p) * lda)
                                                  : a_at(p + static_cast<long>(i) * lda);
        const float b_pj = trans_b == CUBLAS_OP_N ? b_at(p + static_cast<long>(j) * ldb)
                                                  : b_at(j + static_cast<long>(p) * ldb);
        sum = std::fma(a_ip, b_pj, sum);
      }
      float& out = c[i + static_cast<long>(j) * ldc];
      // beta = 0 ignores C (which may hold NaN), as cuBLAS does.
      out = *alpha * sum + (*beta == 0.0f ? 0.0f : *beta * out);
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t trans_a,
                                  cublasOperation_t trans_b, int m, int n, int k,
                                  const float* alpha, const float* a, int lda, const float* b,
                                  int ldb, const float* beta, float* c, int ldc) {
  const bool tf32 = handle != nullptr && handle->math == CUBLAS_TF32_TENSOR_OP_MATH;
  auto read = [tf32](const float* buffer) {
    return [tf32, buffer](long index) {
      return tf32 ? nvcuda::wmma::__float_to_tf32(buffer[index]) : buffer[index];
    };
  };
  return emulated_gemm(handle, trans_a, trans_b, m, n, k, alpha, a, read(a), lda, b, read(b), ldb,
                       beta, c, ldc);
}

inline cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t trans_a,
                                   cublasOperation_t trans_b, int m, int n, int k,
                                   const void* alpha, const void* a, cudaDataType a_type, int lda,
                                   const void* b, cudaDataType b_type, int ldb, const void* beta,
                                   void* c, cudaDataType c_type, int ldc,
                                   cublasComputeType_t compute_type, cublasGemmAlgo_t algo) {
  if (a_type != CUDA_R_16BF || b_type != CUDA_R_16BF || c_type != CUDA_R_32F ||
      compute_type != CUBLAS_COMPUTE_32F || algo != CUBLAS_GEMM_DEFAULT) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  auto read = [](const void* buffer) {
    return [buffer](long index) {
      return __bfloat162float(static_cast<const __nv_bfloat16*>(buffer)[index]);
    };
  };
  return emulated_gemm(handle, trans_a, trans_b, m, n, k, static_cast<const float*>(alpha), a,
                       read(a), lda, b, read(b), ldb, static_cast<const float*>(beta),
                       static_cast<float*>(c), ldc);
}
