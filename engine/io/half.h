// IEEE-754 binary16 ("f16", "half") and bfloat16 ("bf16") <-> f32 conversions on bit patterns.
//
// Layouts (sign | exponent | mantissa):
//   f32  1 | 8 (bias 127) | 23
//   f16  1 | 5 (bias  15) | 10    largest finite 65504 (0x7BFF), smallest subnormal 2^-24 (0x0001)
//   bf16 1 | 8 (bias 127) |  7    the top half of an f32
//
// Widening (f16 -> f32, bf16 -> f32) is exact for every input: subnormals become normal f32
// numbers, inf stays inf, NaN payloads keep their bits (shifted into the top of the f32 mantissa).
// Narrowing (f32 -> f16, f32 -> bf16) rounds to nearest, ties to even; values beyond the largest
// finite number round to inf exactly as the IEEE rule says (f16: |x| >= 65520 -> inf); results
// below the smallest subnormal round to +-0; NaN stays NaN (quiet bit set, top payload bits kept).
// These are the conversions PyTorch's `.half()` / `.bfloat16()` perform on the CPU.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/float_bits.h"
#include "kernels/operand_round/operand_round.h"

namespace engine {

using kernels::f32_bits;  // kernels/common/float_bits.h
using kernels::f32_from_bits;

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in f32 (mantissa < 2^10).
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1F) {  // inf (mantissa 0) or NaN (payload kept)
    return f32_from_bits(sign | 0x7F800000u | (mantissa << 13));
  }
  return f32_from_bits(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

inline uint16_t f32_to_f16(float value) {
  const uint32_t bits = f32_bits(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) {  // NaN: quiet, keep the top 9 payload bits
    return static_cast<uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu));
  }
  if (magnitude == 0x7F800000u) return static_cast<uint16_t>(sign | 0x7C00u);  // inf

  const int exponent = static_cast<int>(magnitude >> 23) - 127 + 15;  // f16 biased exponent
  const uint32_t mantissa = magnitude & 0x7FFFFFu;
  if (exponent >= 31) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 2^16: inf
  if (exponent >= 1) {
    // Normal: keep the top 10 mantissa bits, round on the 13 dropped ones. A carry out of the
    // mantissa correctly bumps the exponent, and out of exponent 30 gives 0x7C00 = inf.
    uint32_t h = (static_cast<uint32_t>(exponent) << 10) | (mantissa >> 13);
    const uint32_t dropped = mantissa & 0x1FFFu;
    if (dropped > 0x1000u || (dropped == 0x1000u && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  // Subnormal result: value = m * 2^(E-23) with m the 24-bit significand and E = exponent - 15,
  // and the f16 subnormal code is k = value / 2^-24 = m >> (14 - exponent).
  if (exponent < -10) return sign;  // below half the smallest subnormal (2^-25): rounds to 0
  const uint32_t m = mantissa | 0x800000u;
  const int shift = 14 - exponent;  // 14..24
  uint32_t k = m >> shift;
  const uint32_t dropped = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (dropped > half || (dropped == half && (k & 1u))) ++k;  // k may reach 0x400: smallest normal
  return static_cast<uint16_t>(sign | k);
}

inline float bf16_to_f32(uint16_t b) { return f32_from_bits(static_cast<uint32_t>(b) << 16); }

// The BF16 rounding of the precision policy's CPU products (kernels/operand_round), whose upper
// half is the bf16 pattern: round to nearest even on the 16 dropped bits, overflow carrying into
// inf (0x7F80), NaN quiet with its top payload bits kept.
inline uint16_t f32_to_bf16(float value) {
  return static_cast<uint16_t>(f32_bits(kernels::round_to_bf16_cpu(value)) >> 16);
}

}  // namespace engine
