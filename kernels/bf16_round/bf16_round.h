// Rounding device buffers between FP32 and BF16, for the reference libraries' BF16 paths
// (matmul_cublas.cu's cublasGemmEx, conv2d_cudnn.cu's BF16 convolutions): they take BF16
// operands in memory, where our tensor-core kernels round FP32 operands on the way into shared
// memory. Both round the same way, so a reference computes on the operands ours computes on.
//
//   round_to_bf16_cuda  y[i] = x[i] rounded to BF16: the upper 16 bits of the FP32 pattern after
//                       round to nearest, ties to even (__float2bfloat16, as our BF16 GEMM's
//                       Bf16Operands::convert); a carry out of the mantissa raises the exponent
//                       (up to infinity), +-Inf stay, NaN stays a NaN.
//   bf16_to_float_cuda  y[i] = x[i] widened to FP32: exact (the 16 bits become the upper half).
//
// BF16 values are passed as their bit patterns (uint16_t), so this header needs no CUDA header.
// Contiguous buffers of n elements on the current device, on the current stream; n = 0 launches
// nothing. Cost: memory bound, 6n bytes each.
#pragma once

#include <cstdint>

namespace engine::kernels {

void round_to_bf16_cuda(int64_t n, const float* x, uint16_t* y);
void bf16_to_float_cuda(int64_t n, const uint16_t* x, float* y);

}  // namespace engine::kernels
