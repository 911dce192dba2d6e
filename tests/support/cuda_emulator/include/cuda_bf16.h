// The CUDA emulator's stand-in for <cuda_bf16.h>: the bfloat16 storage type and its two
// conversions, as the WMMA fragments of <mma.h> (the emulator's) use them.
//
// bfloat16 is the upper half of an IEEE binary32: sign, 8 exponent bits, 7 mantissa bits.
// __float2bfloat16 rounds to nearest, ties to even (CUDA's documented mode for it); NaN stays a
// (quiet) NaN.
#pragma once

#include <cstdint>
#include <cstring>

struct __nv_bfloat16 {
  uint16_t bits;
};

inline __nv_bfloat16 __float2bfloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return __nv_bfloat16{uint16_t((bits >> 16) | 0x40u)};
  const uint32_t lowest_kept_bit = (bits >> 16) & 1u;
  bits += 0x7fffu + lowest_kept_bit;  // ties go to the even neighbour; carries reach the exponent
  return __nv_bfloat16{uint16_t(bits >> 16)};
}

inline float __bfloat162float(__nv_bfloat16 value) {
  const uint32_t bits = uint32_t(value.bits) << 16;
  float result;
  std::memcpy(&result, &bits, sizeof result);
  return result;
}
