// The bit pattern of an FP32 value and back, through memcpy (the defined way before C++20's
// std::bit_cast). One definition for the CPU's rounding (kernels/operand_round), the f16/bf16
// conversions (engine/io/half.h) and the tests that compare bits to tell -0 from 0 or NaNs apart.
#pragma once

#include <cstdint>
#include <cstring>

namespace engine::kernels {

inline uint32_t f32_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

inline float f32_from_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

}  // namespace engine::kernels
