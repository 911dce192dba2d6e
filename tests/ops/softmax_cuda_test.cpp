// softmax, log_softmax and cross_entropy on CUDA against the CPU reference (f64 on the same f32
// inputs): along rows (block per row) and along other dims (thread per line), lines shorter and
// longer than a block, inputs whose exp overflows float, and gradients through autograd
// (grad of sum(softmax(x) * w) on CUDA equals the CPU's).
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
#include "tests/support/tensors.h"
#include "tests/support/tolerance.h"

using engine::Device;
using engine::DType;
using engine::Shape;
using engine::Tensor;
using test::random_f32;

namespace {

struct LineCase {
  Shape shape;
  int64_t dim;
};

// Rows of 1, 7, 33, 255, 257, 1003 and 4099 elements (one block per row, 32 to 256 threads,
// several elements per thread), and lines along dim 0 / the middle (one thread per line).
std::vector<LineCase> line_cases() {
  return {{{1, 1}, 1},     {{5, 1}, 1},     {{7, 33}, 1},      {{7, 33}, 0},
          {{255, 257}, 1}, {{255, 257}, 0}, {{3, 1003, 5}, 1}, {{1003, 7}, 1},
          {{2, 4099}, 1},  {{4099, 2}, 0},  {{512, 1000}, 1}};
}

// Size of the line along `dim`.
int64_t line_length(const LineCase& c) { return c.shape[c.dim]; }

std::string case_name(const char* op, const LineCase& c, double shift) {
  return std::string(op) + " " + engine::shape_str(c.shape) + " dim " + std::to_string(c.dim) +
         " shift " + std::to_string(shift);
}

// Each output depends on its line through exp(x - m) / s: a relative error of a few eps per
// exp, ~sqrt(n) eps from s, and the absolute rounding of x - m (|x - m| <= 10 here, so
// ~10 eps): one relative tolerance for softmax; log_softmax's values are <= ~10 + log n in size.
double line_rtol(int64_t n) {
  return std::max(1e-5, 4.0 * (std::sqrt(static_cast<double>(n)) + 10.0) * test::kFloatEps);
}

}  // namespace

TEST_CASE("softmax cuda: softmax and log_softmax match cpu along rows and columns",
          "[softmax][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  uint64_t seed = 1;
  for (const LineCase& c : line_cases()) {
    // shift 1000: exp(x) overflows float without the max subtraction; the outputs must not change
    // (x - m is computed exactly for floats this close, so the same tolerance applies).
    for (double shift : {0.0, 1000.0}) {
      Tensor x = engine::add_scalar(random_f32(c.shape, seed++, -5, 5), shift);
      const double rtol = line_rtol(line_length(c));
      Tensor y = engine::softmax(x.to(Device::cuda()), c.dim);
      REQUIRE(y.device().is_cuda());
      test::require_close(y, engine::softmax(x.to(DType::F64), c.dim), 1e-7, rtol,
                          case_name("softmax", c, shift));
      const double log_size = 10.0 + std::log(static_cast<double>(line_length(c)));
      test::require_close(engine::log_softmax(x.to(Device::cuda()), c.dim),
                          engine::log_softmax(x.to(DType::F64), c.dim), rtol * log_size, rtol,
                          case_name("log_softmax", c, shift));
    }
  }
}

TEST_CASE("softmax cuda grad: sum(softmax(x) * w) and sum(log_softmax(x) * w) equal cpu",
          "[softmax][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // softmax: dx_r = y_r (w_r - <w, y>), log_softmax: dx_r = w_r - exp(y_r) sum(w), with one
  // line reduction each. Where w_r is close to the reduction, dx_r cancels: its absolute error
  // is then y_r times the reduction's (~sqrt(n) eps times the terms' size: 1 for <w, y>,
  // ~sqrt(n) for sum(w) of random signs), so atol carries that scale.
  uint64_t seed = 100;
  for (const LineCase& c : line_cases()) {
    Tensor x = random_f32(c.shape, seed++, -5, 5);
    Tensor w = random_f32(c.shape, seed++);
    const int64_t n = line_length(c);
    for (bool log : {false, true}) {
      auto gradient = [&](Tensor input, const Tensor& weight) {
        input.set_requires_grad(true);
        Tensor y = log ? engine::log_softmax(input, c.dim) : engine::softmax(input, c.dim);
        return engine::grad({engine::sum(engine::mul(y, weight))}, {input})[0];
      };
      Tensor expected = gradient(x.to(DType::F64), w.to(DType::F64));
      Tensor actual = gradient(x.to(Device::cuda()), w.to(Device::cuda()));
      REQUIRE(actual.device().is_cuda());
      const double magnitude = log ? std::sqrt(static_cast<double>(n)) : 1.0;
      const double rtol = line_rtol(n);
      test::require_close(actual, expected, rtol * magnitude, rtol,
                          case_name(log ? "log_softmax grad" : "softmax grad", c, 0.0));
    }
  }
}

TEST_CASE("cross_entropy cuda: loss and gradient match cpu", "[cross_entropy][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // loss = mean_i (lse_i - x_{i, y_i}): a reduction over rows of values of size ~log C + 5;
  // dx_{i,c} = (g / N)(softmax_{i,c} - [c == y_i]).
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 1},    {1, 7},    {7, 33},
                                                           {257, 10}, {33, 257}, {1003, 1000}};
  uint64_t seed = 200;
  for (const auto& [rows, classes] : shapes) {
    const std::string what =
        "logits [" + std::to_string(rows) + ", " + std::to_string(classes) + "]";
    Tensor logits = random_f32({rows, classes}, seed++, -5, 5);
    engine::Generator gen(seed++);
    Tensor labels = engine::randint({rows}, 0, classes, gen);

    // Each lse_i is off by ~line_rtol(classes) times its size (<= ~10 + log C); the mean over
    // rows adds a tree reduction of length `rows`.
    const double rtol = line_rtol(classes);
    const double loss_tol = std::max(rtol, test::reduction_tolerance(rows).rtol) *
                            (10.0 + std::log(static_cast<double>(classes)));
    Tensor loss = engine::cross_entropy(logits.to(Device::cuda()), labels.to(Device::cuda()));
    REQUIRE(loss.device().is_cuda());
    REQUIRE(loss.shape() == Shape{});
    test::require_close(loss, engine::cross_entropy(logits.to(DType::F64), labels), loss_tol, 0.0,
                        "loss " + what);

    // Upstream gradient 3 (not 1): the backward kernel reads it from device memory.
    auto gradient = [&](Tensor input, const Tensor& label_tensor) {
      input.set_requires_grad(true);
      Tensor l = engine::mul_scalar(engine::cross_entropy(input, label_tensor), 3.0);
      return engine::grad({l}, {input})[0];
    };
    Tensor expected = gradient(logits.to(DType::F64), labels);
    Tensor actual = gradient(logits.to(Device::cuda()), labels.to(Device::cuda()));
    REQUIRE(actual.device().is_cuda());
    // Entries are (3 / rows)(p - onehot): p's relative error, on the scale 3 / rows (p - 1
    // cancels where p is close to 1, so the error is absolute there).
    test::require_close(actual, expected, rtol * 3.0 / static_cast<double>(rows), rtol,
                        "grad " + what);
  }
}
