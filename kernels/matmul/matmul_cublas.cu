// matmul through cuBLAS: the library alternative to our SGEMM (engine::GemmBackend::Cublas),
// used as the reference in tests and the peer in `dml bench`.
//
// Math:    C (+)= op(A) op(B) on row-major buffers (matmul.h).
// Layout:  cuBLAS is column-major, and a row-major [r, c] buffer is, read column-major, its
//          transpose [c, r]. So instead of C = op(A) op(B) we ask for C^T = op(B)^T op(A)^T,
//          which column-major cuBLAS writes straight into C's row-major buffer:
//            cublasSgemm(opB, opA, n, m, k, b, ldb, a, lda, c, ldc = n)
//          op(B)^T is the column-major view of B's buffer as stored when B is [k, n] (no
//          transpose: OP_N, ldb = n) and its transpose when B is stored [n, k] (OP_T, ldb = k);
//          likewise A: stored [m, k] -> OP_N, lda = k; stored [k, m] -> OP_T, lda = m.
// Numerics: the math mode of `precision` (kernels/common/library_math.h), set on every call:
//          fp32 pins CUBLAS_DEFAULT_MATH, strict FP32 FFMA (TF32 tensor cores are a separate,
//          labelled mode, never a silent substitute); tf32 CUBLAS_TF32_TENSOR_OP_MATH, which lets
//          cuBLAS round the operands to TF32 and use tensor cores (FP32 accumulation). bf16:
//          A and B are rounded to BF16 (round to nearest, ties to even: kernels/bf16_round, the
//          rounding of our BF16 GEMM) into a stream-ordered workspace of 2 (m k + k n) bytes,
//          then cublasGemmEx with CUDA_R_16BF A and B, CUDA_R_32F C and CUBLAS_COMPUTE_32F:
//          BF16 products, FP32 accumulation and output, what matmul_tensor_core_cuda computes
//          in BF16. Its time includes the two rounding passes (4 (m k + k n) bytes read, half
//          that written), which our kernel does on the way into shared memory.
// Handles: one cublasHandle_t per host thread (cuBLAS handles are not safe to share across
//          threads that run concurrently), created on first use; the stream is set to
//          current_stream() on every call. The handle lives until the thread ends; a thread that
//          never calls this creates none. Every call is checked with cuBLAS's status string.
// Cost:    2 m n k FLOPs; minimal bytes 4 (m k + k n + m n) (+ 4 m n read when accumulating).
#include <cublas_v2.h>

#include <climits>

#include "kernels/bf16_round/bf16_round.h"
#include "kernels/common/cuda_check.cuh"
#include "kernels/common/cuda_workspace.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/library_math.h"
#include "kernels/matmul/matmul.h"

// CUBLAS_CHECK(call, what...): a failed cuBLAS call becomes engine::Error naming the op.
#define CUBLAS_CHECK(call, ...)                                                                   \
  do {                                                                                            \
    cublasStatus_t status_ = (call);                                                              \
    if (status_ != CUBLAS_STATUS_SUCCESS) {                                                       \
      ::engine::fail("cuBLAS error in ", __VA_ARGS__, ": ", cublasGetStatusString(status_), " (", \
                     #call, ")");                                                                 \
    }                                                                                             \
  } while (0)

namespace engine::kernels {

static_assert(CUBLAS_DEFAULT_MATH == kCublasDefaultMath &&
              CUBLAS_TF32_TENSOR_OP_MATH == kCublasTf32TensorOpMath);

namespace {

// The calling thread's handle. Not destroyed at thread exit: cublasDestroy may run after the
// CUDA runtime has shut down during process exit, and the driver reclaims it anyway.
cublasHandle_t thread_handle() {
  thread_local cublasHandle_t handle = nullptr;
  if (handle == nullptr) {
    CUBLAS_CHECK(cublasCreate(&handle), "matmul_cublas: cublasCreate");
  }
  return handle;
}

// C^T = op(B)^T op(A)^T as in matmul_cublas_precision, on BF16 copies of A and B (the header's
// Numerics). The copies keep A's and B's layouts, so the operations and leading dimensions are
// those of the FP32 call.
void gemm_bf16(cublasHandle_t handle, int64_t m, int64_t n, int64_t k, const float* a,
               const float* b, cublasOperation_t op_a, cublasOperation_t op_b, int lda, int ldb,
               const float* alpha, const float* beta, float* c) {
  const size_t a_bytes = workspace_aligned(static_cast<size_t>(m * k) * sizeof(uint16_t));
  const size_t b_bytes = static_cast<size_t>(k * n) * sizeof(uint16_t);
  StreamWorkspace operands(a_bytes + b_bytes, current_stream(), "matmul_cublas bf16 operands m=", m,
                           " n=", n, " k=", k);
  auto* a16 = reinterpret_cast<uint16_t*>(operands.bytes());
  auto* b16 = reinterpret_cast<uint16_t*>(operands.bytes() + a_bytes);
  round_to_bf16_cuda(m * k, a, a16);
  round_to_bf16_cuda(k * n, b, b16);
  describe_next_launch(
      {"cublasGemmEx bf16", matmul_flops(m, n, k), matmul_bytes(m, n, k, *beta != 0.0f)});
  CUBLAS_CHECK(
      cublasGemmEx(handle, op_b, op_a, static_cast<int>(n), static_cast<int>(m),
                   static_cast<int>(k), alpha, b16, CUDA_R_16BF, ldb, a16, CUDA_R_16BF, lda, beta,
                   c, CUDA_R_32F, static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "matmul_cublas bf16 m=", m, " n=", n, " k=", k, " trans_a=", op_a == CUBLAS_OP_T,
      " trans_b=", op_b == CUBLAS_OP_T);
  count_library_call("cublasGemmEx");
  operands.release("matmul_cublas bf16 operands");
}

}  // namespace

void matmul_cublas(int64_t m, int64_t n, int64_t k, const float* a, const float* b, bool trans_a,
                   bool trans_b, float* c, bool accumulate) {
  matmul_cublas_precision(m, n, k, a, b, trans_a, trans_b, c, accumulate, Precision::Fp32);
}

void matmul_cublas_precision(int64_t m, int64_t n, int64_t k, const float* a, const float* b,
                             bool trans_a, bool trans_b, float* c, bool accumulate,
                             Precision precision) {
  const auto math = static_cast<cublasMath_t>(cublas_math_mode(precision));
  ENGINE_CHECK(m >= 0 && n >= 0 && k >= 0 && m <= INT_MAX && n <= INT_MAX && k <= INT_MAX,
               "matmul_cublas: m=", m, " n=", n, " k=", k,
               " must be non-negative and fit cuBLAS's 32-bit sizes");
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum; cuBLAS would also do this, but say it plainly
    if (!accumulate) cuda_memset_zero(c, static_cast<size_t>(m * n) * sizeof(float));
    return;
  }
  cublasHandle_t handle = thread_handle();
  CUBLAS_CHECK(cublasSetMathMode(handle, math), "matmul_cublas: cublasSetMathMode");
  CUBLAS_CHECK(cublasSetStream(handle, current_stream()), "matmul_cublas: cublasSetStream");
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ldb = static_cast<int>(trans_b ? k : n);
  const int lda = static_cast<int>(trans_a ? m : k);
  if (precision == Precision::Bf16) {
    gemm_bf16(handle, m, n, k, a, b, op_a, op_b, lda, ldb, &alpha, &beta, c);
    return;
  }
  describe_next_launch({"cublasSgemm", matmul_flops(m, n, k), matmul_bytes(m, n, k, accumulate)});
  CUBLAS_CHECK(
      cublasSgemm(handle, op_b, op_a, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
                  &alpha, b, ldb, a, lda, &beta, c, static_cast<int>(n)),
      "matmul_cublas m=", m, " n=", n, " k=", k, " trans_a=", trans_a, " trans_b=", trans_b);
  count_library_call("cublasSgemm");
}

}  // namespace engine::kernels
