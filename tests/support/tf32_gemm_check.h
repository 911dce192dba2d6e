// The check of a TF32 GEMM (tests/ops/matmul_mma_cuda_test.cpp): a CUDA GEMM with matmul's
// contract (kernels/matmul/matmul.h), passed as a function, in TF32 against a CPU reference that
// rounds both operands to TF32 first (round to nearest, ties away from zero, as cvt.rna.tf32.f32;
// written here with frexp and std::round, not with the emulator's bit trick) and accumulates in
// double. The same reference and bound as tests/ops/matmul_tf32_cuda_test.cpp's for the WMMA
// kernel, whose copy is bound to matmul_tensor_core_cuda.
//
// Tolerance: the products of two TF32 values are exact in FP32, so the kernel's only error is the
// FP32 rounding of its k additions (plus one for C's old value when accumulating). Each addition
// errs by at most one ulp of its partial sum (2^-23 relative, allowing a tensor core that rounds
// other than to nearest inside an instruction), and every partial sum is at most
// S = sum_p |a_p b_p| (+ |c|) in magnitude, so |C - reference| <= (k + 1) 2^-23 S, with S from the
// rounded operands. An operand not rounded to TF32 (an FP32 product) misses the reference by about
// 2^-11 |a b| per term, far outside this bound for the shapes used.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <sstream>
#include <vector>

#include "engine/tensor.h"
#include "kernels/matmul/matmul.h"
#include "tests/support/tensors.h"

namespace test {

// x rounded to 11 significant bits (TF32's 10 stored mantissa bits), half-way cases away from
// zero (std::round's rule).
inline double round_to_tf32(double x) {
  if (x == 0.0 || !std::isfinite(x)) return x;
  int exponent = 0;
  const double mantissa = std::frexp(x, &exponent);  // |mantissa| in [0.5, 1)
  return std::ldexp(std::round(std::ldexp(mantissa, 11)), exponent - 11);
}

inline std::vector<double> rounded_to_tf32(std::vector<double> values) {
  for (double& v : values) v = round_to_tf32(v);
  return values;
}

// A CUDA GEMM with matmul_cuda's arguments (m, n, k, a, b, trans_a, trans_b, c, accumulate).
using Tf32Gemm = std::function<void(int64_t, int64_t, int64_t, const float*, const float*, bool,
                                    bool, float*, bool)>;

// C (+)= op(A) op(B) by `gemm` on the device vs the TF32-rounded double reference, element by
// element within the bound of the header.
inline void require_tf32_gemm_matches(const Tf32Gemm& gemm, int64_t m, int64_t n, int64_t k,
                                      bool trans_a, bool trans_b, bool accumulate, uint64_t seed) {
  using engine::Device;
  using engine::Tensor;
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
  gemm(m, n, k, a_cuda.data<float>(), b_cuda.data<float>(), trans_a, trans_b, c.data<float>(),
       accumulate);
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

}  // namespace test
