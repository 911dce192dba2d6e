// The math mode the reference libraries (cuBLAS, cuDNN) are asked for under each precision, so a
// reference runs in the same arithmetic as our kernels in that precision (issue 33):
//
//   precision  cuBLAS (cublasSetMathMode)       cuDNN (cudnnSetConvolutionMathType)
//   fp32       CUBLAS_DEFAULT_MATH: strict FP32  CUDNN_FMA_MATH: strict FP32, no tensor cores
//   tf32       CUBLAS_TF32_TENSOR_OP_MATH        CUDNN_DEFAULT_MATH: TF32 tensor cores allowed
//                                                (what PyTorch sets with cudnn.allow_tf32)
//   bf16       refused: the BF16 references are not wired ("not implemented yet")
//
// The values are those of cuBLAS's cublasMath_t and cuDNN's cudnnMathType_t, written here as
// numbers so that this header needs neither library and the choice can be tested anywhere;
// matmul_cublas.cu and conv2d_cudnn.cu static_assert them against the libraries' headers.
// CUBLAS_DEFAULT_MATH is today's strict-FP32 setting (since CUDA 11 it never uses TF32 unless the
// environment sets NVIDIA_TF32_OVERRIDE=1); PyTorch's strict mode (allow_tf32 = False) uses it too.
#pragma once

#include "kernels/common/check.h"
#include "kernels/common/precision.h"

namespace engine::kernels {

constexpr int kCublasDefaultMath = 0;       // CUBLAS_DEFAULT_MATH
constexpr int kCublasTf32TensorOpMath = 3;  // CUBLAS_TF32_TENSOR_OP_MATH
constexpr int kCudnnDefaultMath = 0;        // CUDNN_DEFAULT_MATH
constexpr int kCudnnFmaMath = 3;            // CUDNN_FMA_MATH

// The cublasMath_t value for `precision`; throws for bf16 ("not implemented yet").
inline int cublas_math_mode(Precision precision) {
  ENGINE_CHECK(precision != Precision::Bf16,
               "cuBLAS reference: precision bf16 is not implemented yet (no BF16 cuBLAS GEMM is "
               "wired); use fp32 or tf32");
  return precision == Precision::Tf32 ? kCublasTf32TensorOpMath : kCublasDefaultMath;
}

// The cudnnMathType_t value for `precision`; throws for bf16 ("not implemented yet").
inline int cudnn_math_type(Precision precision) {
  ENGINE_CHECK(precision != Precision::Bf16,
               "cuDNN reference: precision bf16 is not implemented yet (no BF16 cuDNN convolution "
               "is wired); use fp32 or tf32");
  return precision == Precision::Tf32 ? kCudnnDefaultMath : kCudnnFmaMath;
}

}  // namespace engine::kernels
