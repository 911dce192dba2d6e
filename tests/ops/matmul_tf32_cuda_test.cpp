// The TF32 tensor-core GEMM (kernels/matmul/matmul_tensor_core_cuda.cu) against a CPU reference
// that rounds both operands to TF32 first (round to nearest, ties away from zero, as
// cvt.rna.tf32.f32; written here with frexp and std::round, not with the emulator's bit trick)
// and accumulates in double: odd shapes (not multiples of the 64 x 64 x 16 tile), all four
// transposes, overwriting and accumulating; a hand-worked 1 x 1 x 1 product whose operands round;
// the precision dispatch (fp32 is the SGEMM's bits, bf16 not implemented yet); the matmul op
// under the precision policy (engine/precision.h) on CUDA and on the CPU.
//
// Tolerance: the products of two TF32 values are exact in FP32, so the kernel's only error is the
// FP32 rounding of its k additions (plus one for C's old value when accumulating). Each addition
// errs by at most one ulp of its partial sum (2^-23 relative, allowing a tensor core that rounds
// other than to nearest inside an instruction), and every partial sum is at most
// S = sum_p |a_p b_p| (+ |c|) in magnitude, so |C - reference| <= (k + 1) 2^-23 S, with S from the
// rounded operands. An operand not rounded to TF32 (an FP32 product) misses the reference by about
// 2^-11 |a b| per term, far outside this bound for the shapes here.
#include <catch2/catch.hpp>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/precision.h"
#include "engine/tensor.h"
#include "kernels/matmul/matmul.h"
#include "tests/support/backend_scope.h"
#include "tests/support/cuda_guard.h"
#include "tests/support/tensors.h"

using engine::Device;
using engine::DType;
using engine::Tensor;
using engine::kernels::Precision;
using test::random_f32;

namespace {

// x rounded to 11 significant bits (TF32's 10 stored mantissa bits), half-way cases away from
// zero (std::round's rule).
double round_to_tf32(double x) {
  if (x == 0.0 || !std::isfinite(x)) return x;
  int exponent = 0;
  const double mantissa = std::frexp(x, &exponent);  // |mantissa| in [0.5, 1)
  return std::ldexp(std::round(std::ldexp(mantissa, 11)), exponent - 11);
}

std::vector<double> rounded_to_tf32(std::vector<double> values) {
  for (double& v : values) v = round_to_tf32(v);
  return values;
}

// C (+)= op(A) op(B) in TF32 on the device vs the TF32-rounded double reference, element by
// element within the bound of the header.
void require_tf32_gemm_matches(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b,
                               bool accumulate, uint64_t seed) {
  std::ostringstream what;
  what << "tf32 m=" << m << " n=" << n << " k=" << k << " trans_a=" << trans_a
       << " trans_b=" << trans_b << " accumulate=" << accumulate;
  INFO(what.str());
  const Tensor a = random_f32({trans_a ? k : m, trans_a ? m : k}, seed);
  const Tensor b = random_f32({trans_b ? n : k, trans_b ? k : n}, seed + 1);
  const Tensor c0 = random_f32({m, n}, seed + 2);
  const std::vector<double> a64 = rounded_to_tf32(a.to_vector());
  const std::vector<double> b64 = rounded_to_tf32(b.to_vector());
  std::vector<double> expected = c0.to_vector(), magnitude(size_t(m * n), 0.0);
  engine::kernels::matmul_cpu<double>(m, n, k, a64.data(), b64.data(), trans_a, trans_b,
                                      expected.data(), accumulate);
  std::vector<double> a_abs = a64, b_abs = b64;
  for (double& v : a_abs) v = std::fabs(v);
  for (double& v : b_abs) v = std::fabs(v);
  engine::kernels::matmul_cpu<double>(m, n, k, a_abs.data(), b_abs.data(), trans_a, trans_b,
                                      magnitude.data(), false);
  const Tensor a_cuda = a.to(Device::cuda()), b_cuda = b.to(Device::cuda());
  Tensor c = c0.to(Device::cuda());
  engine::kernels::matmul_tensor_core_cuda(m, n, k, a_cuda.data<float>(), b_cuda.data<float>(),
                                           trans_a, trans_b, c.data<float>(), accumulate,
                                           Precision::Tf32);
  const std::vector<double> got = c.to_vector(), old_c = c0.to_vector();
  const double per_addition = std::ldexp(1.0, -23);
  for (int64_t e = 0; e < m * n; ++e) {
    const double sum_of_magnitudes = magnitude[e] + (accumulate ? std::fabs(old_c[e]) : 0.0);
    const double bound = double(k + 1) * per_addition * sum_of_magnitudes;
    if (std::fabs(got[e] - expected[e]) > bound) {
      FAIL("element " << e << ": got " << got[e] << ", reference " << expected[e] << ", bound "
                      << bound);
    }
  }
}

// Sets the process-wide precision policy for one test and puts fp32 back.
struct PrecisionScope {
  explicit PrecisionScope(Precision precision) { engine::set_precision(precision); }
  ~PrecisionScope() { engine::set_precision(Precision::Fp32); }
};

// The 1 x 1 product of the hand-worked case: a = 1 + 2^-11, b = 1 + 2^-10 + 2^-11.
Tensor hand_product(const Device& device) {
  const Tensor a = Tensor::full({1, 1}, 1.0 + std::ldexp(1.0, -11), DType::F32, device);
  const Tensor b =
      Tensor::full({1, 1}, 1.0 + std::ldexp(1.0, -10) + std::ldexp(1.0, -11), DType::F32, device);
  return engine::matmul(a, b);
}

// Strict FP32: (1 + 2^-11)(1 + 3 2^-11) = 1 + 2^-9 + 3 2^-22, exact in FP32 (22 bits).
const double kStrictProduct = 1.0 + std::ldexp(1.0, -9) + 3 * std::ldexp(1.0, -22);
// TF32: (1 + 2^-10)(1 + 2^-9) = 1 + 3 2^-10 + 2^-19.
const double kTf32Product = 1.0 + 3 * std::ldexp(1.0, -10) + std::ldexp(1.0, -19);

}  // namespace

TEST_CASE("matmul: CPU tensors ignore tf32, bf16 is not implemented yet on any device",
          "[matmul][tf32]") {
  {
    PrecisionScope tf32(Precision::Tf32);
    CHECK(hand_product(Device::cpu()).to_vector()[0] == kStrictProduct);
  }
  PrecisionScope bf16(Precision::Bf16);
  CHECK_THROWS_WITH(hand_product(Device::cpu()),
                    Catch::Contains("matmul") && Catch::Contains("bf16 is not implemented yet"));
}

TEST_CASE("matmul cuda: the tf32 policy runs matmul on the tf32 kernel, fp32 stays strict",
          "[matmul][cuda][tf32]") {
  REQUIRE_CUDA_OR_SKIP();
  CHECK(hand_product(Device::cuda()).to_vector()[0] == kStrictProduct);
  PrecisionScope tf32(Precision::Tf32);
  CHECK(hand_product(Device::cuda()).to_vector()[0] == kTf32Product);
  // cuBLAS runs strict FP32 here: asking it for TF32 is an error, not a silent FP32 run.
  test::BackendScope cublas(engine::GemmBackend::Cublas);
  CHECK_THROWS_WITH(hand_product(Device::cuda()),
                    Catch::Contains("precision tf32 with the cuBLAS GEMM backend"));
}

TEST_CASE("matmul tf32 cuda: matches the tf32-rounded reference for odd shapes, all transposes",
          "[matmul][cuda][tf32]") {
  REQUIRE_CUDA_OR_SKIP();
  struct Shape {
    int64_t m, n, k;
  };
  uint64_t seed = 7;
  for (const Shape& s : std::vector<Shape>{{1, 1, 1},
                                           {7, 5, 3},
                                           {64, 64, 16},
                                           {65, 67, 17},
                                           {33, 130, 40},
                                           {100, 3, 9},
                                           {3, 70, 300},
                                           {129, 64, 33}}) {
    for (bool trans_a : {false, true}) {
      for (bool trans_b : {false, true}) {
        for (bool accumulate : {false, true}) {
          require_tf32_gemm_matches(s.m, s.n, s.k, trans_a, trans_b, accumulate, seed);
          seed += 3;
        }
      }
    }
  }
}

TEST_CASE("matmul tf32 cuda: operands are rounded to tf32 (cvt.rna), by hand",
          "[matmul][cuda][tf32]") {
  REQUIRE_CUDA_OR_SKIP();
  // a = 1 + 2^-11 rounds (half way, away from zero) to 1 + 2^-10; b = 1 + 2^-10 + 2^-11 to
  // 1 + 2^-9. a b = 1 + 3 2^-10 + 2^-19, and accumulated onto c = 1: 2 + 3 2^-10 + 2^-19, exact
  // in FP32. In strict FP32 the product would be (1 + 2^-11)(1 + 3 2^-11) instead.
  const double a_value = 1.0 + std::ldexp(1.0, -11);
  const double b_value = 1.0 + std::ldexp(1.0, -10) + std::ldexp(1.0, -11);
  const Tensor a = Tensor::full({1, 1}, a_value, DType::F32, Device::cuda());
  const Tensor b = Tensor::full({1, 1}, b_value, DType::F32, Device::cuda());
  Tensor c = Tensor::full({1, 1}, 1.0, DType::F32, Device::cuda());
  engine::kernels::matmul_tensor_core_cuda(1, 1, 1, a.data<float>(), b.data<float>(), false, false,
                                           c.data<float>(), false, Precision::Tf32);
  CHECK(c.to_vector()[0] == 1.0 + 3 * std::ldexp(1.0, -10) + std::ldexp(1.0, -19));
  Tensor c_accumulated = Tensor::full({1, 1}, 1.0, DType::F32, Device::cuda());
  engine::kernels::matmul_tensor_core_cuda(1, 1, 1, a.data<float>(), b.data<float>(), false, false,
                                           c_accumulated.data<float>(), true, Precision::Tf32);
  CHECK(c_accumulated.to_vector()[0] == 2.0 + 3 * std::ldexp(1.0, -10) + std::ldexp(1.0, -19));
}

TEST_CASE("matmul tf32 cuda: fp32 is the sgemm's bits, bf16 is not implemented yet, k = 0",
          "[matmul][cuda][tf32]") {
  REQUIRE_CUDA_OR_SKIP();
  const Tensor a = random_f32({37, 21}, 5).to(Device::cuda());
  const Tensor b = random_f32({21, 45}, 6).to(Device::cuda());
  Tensor strict = Tensor::zeros({37, 45}, DType::F32, Device::cuda());
  Tensor through_policy = Tensor::zeros({37, 45}, DType::F32, Device::cuda());
  engine::kernels::matmul_cuda(37, 45, 21, a.data<float>(), b.data<float>(), false, false,
                               strict.data<float>(), false);
  engine::kernels::matmul_tensor_core_cuda(37, 45, 21, a.data<float>(), b.data<float>(), false,
                                           false, through_policy.data<float>(), false,
                                           Precision::Fp32);
  CHECK(strict.to_vector() == through_policy.to_vector());
  CHECK_THROWS_WITH(engine::kernels::matmul_tensor_core_cuda(
                        37, 45, 21, a.data<float>(), b.data<float>(), false, false,
                        through_policy.data<float>(), false, Precision::Bf16),
                    Catch::Contains("bf16 is not implemented yet"));
  Tensor c = Tensor::full({3, 4}, 2.5, DType::F32, Device::cuda());
  engine::kernels::matmul_tensor_core_cuda(3, 4, 0, a.data<float>(), b.data<float>(), false, false,
                                           c.data<float>(), true, Precision::Tf32);
  CHECK(c.to_vector() == std::vector<double>(12, 2.5));
  engine::kernels::matmul_tensor_core_cuda(3, 4, 0, a.data<float>(), b.data<float>(), false, false,
                                           c.data<float>(), false, Precision::Tf32);
  CHECK(c.to_vector() == std::vector<double>(12, 0.0));
}
