// Rounding a GEMM or convolution operand as the tensor cores take it, on the CPU: what the
// precision policy (kernels/common/precision.h, engine/precision.h) does to the operands of a
// product, so that CPU tensors multiply the numbers CUDA's tensor-core kernels multiply.
//
//   round_to_tf32_cpu  x rounded to TF32 (10 mantissa bits) as cvt.rna.tf32.f32 (round to
//                      nearest, ties away from zero; the emulator's wmma::__float_to_tf32),
//                      returned as the float whose low 13 bits are zero. A carry out of the
//                      mantissa raises the exponent (FLT_MAX becomes +Inf); subnormals round in
//                      the same bits (no flush to zero); +-Inf stay; a NaN becomes the
//                      canonical NaN 0x7fffffff (PTX's for cvt.rna.tf32.f32; the emulator's).
//   round_to_bf16_cpu  x rounded to BF16 (7 mantissa bits) as __float2bfloat16 (round to nearest,
//                      ties to even; kernels/bf16_round's round_to_bf16_cuda), widened back to
//                      the float whose low 16 bits are zero. Carries, subnormals and +-Inf as
//                      above; a NaN stays a NaN, made quiet, its upper bits kept (bits | 0x400000,
//                      the low half cut), as the emulator's __float2bfloat16 and PyTorch's CPU
//                      .bfloat16() (engine/io/half.h's f32_to_bf16 is this function); a GPU
//                      returns the canonical 0x7fff: NaN either way.
//   round_operands_cpu y[i] = x[i] rounded for `precision` (Fp32: copied unchanged), for i < n;
//                      x and y may be the same buffer.
//
// Cost: one pass, 8n bytes; integer operations on the bit pattern, no floating-point arithmetic,
// so the result does not depend on the CPU's rounding mode or flush-to-zero flags.
#pragma once

#include <cstdint>

#include "kernels/common/precision.h"

namespace engine::kernels {

float round_to_tf32_cpu(float x);
float round_to_bf16_cpu(float x);
void round_operands_cpu(Precision precision, int64_t n, const float* x, float* y);

}  // namespace engine::kernels
