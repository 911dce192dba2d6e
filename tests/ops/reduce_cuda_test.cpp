// sum / mean / sum_to_shape / logsumexp on CUDA against the CPU reference (f64 on the same f32
// inputs): rows (reduced dims last), columns (reduced dims first or in the middle), several runs
// of dims, the split path for long reductions with few outputs, and the gradients (the CUDA
// broadcast kernel).
//
// Tolerances: a sum of L terms of random sign has size ~sqrt(L), and float rounding of the tree
// grows like sqrt(L) eps relative to that: test::reduction_tolerance(L, sqrt(L)).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
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

test::Tolerance sum_tolerance(int64_t length) {
  const int64_t l = std::max<int64_t>(length, 1);
  return test::reduction_tolerance(l, std::sqrt(static_cast<double>(l)));
}

std::string dims_str(const std::vector<int64_t>& dims) {
  std::string s = "{";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "}";
}

struct DimsCase {
  Shape shape;
  std::vector<int64_t> dims;
};

std::vector<DimsCase> dims_cases() {
  return {
      {{7, 33}, {0}},          // columns: [outer 1, reduce 7, inner 33]
      {{7, 33}, {1}},          // rows: [7, 33, 1]
      {{255, 257}, {0}},       //
      {{255, 257}, {1}},       //
      {{3, 1003, 5}, {1}},     // middle dim: [3, 1003, 5]
      {{3, 1003, 5}, {0, 2}},  // two runs: two kernel calls
      {{2, 3, 4, 5}, {1, 2}},  // one run of two dims
      {{4099, 3}, {0}},        // few columns, long: the column path with splits
      {{3, 70001}, {1}},       // few rows, long: the row path with splits
      {{1, 1}, {0, 1}},        //
  };
}

}  // namespace

TEST_CASE("reduce cuda: sum and mean of all elements match cpu", "[reduce][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  uint64_t seed = 1;
  for (int64_t n : {1, 7, 33, 255, 257, 1003, 100003, (1 << 22) + 3}) {
    // [0, 1) data: the sum is ~n/2, so the relative tolerance is meaningful on its own.
    Tensor x = random_f32({n}, seed++, 0.0, 1.0);
    const test::Tolerance tol = test::reduction_tolerance(n);
    Tensor sum_cuda = engine::sum(x.to(Device::cuda()));
    REQUIRE(sum_cuda.device().is_cuda());
    REQUIRE(sum_cuda.shape() == Shape{});
    test::require_close(sum_cuda, engine::sum(x.to(DType::F64)), 0.0, tol.rtol,
                        "sum n=" + std::to_string(n));
    test::require_close(engine::mean(x.to(Device::cuda())), engine::mean(x.to(DType::F64)), 0.0,
                        tol.rtol, "mean n=" + std::to_string(n));
  }
}

TEST_CASE("reduce cuda: sum and mean over chosen dims match cpu", "[reduce][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  uint64_t seed = 50;
  for (const DimsCase& c : dims_cases()) {
    Tensor x = random_f32(c.shape, seed++);
    int64_t length = 1;
    for (int64_t d : c.dims) length *= c.shape[d];
    const test::Tolerance tol = sum_tolerance(length);
    for (bool keepdim : {false, true}) {
      const std::string what =
          engine::shape_str(c.shape) + " dims " + dims_str(c.dims) + (keepdim ? " keepdim" : "");
      Tensor s = engine::sum(x.to(Device::cuda()), c.dims, keepdim);
      Tensor s_ref = engine::sum(x.to(DType::F64), c.dims, keepdim);
      REQUIRE(s.shape() == s_ref.shape());
      test::require_close(s, s_ref, tol.atol, tol.rtol, "sum " + what);
      // mean = sum / length: the same error relative to a value sqrt(length) times smaller.
      test::require_close(engine::mean(x.to(Device::cuda()), c.dims, keepdim),
                          engine::mean(x.to(DType::F64), c.dims, keepdim),
                          tol.atol / static_cast<double>(length), tol.rtol, "mean " + what);
    }
  }
}

TEST_CASE("reduce cuda grad: sum and mean broadcast the gradient back", "[reduce][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // L = sum(mean(x, dims) * w): dL/dx = w / count repeated over the reduced dims (the broadcast
  // kernel): elementwise, no reduction.
  const test::Tolerance tol = test::elementwise_tolerance();
  uint64_t seed = 200;
  for (const DimsCase& c : dims_cases()) {
    Tensor x = random_f32(c.shape, seed++);
    for (bool mean : {false, true}) {
      const std::string what = std::string(mean ? "mean " : "sum ") + engine::shape_str(c.shape) +
                               " dims " + dims_str(c.dims);
      auto reduce = [&](const Tensor& t) {
        return mean ? engine::mean(t, c.dims, true) : engine::sum(t, c.dims, true);
      };
      Tensor w = random_f32(reduce(x).shape(), seed++);
      auto gradient = [&](Tensor input, const Tensor& weight) {
        input.set_requires_grad(true);
        return engine::grad({engine::sum(engine::mul(reduce(input), weight))}, {input})[0];
      };
      Tensor expected = gradient(x.to(DType::F64), w.to(DType::F64));
      Tensor actual = gradient(x.to(Device::cuda()), w.to(Device::cuda()));
      REQUIRE(actual.device().is_cuda());
      test::require_close(actual, expected, tol.atol, tol.rtol, what);
    }
  }
}

TEST_CASE("logsumexp cuda: infinities and NaN as the cpu reference", "[logsumexp][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // Lines of 2 (both kernels: along dim 1 a block per row, along dim 0 a thread per column) and
  // of 300 (several warps reduce the max): all -inf, a +inf, and a NaN beside -inf, +inf or
  // finite values.
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::vector<float>> lines = {
      {-inf, -inf}, {1, inf}, {nan, -inf}, {inf, nan}, {0, nan}};
  for (int64_t n : {2, 300}) {
    std::vector<double> values;
    for (const std::vector<float>& line : lines) {
      for (int64_t r = 0; r < n; ++r) values.push_back(r < n - 2 ? -inf : line[r - (n - 2)]);
    }
    const int64_t rows = static_cast<int64_t>(lines.size());
    Tensor x = Tensor::from_vector(values, {rows, n});
    for (int64_t dim : {1, 0}) {
      Tensor input = dim == 1 ? x : x.transpose(0, 1).contiguous();
      const std::vector<double> expected = engine::logsumexp(input, dim).to_vector();
      const std::vector<double> actual =
          engine::logsumexp(input.to(Device::cuda()), dim).to(Device::cpu()).to_vector();
      for (int64_t row = 0; row < rows; ++row) {
        INFO("n " << n << " dim " << dim << " row " << row);
        const double e = expected[static_cast<size_t>(row)];
        const double a = actual[static_cast<size_t>(row)];
        CHECK((std::isnan(e) ? std::isnan(a) : a == e));
      }
    }
  }
}

TEST_CASE("logsumexp cuda: forward and backward match cpu along every dim", "[logsumexp][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // Values in [-5, 5] and, for stability, a copy shifted by +1000 (exp overflows float without
  // the max subtraction; the result is then ~1000 + log n, with an absolute error of ~1000 eps).
  const std::vector<Shape> shapes = {{1, 1}, {7, 33}, {255, 257}, {3, 1003, 5}, {64, 4099}};
  uint64_t seed = 300;
  for (const Shape& shape : shapes) {
    for (double shift : {0.0, 1000.0}) {
      Tensor x = engine::add_scalar(random_f32(shape, seed++, -5, 5), shift);
      for (int64_t dim = 0; dim < static_cast<int64_t>(shape.size()); ++dim) {
        const int64_t n = shape[dim];
        const std::string what = engine::shape_str(shape) + " dim " + std::to_string(dim) +
                                 " shift " + std::to_string(shift);
        const test::Tolerance tol = test::reduction_tolerance(n, 10.0 + shift);
        Tensor out = engine::logsumexp(x.to(Device::cuda()), dim);
        test::require_close(out, engine::logsumexp(x.to(DType::F64), dim), tol.atol, tol.rtol,
                            "forward " + what);

        // dL/dx = w * exp(x - lse): lse carries an absolute error of a few eps * |lse| (its own
        // rounding) plus ~sqrt(n) eps from the sum, and exp turns an absolute error of the
        // exponent into the same relative error of the gradient.
        Tensor w = random_f32(out.shape(), seed++);
        auto gradient = [&](Tensor input, const Tensor& weight) {
          input.set_requires_grad(true);
          return engine::grad({engine::sum(engine::mul(engine::logsumexp(input, dim), weight))},
                              {input})[0];
        };
        Tensor expected = gradient(x.to(DType::F64), w.to(DType::F64));
        Tensor actual = gradient(x.to(Device::cuda()), w.to(Device::cuda()));
        const double grad_rtol = std::max(
            1e-5, 4.0 * (std::sqrt(static_cast<double>(n)) + 10.0 + shift) * test::kFloatEps);
        test::require_close(actual, expected, 1e-7, grad_rtol, "backward " + what);
      }
    }
  }
}
