// Helpers shared by the tensor-core GEMM tests (matmul_tf32_cuda_test.cpp,
// matmul_bf16_cuda_test.cpp, matmul_mma_cuda_test.cpp, matmul_wgmma_cuda_test.cpp) and conv tests
// (conv2d_tensor_core_test_util.h): the precision policy (and tensor-core GEMM) set for one test,
// operands placed off 16-byte alignment, the operand roundings,
// and the comparison of a tensor-core GEMM (kernels::matmul_tensor_core_cuda, or any kernel with
// matmul's contract) with a double reference whose operands were rounded first.
//
// Tolerances (both checked element by element):
//   against the rounded reference: the products of two TF32 or two BF16 values are exact in
//     FP32 (at most 22 significant bits), so the kernel's only error is the FP32 rounding of its
//     k additions (plus one for C's old value when accumulating). Each addition errs by at most
//     one ulp of its partial sum (2^-23 relative, allowing a tensor core that rounds other than
//     to nearest inside an instruction), and every partial sum is at most
//     S~ = sum_p |r(a_p) r(b_p)| (+ |c|) in magnitude: |C - reference| <= (k + 1) 2^-23 S~. An
//     operand not rounded as the mode says (an FP32 product, or TF32's rounding under BF16) misses
//     the reference by up to 2 u |a b| per term (u below), far outside it.
//   against the exact product of the unrounded FP32 operands (the mode's error as a user sees
//     it): each operand is off by at most u relative (half an ulp, 2^-p for p significant bits:
//     u = 2^-11 for TF32, 2^-8 for BF16), so each product by at most (2u + u^2) |a b|; with
//     S = sum_p |a_p b_p|: |C - exact| <= (2u + u^2) S + (k + 1) 2^-23 S~.
#pragma once

#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/backend.h"
#include "engine/precision.h"
#include "engine/tensor.h"
#include "kernels/matmul/matmul.h"
#include "tests/support/tensors.h"

namespace tensor_core_test {

// Sets the process-wide precision policy for one test and puts fp32 back.
struct PrecisionScope {
  explicit PrecisionScope(engine::Precision precision) { engine::set_precision(precision); }
  ~PrecisionScope() { engine::set_precision(engine::Precision::Fp32); }
};

// Sets the tensor-core GEMM (ENGINE_TC_GEMM) and the precision policy for one test and puts both
// back.
struct TensorCoreScope {
  TensorCoreScope(engine::TensorCoreGemm gemm, engine::Precision precision)
      : previous_gemm(engine::tensor_core_gemm()), previous_precision(engine::precision()) {
    engine::set_tensor_core_gemm(gemm);
    engine::set_precision(precision);
  }
  ~TensorCoreScope() {
    engine::set_tensor_core_gemm(previous_gemm);
    engine::set_precision(previous_precision);
  }
  engine::TensorCoreGemm previous_gemm;
  engine::Precision previous_precision;
};

// `values` on the device starting `offset` floats into an allocation (offset 1: 4-byte aligned
// only, so a kernel with 16-byte copies must fall back to 4-byte ones).
inline engine::Tensor on_device_at(const std::vector<double>& values, int offset) {
  std::vector<double> padded(values.size() + size_t(offset), 0.0);
  for (size_t i = 0; i < values.size(); ++i) padded[size_t(offset) + i] = values[i];
  return engine::Tensor::from_vector(padded, {int64_t(padded.size())}, engine::DType::F32)
      .to(engine::Device::cuda());
}

// x rounded to `significant_bits` significant bits (normal numbers; no subnormal range), the
// scaled significand rounded to an integer by `round_integer`: std::round rounds half-way cases
// away from zero, std::nearbyint (default mode) to the even neighbour.
inline double round_to_significant_bits(double x, int significant_bits,
                                        double (*round_integer)(double)) {
  if (x == 0.0 || !std::isfinite(x)) return x;
  int exponent = 0;
  const double mantissa = std::frexp(x, &exponent);  // |mantissa| in [0.5, 1)
  return std::ldexp(round_integer(std::ldexp(mantissa, significant_bits)),
                    exponent - significant_bits);
}

// How a mode rounds an operand (written in the tests with frexp, independently of the kernel and
// the emulator) and the largest relative error of that rounding for normal numbers.
struct OperandRounding {
  double (*round)(double);
  double unit_roundoff;
};

// TF32's rounding: 11 significant bits (10 stored mantissa bits), half-way cases away from zero
// (std::round's rule, as cvt.rna.tf32.f32); unit roundoff 2^-11.
inline double round_to_tf32(double x) {
  return round_to_significant_bits(x, 11, [](double v) { return std::round(v); });
}
inline const OperandRounding kTf32Rounding{round_to_tf32, 0.00048828125};  // 2^-11

// BF16's rounding: 8 significant bits (7 stored mantissa bits), half-way cases to the even
// neighbour (std::nearbyint in the default rounding mode, round to nearest even, as
// __float2bfloat16); unit roundoff 2^-8. For normal FP32 values, which are all the tests feed it.
inline double round_to_bf16(double x) {
  return round_to_significant_bits(x, 8, [](double v) { return std::nearbyint(v); });
}
inline const OperandRounding kBf16Rounding{round_to_bf16, 0.00390625};  // 2^-8

inline std::vector<double> rounded(std::vector<double> values, const OperandRounding& rounding) {
  for (double& v : values) v = rounding.round(v);
  return values;
}

inline std::vector<double> magnitudes(std::vector<double> values) {
  for (double& v : values) v = std::fabs(v);
  return values;
}

// A CUDA GEMM with matmul_cuda's arguments (m, n, k, a, b, trans_a, trans_b, c, accumulate).
using DeviceGemm = std::function<void(int64_t, int64_t, int64_t, const float*, const float*, bool,
                                      bool, float*, bool)>;

// C (+)= op(A) op(B) on the device by `gemm` vs the references of the header, A, B and C of
// uniform noise in [-1, 1) from `seed`; `label` names the kernel in the failure message.
inline void require_gemm_matches_rounded(const std::string& label, const DeviceGemm& gemm,
                                         const OperandRounding& rounding, int64_t m, int64_t n,
                                         int64_t k, bool trans_a, bool trans_b, bool accumulate,
                                         uint64_t seed) {
  using engine::Device;
  using engine::Tensor;
  using engine::kernels::matmul_cpu;
  std::ostringstream what;
  what << label << " m=" << m << " n=" << n << " k=" << k << " trans_a=" << trans_a
       << " trans_b=" << trans_b << " accumulate=" << accumulate;
  INFO(what.str());
  const Tensor a = test::random_f32({trans_a ? k : m, trans_a ? m : k}, seed);
  const Tensor b = test::random_f32({trans_b ? n : k, trans_b ? k : n}, seed + 1);
  const Tensor c0 = test::random_f32({m, n}, seed + 2);
  const std::vector<double> a64 = a.to_vector(), b64 = b.to_vector(), old_c = c0.to_vector();
  const std::vector<double> a_rounded = rounded(a64, rounding), b_rounded = rounded(b64, rounding);
  std::vector<double> expected = old_c, exact = old_c;
  std::vector<double> magnitude(size_t(m * n), 0.0), rounded_magnitude(size_t(m * n), 0.0);
  matmul_cpu<double>(m, n, k, a_rounded.data(), b_rounded.data(), trans_a, trans_b, expected.data(),
                     accumulate);
  matmul_cpu<double>(m, n, k, a64.data(), b64.data(), trans_a, trans_b, exact.data(), accumulate);
  matmul_cpu<double>(m, n, k, magnitudes(a_rounded).data(), magnitudes(b_rounded).data(), trans_a,
                     trans_b, rounded_magnitude.data(), false);
  matmul_cpu<double>(m, n, k, magnitudes(a64).data(), magnitudes(b64).data(), trans_a, trans_b,
                     magnitude.data(), false);

  const Tensor a_cuda = a.to(Device::cuda()), b_cuda = b.to(Device::cuda());
  Tensor c = c0.to(Device::cuda());
  gemm(m, n, k, a_cuda.data<float>(), b_cuda.data<float>(), trans_a, trans_b, c.data<float>(),
       accumulate);
  const std::vector<double> got = c.to_vector();
  const double per_addition = std::ldexp(1.0, -23), u = rounding.unit_roundoff;
  for (int64_t e = 0; e < m * n; ++e) {
    const double summation = double(k + 1) * per_addition *
                             (rounded_magnitude[e] + (accumulate ? std::fabs(old_c[e]) : 0.0));
    if (std::fabs(got[e] - expected[e]) > summation) {
      FAIL("element " << e << ": got " << got[e] << ", rounded-operand reference " << expected[e]
                      << ", bound " << summation);
    }
    const double to_exact = (2 * u + u * u) * magnitude[e] + summation;
    if (std::fabs(got[e] - exact[e]) > to_exact) {
      FAIL("element " << e << ": got " << got[e] << ", exact " << exact[e] << ", bound "
                      << to_exact);
    }
  }
}

// The same for kernels::matmul_tensor_core_cuda in `precision`.
inline void require_tensor_core_gemm_matches(engine::Precision precision,
                                             const OperandRounding& rounding, int64_t m, int64_t n,
                                             int64_t k, bool trans_a, bool trans_b, bool accumulate,
                                             uint64_t seed) {
  const DeviceGemm gemm = [precision](int64_t gm, int64_t gn, int64_t gk, const float* a,
                                      const float* b, bool ta, bool tb, float* c, bool acc) {
    engine::kernels::matmul_tensor_core_cuda(gm, gn, gk, a, b, ta, tb, c, acc, precision);
  };
  require_gemm_matches_rounded(engine::precision_name(precision), gemm, rounding, m, n, k, trans_a,
                               trans_b, accumulate, seed);
}

// require_tensor_core_gemm_matches over shapes that are not multiples of the 64 x 64 x 16 tile
// (odd M, N and K among them; K = 301 crosses 19 p steps) and one that is, each with all four
// transposes, overwriting and accumulating; seeds from `seed` on.
inline void require_tensor_core_gemm_matches_over_shapes(engine::Precision precision,
                                                         const OperandRounding& rounding,
                                                         uint64_t seed) {
  struct Shape {
    int64_t m, n, k;
  };
  for (const Shape& s : std::vector<Shape>{{1, 1, 1},
                                           {7, 5, 3},
                                           {64, 64, 16},
                                           {65, 67, 17},
                                           {33, 130, 40},
                                           {100, 3, 9},
                                           {3, 70, 301},
                                           {129, 65, 33}}) {
    for (bool trans_a : {false, true}) {
      for (bool trans_b : {false, true}) {
        for (bool accumulate : {false, true}) {
          require_tensor_core_gemm_matches(precision, rounding, s.m, s.n, s.k, trans_a, trans_b,
                                           accumulate, seed);
          seed += 3;
        }
      }
    }
  }
}

// C = a b for 1 x 1 matrices on `gemm` (c + a b when accumulating onto c).
inline double scalar_product(const DeviceGemm& gemm, double a_value, double b_value,
                             bool accumulate, double c_value) {
  const engine::Device cuda = engine::Device::cuda();
  const engine::Tensor a = engine::Tensor::full({1, 1}, a_value, engine::DType::F32, cuda);
  const engine::Tensor b = engine::Tensor::full({1, 1}, b_value, engine::DType::F32, cuda);
  engine::Tensor c = engine::Tensor::full({1, 1}, c_value, engine::DType::F32, cuda);
  gemm(1, 1, 1, a.data<float>(), b.data<float>(), false, false, c.data<float>(), accumulate);
  return c.to_vector()[0];
}

// A GEMM kernel that takes the precision (matmul_mma_cuda, matmul_wgmma_cuda), as a DeviceGemm
// for each.
using GemmInPrecision = std::function<DeviceGemm(engine::kernels::Precision)>;

// BF16 operands rounded to nearest with ties to even, by hand, on 1 x 1 x 1 products:
// a = 1 + 2^-8 is half way between 1 and 1 + 2^-7 and goes to the even 1; b = 1 + 3 2^-8 half way
// between 1 + 2^-7 (odd) and 1 + 2^-6 (even) goes up to 1 + 2^-6. So a b = 1 + 2^-6 in BF16, where
// strict FP32 keeps 1 + 2^-6 + 3 2^-16 (exact) and TF32 (11 bits, no rounding here) the same.
inline void check_bf16_ties_to_even_by_hand(const GemmInPrecision& gemm_in) {
  using engine::kernels::Precision;
  const double a = 1.0 + std::ldexp(1.0, -8), b = 1.0 + 3 * std::ldexp(1.0, -8);
  const double bf16_product = 1.0 + std::ldexp(1.0, -6);
  const DeviceGemm bf16 = gemm_in(Precision::Bf16);
  CHECK(scalar_product(bf16, a, b, false, 5.0) == bf16_product);
  // Accumulating onto c = 1 (C's old value added in FP32, not rounded): 2 + 2^-6, exact.
  CHECK(scalar_product(bf16, a, b, true, 1.0) == 2.0 + std::ldexp(1.0, -6));
  // Mirrored: -(1 + 2^-8) ties to the even -1 (ties away from zero would give -(1 + 2^-7)).
  CHECK(scalar_product(bf16, -a, b, false, 0.0) == -bf16_product);
  CHECK(scalar_product(gemm_in(Precision::Tf32), a, b, false, 0.0) ==
        1.0 + std::ldexp(1.0, -6) + 3 * std::ldexp(1.0, -16));
}

}  // namespace tensor_core_test
