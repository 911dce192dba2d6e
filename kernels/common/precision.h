// The arithmetic a CUDA GEMM or convolution may use: the precision policy's kernel-side
// half. The engine holds the run's setting and parses its spelling (engine/precision.h).
//
//   Fp32  strict IEEE single precision: FFMA, every operand bit used.
//   Tf32  operands rounded to TF32 (10 mantissa bits, round to nearest, ties away from zero, as
//         cvt.rna.tf32.f32) and multiplied on tensor cores; products and sums in FP32.
//   Bf16  operands rounded to BF16 (7 mantissa bits, ties to even), FP32 accumulation.
#pragma once

namespace engine::kernels {

enum class Precision { Fp32, Tf32, Bf16 };

}  // namespace engine::kernels
