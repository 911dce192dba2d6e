// The math mode the reference libraries (cuBLAS, cuDNN) are asked for under each precision, so a
// reference runs in the same arithmetic as our kernels in that precision (issue 33):
//
//   precision  cuBLAS (cublasSetMathMode)       cuDNN (cudnnSetConvolutionMathType)
//   fp32       CUBLAS_DEFAULT_MATH: strict FP32  CUDNN_FMA_MATH: strict FP32, no tensor cores
//   tf32       CUBLAS_TF32_TENSOR_OP_MATH        CUDNN_DEFAULT_MATH: TF32 tensor cores allowed
//                                                (what PyTorch sets with cudnn.allow_tf32)
//   bf16       CUBLAS_DEFAULT_MATH with       CUDNN_TENSOR_OP_MATH with BF16 x, w, y and
//              cublasGemmEx: BF16 A, B, FP32   FP32 compute (PSEUDO_BFLOAT16_CONFIG), as PyTorch
//              C, CUBLAS_COMPUTE_32F           sets it for BF16 data
//
// Under bf16 the libraries are handed operands already rounded to BF16 (round to nearest, ties to
// even: kernels/bf16_round), the rounding our BF16 tensor-core kernels apply, so both sides
// multiply the same values and accumulate in FP32 (matmul_cublas.cu, conv2d_cudnn.cu).
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
constexpr int kCudnnTensorOpMath = 1;       // CUDNN_TENSOR_OP_MATH
constexpr int kCudnnFmaMath = 3;            // CUDNN_FMA_MATH

// The cublasMath_t value for `precision` (under bf16 the BF16 operand types, not the math mode,
// select the tensor cores).
inline int cublas_math_mode(Precision precision) {
  return precision == Precision::Tf32 ? kCublasTf32TensorOpMath : kCublasDefaultMath;
}

// The cudnnMathType_t value for `precision`.
inline int cudnn_math_type(Precision precision) {
  switch (precision) {
    case Precision::Fp32:
      return kCudnnFmaMath;
    case Precision::Tf32:
      return kCudnnDefaultMath;
    case Precision::Bf16:
      return kCudnnTensorOpMath;
  }
  fail("cuDNN reference: unknown precision ", static_cast<int>(precision));
}

}  // namespace engine::kernels
