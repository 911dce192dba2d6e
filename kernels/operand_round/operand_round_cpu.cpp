// Operand rounding for the precision policy, CPU reference (contract in operand_round.h).
#include "kernels/operand_round/operand_round.h"

#include "kernels/common/float_bits.h"

namespace engine::kernels {

namespace {

constexpr uint32_t kMagnitude = 0x7fffffffu;
constexpr uint32_t kExponent = 0x7f800000u;

bool is_nan(uint32_t bits) { return (bits & kMagnitude) > kExponent; }

}  // namespace

// TF32 keeps the upper 19 bits (sign, exponent, 10 mantissa bits) of 32. Adding half of the kept
// ulp (bit 12) to the pattern and cutting the low 13 bits rounds the magnitude to nearest with
// ties away from zero, for either sign (the sign bit is not touched by the carry, which stops at
// the exponent field or makes it all ones: infinity).
float round_to_tf32_cpu(float x) {
  const uint32_t bits = f32_bits(x);
  if (is_nan(bits)) return f32_from_bits(kMagnitude);
  if ((bits & kExponent) == kExponent) return x;  // +-Inf
  return f32_from_bits((bits + 0x1000u) & ~0x1fffu);
}

// BF16 keeps the upper 16 bits. Adding 0x7fff plus the lowest kept bit rounds to nearest with
// ties to the even neighbour: below half nothing carries, above half it always does, and at an
// exact half (low bits 0x8000) only when the kept part is odd.
float round_to_bf16_cpu(float x) {
  const uint32_t bits = f32_bits(x);
  if (is_nan(bits)) return f32_from_bits((bits | 0x400000u) & 0xffff0000u);
  const uint32_t lowest_kept_bit = (bits >> 16) & 1u;
  return f32_from_bits((bits + 0x7fffu + lowest_kept_bit) & 0xffff0000u);
}

void round_operands_cpu(Precision precision, int64_t n, const float* x, float* y) {
  switch (precision) {
    case Precision::Fp32:
      if (n > 0 && x != y) std::memmove(y, x, sizeof(float) * size_t(n));
      return;
    case Precision::Tf32:
      for (int64_t i = 0; i < n; ++i) y[i] = round_to_tf32_cpu(x[i]);
      return;
    case Precision::Bf16:
      for (int64_t i = 0; i < n; ++i) y[i] = round_to_bf16_cpu(x[i]);
      return;
  }
}

}  // namespace engine::kernels
