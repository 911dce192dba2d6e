// l2_normalize on CUDA against the CPU reference (f64 on the same f32 inputs): rows shorter and
// longer than a block, a zero row (the norm < eps branch), a DML-sized batch, and the gradient.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "tests/support/allclose.h"
#include "tests/support/cuda_guard.h"
#include "tests/support/tolerance.h"

using engine::Device;
using engine::DType;
using engine::Shape;
using engine::Tensor;

namespace {

// Uniform [-1, 1) rows, with row 0 set to zeros when `zero_row` (its norm 0 < eps: y = 0 and
// dx = dy / eps).
Tensor rows_f32(int64_t N, int64_t D, uint64_t seed, bool zero_row) {
  engine::Generator gen(seed);
  Tensor x = engine::uniform({N, D}, -1.0, 1.0, gen, DType::F32);
  if (zero_row) x.slice(0, 0, 1).zero_();
  return x;
}

double smallest_nonzero_norm(const Tensor& x) {
  const std::vector<double> v = x.to_vector();
  const int64_t N = x.size(0), D = x.size(1);
  double smallest = 1.0;
  for (int64_t i = 0; i < N; ++i) {
    double squares = 0.0;
    for (int64_t d = 0; d < D; ++d) squares += v[i * D + d] * v[i * D + d];
    if (squares > 0.0) smallest = std::min(smallest, std::sqrt(squares));
  }
  return smallest;
}

std::string case_name(int64_t N, int64_t D, bool zero_row) {
  return "x [" + std::to_string(N) + ", " + std::to_string(D) + "]" +
         (zero_row ? " with a zero row" : "");
}

const std::vector<std::pair<int64_t, int64_t>> kShapes = {
    {1, 1}, {7, 33}, {255, 257}, {1003, 3}, {33, 1003}, {112, 512}, {4096, 128}};

}  // namespace

TEST_CASE("l2_normalize cuda: forward matches cpu", "[l2_normalize][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  uint64_t seed = 1;
  for (const auto& [N, D] : kShapes) {
    for (bool zero_row : {false, true}) {
      Tensor x = rows_f32(N, D, seed++, zero_row);
      // y_d = x_d / |x|: the norm is a reduction of D squares (relative error ~sqrt(D) eps);
      // |y_d| <= 1.
      const test::Tolerance tol = test::reduction_tolerance(D);
      Tensor y = engine::l2_normalize(x.to(Device::cuda()));
      REQUIRE(y.device().is_cuda());
      test::require_close(y, engine::l2_normalize(x.to(DType::F64)), tol.atol, tol.rtol,
                          case_name(N, D, zero_row));
    }
  }
}

TEST_CASE("l2_normalize cuda grad: matches cpu, including the norm < eps branch",
          "[l2_normalize][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  uint64_t seed = 100;
  for (const auto& [N, D] : kShapes) {
    for (bool zero_row : {false, true}) {
      Tensor x = rows_f32(N, D, seed++, zero_row);
      engine::Generator gen(seed++);
      Tensor w = engine::uniform({N, D}, -1.0, 1.0, gen, DType::F32);
      auto gradient = [&](Tensor input, const Tensor& weight) {
        input.set_requires_grad(true);
        return engine::grad({engine::sum(engine::mul(engine::l2_normalize(input), weight))},
                            {input})[0];
      };
      Tensor expected = gradient(x.to(DType::F64), w.to(DType::F64));
      Tensor actual = gradient(x.to(Device::cuda()), w.to(Device::cuda()));
      REQUIRE(actual.device().is_cuda());
      // dx = (w - x <x, w> / |x|^2) / |x|: a dot product of length D and a cancellation where
      // w_d ~ x_d <x, w> / |x|^2, so the absolute error is on the scale of the terms, 1 / |x|
      // (taken at the smallest nonzero row norm). The zero row's dx = w / eps (~1e12) is purely
      // relative: one division.
      const test::Tolerance tol = test::reduction_tolerance(D, 1.0 / smallest_nonzero_norm(x));
      test::require_close(actual, expected, tol.atol, tol.rtol, case_name(N, D, zero_row));
    }
  }
}
