// kernels/operand_round: the CPU's TF32 rounding (cvt.rna: round to nearest, ties away from zero)
// and BF16 rounding (__float2bfloat16: ties to even) of a product's operands, on hand-worked bit
// patterns: ties both ways and for both signs, just above and below a tie, carries into the
// exponent and up to infinity, infinities, NaN, zeros, subnormals; then bit for bit against the
// CUDA code that rounds the same operands (run on the emulator or a GPU): round_to_bf16_cuda for
// BF16, and for TF32 the tensor-core GEMMs themselves (an m x 1 x 1 product with B = 1 returns
// each rounded A exactly: the product and the one addition onto zero are exact).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/io/half.h"
#include "engine/tensor.h"
#include "kernels/bf16_round/bf16_round.h"
#include "kernels/common/cuda_runtime.h"
#include "kernels/common/precision.h"
#include "kernels/matmul/matmul.h"
#include "kernels/matmul/matmul_mma.h"
#include "kernels/operand_round/operand_round.h"
#include "tests/support/cuda_guard.h"
#include "tests/support/tensors.h"

namespace k = engine::kernels;
using engine::Device;
using engine::DType;
using engine::Tensor;

namespace {

// The bit patterns of FP32 values, and back (engine/io/half.h's).
float from_bits(uint32_t bits) { return engine::f32_from_bits(bits); }
uint32_t bits_of(float value) { return engine::f32_bits(value); }

struct Case {
  uint32_t input, expected;
  const char* what;
};

// TF32 keeps sign, exponent and the upper 10 mantissa bits: the low 13 bits (0x1FFF) decide,
// 0x1000 being the tie, which goes away from zero whatever the kept bits.
const std::vector<Case> kTf32Cases = {
    {0x3F800000u, 0x3F800000u, "1: exact"},
    {0x3F801000u, 0x3F802000u, "1 + 2^-11: tie on even kept bits: away, to 1 + 2^-10"},
    {0x3F803000u, 0x3F804000u, "1 + 3 2^-11: tie on odd kept bits: away, to 1 + 2^-9"},
    {0x3F800FFFu, 0x3F800000u, "just below the tie: down to 1"},
    {0x3F800800u, 0x3F800000u, "1 + 2^-12: below half: down to 1"},
    {0x3F801001u, 0x3F802000u, "just above the tie: up"},
    {0xBF801000u, 0xBF802000u, "-(1 + 2^-11): tie, away from zero: -(1 + 2^-10)"},
    {0x3FFFF000u, 0x40000000u, "2 - 2^-11: tie, the carry raises the exponent: 2"},
    {0x7F7FFFFFu, 0x7F800000u, "FLT_MAX: rounds up to +Inf"},
    {0x7F800000u, 0x7F800000u, "+Inf stays"},
    {0xFF800000u, 0xFF800000u, "-Inf stays"},
    {0x00000000u, 0x00000000u, "+0"},
    {0x80000000u, 0x80000000u, "-0 keeps its sign"},
    {0x00001000u, 0x00002000u, "subnormal tie: away from zero"},
    {0x00000FFFu, 0x00000000u, "subnormal below the tie: +0"},
    {0x007FF000u, 0x00800000u, "largest subnormals' tie: carries to the smallest normal"},
    {0x80001000u, 0x80002000u, "negative subnormal tie: away from zero"},
};

// BF16 keeps the upper 16 bits: the low 16 decide, 0x8000 being the tie, which goes to the kept
// pattern whose lowest bit is 0.
const std::vector<Case> kBf16Cases = {
    {0x3F800000u, 0x3F800000u, "1: exact"},
    {0x3F808000u, 0x3F800000u, "1 + 2^-8: tie, 0x3F80 is even: down to 1"},
    {0x3F818000u, 0x3F820000u, "1 + 3 2^-8: tie, 0x3F81 is odd: up to 1 + 2^-6"},
    {0x3F808001u, 0x3F810000u, "just above the tie: up to 1 + 2^-7"},
    {0x3F807FFFu, 0x3F800000u, "just below the tie: down to 1"},
    {0xBF808000u, 0xBF800000u, "-(1 + 2^-8): tie to even: -1 (TF32's rule would give -(1+2^-7))"},
    {0xBF818000u, 0xBF820000u, "-(1 + 3 2^-8): tie to even by magnitude: -(1 + 2^-6)"},
    {0x3FFF8000u, 0x40000000u, "2 - 2^-8: tie on odd 0x3FFF: the carry raises the exponent: 2"},
    {0x7F7FFFFFu, 0x7F800000u, "FLT_MAX: +Inf"},
    {0x7F800000u, 0x7F800000u, "+Inf stays"},
    {0xFF800000u, 0xFF800000u, "-Inf stays"},
    {0x00000000u, 0x00000000u, "+0"},
    {0x80000000u, 0x80000000u, "-0 keeps its sign"},
    {0x00008000u, 0x00000000u, "subnormal tie on even 0x0000: +0"},
    {0x00018000u, 0x00020000u, "subnormal tie on odd 0x0001: up to 0x0002"},
    {0x807F8000u, 0x80800000u, "negative subnormal tie on odd: carries to -FLT_MIN"},
};

const std::vector<uint32_t> kNaNs = {0x7FC00000u, 0x7F800001u, 0xFFC00001u, 0x7F801000u};

// Finite normal FP32 values with random mantissas over a range of exponents (both signs).
std::vector<float> random_normals(uint64_t seed) {
  const std::vector<double> unit = test::random_f32({2000}, seed).to_vector();
  std::vector<float> values;
  for (size_t i = 0; i < unit.size(); ++i) {
    const float value = float(std::ldexp(unit[i], int(i % 41) - 20));
    if (std::isnormal(value)) values.push_back(value);
  }
  return values;
}

// Every value of `inputs` through the tensor-core GEMM in TF32 as an m x 1 x 1 product with
// B = 1: the rounded values (by matmul_tensor_core_cuda, or matmul_mma_cuda when `mma`).
std::vector<float> tf32_on_device(const std::vector<float>& inputs, bool mma) {
  const int64_t m = int64_t(inputs.size());
  std::vector<double> as_double(inputs.begin(), inputs.end());
  const Tensor a = test::f64(as_double, {m, 1}).to(DType::F32).to(Device::cuda());
  const Tensor b = Tensor::full({1, 1}, 1.0, DType::F32, Device::cuda());
  Tensor c = Tensor::zeros({m, 1}, DType::F32, Device::cuda());
  if (mma) {
    k::matmul_mma_cuda(m, 1, 1, a.data<float>(), b.data<float>(), false, false, c.data<float>(),
                       false, k::Precision::Tf32);
  } else {
    k::matmul_tensor_core_cuda(m, 1, 1, a.data<float>(), b.data<float>(), false, false,
                               c.data<float>(), false, k::Precision::Tf32);
  }
  std::vector<float> rounded;
  for (double value : c.to_vector()) rounded.push_back(float(value));
  return rounded;
}

}  // namespace

TEST_CASE("operand_round cpu: tf32 rounds to nearest, ties away from zero, by hand",
          "[operand_round]") {
  for (const Case& c : kTf32Cases) {
    INFO(c.what);
    CHECK(bits_of(k::round_to_tf32_cpu(from_bits(c.input))) == c.expected);
  }
  for (uint32_t nan : kNaNs) CHECK(bits_of(k::round_to_tf32_cpu(from_bits(nan))) == 0x7FFFFFFFu);
}

TEST_CASE("operand_round cpu: bf16 rounds to nearest, ties to even, by hand", "[operand_round]") {
  for (const Case& c : kBf16Cases) {
    INFO(c.what);
    CHECK(bits_of(k::round_to_bf16_cpu(from_bits(c.input))) == c.expected);
  }
  // A NaN stays a NaN, quiet (bit 22), its upper bits kept: 0x7F801000 would have become +Inf if
  // rounded as a number.
  const std::vector<uint32_t> quiet = {0x7FC00000u, 0x7FC00000u, 0xFFC00000u, 0x7FC00000u};
  for (size_t i = 0; i < kNaNs.size(); ++i) {
    CHECK(bits_of(k::round_to_bf16_cpu(from_bits(kNaNs[i]))) == quiet[i]);
  }
}

TEST_CASE("operand_round cpu: round_operands_cpu applies the mode's rounding, in place too",
          "[operand_round]") {
  std::vector<float> x = {from_bits(0x3F801000u), from_bits(0x3F808000u), 0.1f};
  std::vector<float> y(3);
  k::round_operands_cpu(k::Precision::Tf32, 3, x.data(), y.data());
  // 1 + 2^-11 ties away to 1 + 2^-10; 1 + 2^-8 is a TF32 value; 0.1f = 0x3DCCCCCD drops 0x0CCD,
  // below the tie 0x1000: 0x3DCCC000.
  CHECK(y ==
        std::vector<float>{from_bits(0x3F802000u), from_bits(0x3F808000u), from_bits(0x3DCCC000u)});
  k::round_operands_cpu(k::Precision::Fp32, 3, x.data(), y.data());
  CHECK(y == x);
  k::round_operands_cpu(k::Precision::Bf16, 3, x.data(), x.data());
  // BF16: 1 + 2^-11 drops 0x1000, below the tie 0x8000: 1; 1 + 2^-8 ties to the even 1;
  // 0.1f = 0x3DCCCCCD: the low half 0xCCCD is above the tie: 0x3DCD.
  CHECK(x == std::vector<float>{1.0f, 1.0f, from_bits(0x3DCD0000u)});
}

TEST_CASE("operand_round: the cpu bf16 rounding is round_to_bf16_cuda's, bit for bit",
          "[operand_round][bf16][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  std::vector<float> inputs;
  for (const Case& c : kBf16Cases) inputs.push_back(from_bits(c.input));
  for (float value : random_normals(7)) inputs.push_back(value);
  for (uint32_t nan : kNaNs) inputs.push_back(from_bits(nan));
  const size_t n = inputs.size();
  std::vector<double> as_double(inputs.begin(), inputs.end());
  const Tensor x = test::f64(as_double, {int64_t(n)}).to(DType::F32).to(Device::cuda());
  void* y_device = k::cuda_malloc(n * sizeof(uint16_t));
  k::round_to_bf16_cuda(int64_t(n), x.data<float>(), static_cast<uint16_t*>(y_device));
  std::vector<uint16_t> device(n);
  k::cuda_memcpy_device_to_host(device.data(), y_device, n * sizeof(uint16_t));
  k::cuda_free(y_device);
  for (size_t i = 0; i < n; ++i) {
    INFO("input 0x" << std::hex << bits_of(inputs[i]));
    const float cpu = k::round_to_bf16_cpu(inputs[i]);
    const float gpu = from_bits(uint32_t(device[i]) << 16);
    if (std::isnan(cpu) || std::isnan(gpu)) {
      CHECK(
          (std::isnan(cpu) && std::isnan(gpu)));  // a GPU's pattern is 0x7FFF, the emulator's ours
    } else {
      CHECK(bits_of(cpu) == bits_of(gpu));
    }
  }
}

TEST_CASE("operand_round: the cpu tf32 rounding is the tensor-core GEMMs' (cvt.rna)",
          "[operand_round][tf32][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // Normal values only: a subnormal or NaN operand would test the accumulator's handling of it
  // (flushes, NaN payloads), not the rounding; the hand cases cover those on the CPU.
  std::vector<float> inputs;
  for (const Case& c : kTf32Cases) {
    const float value = from_bits(c.input);
    if (std::isnormal(value) && std::isfinite(k::round_to_tf32_cpu(value))) inputs.push_back(value);
  }
  for (float value : random_normals(11)) inputs.push_back(value);
  for (bool mma : {false, true}) {
    INFO((mma ? "matmul_mma_cuda" : "matmul_tensor_core_cuda"));
    const std::vector<float> device = tf32_on_device(inputs, mma);
    REQUIRE(device.size() == inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      INFO("input 0x" << std::hex << bits_of(inputs[i]));
      CHECK(bits_of(k::round_to_tf32_cpu(inputs[i])) == bits_of(device[i]));
    }
  }
}
