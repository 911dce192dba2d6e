// f16 / bf16 <-> f32 conversions on known bit patterns, rounding ties, and exhaustive round trips.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>

#include "engine/io/half.h"

using engine::bf16_to_f32;
using engine::f16_to_f32;
using engine::f32_to_bf16;
using engine::f32_to_f16;

TEST_CASE("half f16 -> f32: known values, subnormals, inf, nan", "[io]") {
  CHECK(f16_to_f32(0x3C00) == 1.0f);                      // 0 01111 0000000000
  CHECK(f16_to_f32(0xC000) == -2.0f);                     // 1 10000 0000000000
  CHECK(f16_to_f32(0x3555) == 0x1.554p-2f);               // 0.333251953125
  CHECK(f16_to_f32(0x7BFF) == 65504.0f);                  // largest finite: (2 - 2^-10) * 2^15
  CHECK(f16_to_f32(0x0400) == std::ldexp(1.0f, -14));     // smallest normal
  CHECK(f16_to_f32(0x0001) == std::ldexp(1.0f, -24));     // smallest subnormal
  CHECK(f16_to_f32(0x03FF) == std::ldexp(1023.0f, -24));  // largest subnormal
  CHECK(f16_to_f32(0x8001) == -std::ldexp(1.0f, -24));
  CHECK(f16_to_f32(0x0000) == 0.0f);
  CHECK(std::signbit(f16_to_f32(0x8000)));
  CHECK(f16_to_f32(0x7C00) == INFINITY);
  CHECK(f16_to_f32(0xFC00) == -INFINITY);
  CHECK(std::isnan(f16_to_f32(0x7E00)));
  CHECK(engine::f32_bits(f16_to_f32(0x7D01)) == 0x7FA02000u);  // payload 0x101 << 13 kept
}

TEST_CASE("half f32 -> f16: round to nearest even, overflow, underflow", "[io]") {
  CHECK(f32_to_f16(1.0f) == 0x3C00);
  CHECK(f32_to_f16(-2.0f) == 0xC000);
  CHECK(f32_to_f16(65504.0f) == 0x7BFF);
  CHECK(f32_to_f16(65519.0f) == 0x7BFF);  // below the midpoint 65520 to the next step 65536
  CHECK(f32_to_f16(65520.0f) == 0x7C00);  // the midpoint ties to even: inf
  CHECK(f32_to_f16(1e9f) == 0x7C00);
  CHECK(f32_to_f16(-INFINITY) == 0xFC00);
  // 1 + 2^-11 lies halfway between 1 (even mantissa) and 1 + 2^-10: ties to 1.
  CHECK(f32_to_f16(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);
  // 1 + 3 * 2^-11 lies halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even): ties up.
  CHECK(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3C02);
  CHECK(f32_to_f16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)) == 0x3C01);
  // Subnormals: 2^-24 is code 1; 2^-25 is halfway between 0 and it (ties to 0); 3 * 2^-25 is
  // halfway between codes 1 and 2 (ties to 2); just above 2^-25 rounds up to code 1.
  CHECK(f32_to_f16(std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(f32_to_f16(std::ldexp(1.0f, -25)) == 0x0000);
  CHECK(f32_to_f16(-std::ldexp(1.0f, -25)) == 0x8000);
  CHECK(f32_to_f16(3 * std::ldexp(1.0f, -25)) == 0x0002);
  CHECK(f32_to_f16(std::ldexp(1.0f, -25) * 1.0001f) == 0x0001);
  CHECK(f32_to_f16(1e-10f) == 0x0000);
  CHECK(f32_to_f16(std::ldexp(1023.5f, -24)) == 0x0400);  // rounds up into the smallest normal
  CHECK(f32_to_f16(std::ldexp(1.0f, -130)) == 0x0000);    // an f32 subnormal
  CHECK(f32_to_f16(-0.0f) == 0x8000);
  const uint16_t nan = f32_to_f16(NAN);
  CHECK((nan & 0x7C00) == 0x7C00);
  CHECK((nan & 0x03FF) != 0);
  CHECK(f32_to_f16(engine::f32_from_bits(0x7F802000u)) == 0x7E01);  // signalling -> quiet
}

TEST_CASE("half f16: every bit pattern survives f16 -> f32 -> f16", "[io]") {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const float value = f16_to_f32(bits);
    const bool is_nan = (bits & 0x7C00) == 0x7C00 && (bits & 0x03FF) != 0;
    if (is_nan) {
      REQUIRE(std::isnan(value));
      REQUIRE(f32_to_f16(value) == (bits | 0x0200));  // payload kept, quiet bit set
    } else {
      REQUIRE(f32_to_f16(value) == bits);
    }
  }
}

TEST_CASE("half bf16: known values, rounding, every bit pattern round trips", "[io]") {
  CHECK(bf16_to_f32(0x3F80) == 1.0f);
  CHECK(bf16_to_f32(0xC040) == -3.0f);
  CHECK(bf16_to_f32(0x7F80) == INFINITY);
  CHECK(bf16_to_f32(0x0001) == std::ldexp(1.0f, -133));  // smallest bf16 subnormal
  CHECK(std::isnan(bf16_to_f32(0x7FC0)));
  CHECK(f32_to_bf16(1.0f) == 0x3F80);
  CHECK(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3F80);      // tie to even (down)
  CHECK(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3F82);  // tie to even (up)
  CHECK(f32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)) == 0x3F81);
  CHECK(f32_to_bf16(engine::f32_from_bits(0x7F7FFFFFu)) == 0x7F80);  // FLT_MAX rounds to inf
  CHECK(f32_to_bf16(-0.0f) == 0x8000);
  CHECK(f32_to_bf16(engine::f32_from_bits(0x7F800001u)) == 0x7FC0);  // NaN stays NaN

  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const bool is_nan = (bits & 0x7F80) == 0x7F80 && (bits & 0x007F) != 0;
    REQUIRE(f32_to_bf16(bf16_to_f32(bits)) == (is_nan ? (bits | 0x0040) : bits));
  }
}
