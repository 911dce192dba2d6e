// The one place that says how close CUDA (f32) must be to the CPU reference.
// Elementwise ops: a few ulps. Reductions of length L (sums, dot products, conv, matmul, BN
// statistics): float rounding grows like sqrt(L) for random data, so rtol = 4 sqrt(L) eps_f32,
// floored at 1e-5; atol scales the same way relative to the typical magnitude of the result.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace test {

constexpr double kFloatEps = 1.1920928955078125e-07;

struct Tolerance {
  double atol;
  double rtol;
};

inline Tolerance elementwise_tolerance() { return {1e-6, 1e-5}; }

inline Tolerance reduction_tolerance(int64_t reduction_length, double magnitude = 1.0) {
  double rtol =
      std::max(1e-5, 4.0 * std::sqrt(double(std::max<int64_t>(reduction_length, 1))) * kFloatEps);
  return {rtol * magnitude, rtol};
}

}  // namespace test
