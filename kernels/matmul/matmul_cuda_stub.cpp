// matmul_cublas.cu, matmul_cuda.cu, matmul_tensor_core_cuda.cu in a build without CUDA: every
// function throws (kernels/common/cuda_stub.h).
#include "kernels/common/cuda_stub.h"
#include "kernels/matmul/matmul.h"

namespace engine::kernels {

void matmul_cuda(int64_t, int64_t, int64_t, const float*, const float*, bool, bool, float*, bool) {
  no_cuda("matmul_cuda");
}

SplitK matmul_cuda_splits(int64_t, int64_t, int64_t) { no_cuda("matmul_cuda_splits"); }

void matmul_cublas(int64_t, int64_t, int64_t, const float*, const float*, bool, bool, float*,
                   bool) {
  no_cuda("matmul_cublas");
}

void matmul_cublas_precision(int64_t, int64_t, int64_t, const float*, const float*, bool, bool,
                             float*, bool, Precision) {
  no_cuda("matmul_cublas_precision");
}

void matmul_tensor_core_cuda(int64_t, int64_t, int64_t, const float*, const float*, bool, bool,
                             float*, bool, Precision) {
  no_cuda("matmul_tensor_core_cuda");
}

void add_row_bias_cuda(int64_t, int64_t, const float*, float*) { no_cuda("add_row_bias_cuda"); }

void column_sums_cuda(int64_t, int64_t, const float*, float*) { no_cuda("column_sums_cuda"); }

void matmul_bias_relu_cuda(int64_t, int64_t, int64_t, const float*, const float*, bool, bool,
                           const float*, bool, float*) {
  no_cuda("matmul_bias_relu_cuda");
}

}  // namespace engine::kernels
