// pairwise_distance on CUDA against the CPU reference (f64 on the same f32 inputs), for the
// three metrics: ragged shapes that fill no 64 x 64 tile and no 16-deep chunk, a DML-sized
// batch, the exact zeros (and finite gradient) of d(x, x) on the diagonal, and gradients for
// a and b (both, or one of them: the other is then never computed).
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
#include "tests/ops/pairwise_distance_test_util.h"
#include "tests/support/allclose.h"
#include "tests/support/cuda_guard.h"
#include "tests/support/tensors.h"
#include "tests/support/tolerance.h"

using engine::Device;
using engine::DistanceMetric;
using engine::DType;
using engine::Shape;
using engine::Tensor;
using ops_test::metric_name;
using test::random_f32;

namespace {

const DistanceMetric kMetrics[] = {DistanceMetric::Euclidean, DistanceMetric::SquaredEuclidean,
                                   DistanceMetric::Cosine};

struct Sizes {
  int64_t N, M, D;
};

std::string case_name(DistanceMetric metric, const Sizes& s) {
  return std::string(metric_name(metric)) + " N=" + std::to_string(s.N) +
         " M=" + std::to_string(s.M) + " D=" + std::to_string(s.D);
}

// Typical size of a distance between uniform [-1, 1) rows of length D: a squared distance is a
// sum of D terms of mean 2/3.
double distance_magnitude(DistanceMetric metric, int64_t D) {
  const double squared = 2.0 * static_cast<double>(D) / 3.0;
  switch (metric) {
    case DistanceMetric::SquaredEuclidean:
      return std::max(squared, 1.0);
    case DistanceMetric::Euclidean:
      return std::max(std::sqrt(squared), 1.0);
    case DistanceMetric::Cosine:
      return 1.0;
  }
  return 1.0;
}

double max_abs(const Tensor& t) {
  double m = 0.0;
  for (double v : t.to_vector()) m = std::max(m, std::fabs(v));
  return m;
}

double min_row_norm(const Tensor& x) {
  const std::vector<double> v = x.to_vector();
  const int64_t rows = x.size(0), D = x.size(1);
  double smallest = INFINITY;
  for (int64_t i = 0; i < rows; ++i) {
    double squares = 0.0;
    for (int64_t d = 0; d < D; ++d) squares += v[i * D + d] * v[i * D + d];
    smallest = std::min(smallest, std::sqrt(squares));
  }
  return smallest;
}

// The size of one pair's term in a gradient row, with |w| <= 1 and entries in [-1, 1]:
// (squared) Euclidean terms are w (a_i - b_j) / dist (each component <= 1) or 2 w (a_i - b_j)
// (<= 4); cosine terms are w b_j / (|a_i| |b_j|) and w s a_i / |a_i|^2, both <= 1 / |a_i|
// (for db: 1 / |b_j|), and they cancel exactly when D = 1.
double term_scale(DistanceMetric metric, const Tensor& own_rows) {
  switch (metric) {
    case DistanceMetric::Euclidean:
      return 1.0;
    case DistanceMetric::SquaredEuclidean:
      return 4.0;
    case DistanceMetric::Cosine:
      return 1.0 / min_row_norm(own_rows);
  }
  return 1.0;
}

}  // namespace

TEST_CASE("pairwise_distance cuda: all metrics match cpu over ragged tile shapes",
          "[pairwise_distance][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  const std::vector<Sizes> sizes = {{1, 1, 1},       {7, 33, 5},   {33, 7, 64},   {65, 63, 17},
                                    {255, 257, 33},  {3, 1003, 7}, {1003, 3, 16}, {112, 112, 512},
                                    {300, 300, 515}, {2, 2, 1003}};
  uint64_t seed = 1;
  for (const Sizes& s : sizes) {
    Tensor a = random_f32({s.N, s.D}, seed++);
    Tensor b = random_f32({s.M, s.D}, seed++);
    for (DistanceMetric metric : kMetrics) {
      // A sum of D terms: relative error ~sqrt(D) eps of the distance's typical size (cosine:
      // 1 - s with |s| <= 1, the error of s is absolute).
      const test::Tolerance tol = test::reduction_tolerance(s.D, distance_magnitude(metric, s.D));
      Tensor out = engine::pairwise_distance(a.to(Device::cuda()), b.to(Device::cuda()), metric);
      REQUIRE(out.device().is_cuda());
      REQUIRE(out.shape() == Shape{s.N, s.M});
      test::require_close(out,
                          engine::pairwise_distance(a.to(DType::F64), b.to(DType::F64), metric),
                          tol.atol, tol.rtol, case_name(metric, s));
    }
  }
}

TEST_CASE("pairwise_distance cuda: d(x, x) has an exact zero diagonal and a finite gradient",
          "[pairwise_distance][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // The distance is summed from differences (never |a|^2 + |b|^2 - 2<a, b>), so identical rows
  // give exactly 0; the Euclidean gradient there is the subgradient 0, not NaN.
  Tensor x = random_f32({70, 19}, 42);
  for (DistanceMetric metric : {DistanceMetric::Euclidean, DistanceMetric::SquaredEuclidean}) {
    Tensor xd = x.to(Device::cuda());
    xd.set_requires_grad(true);
    Tensor d = engine::pairwise_distance(xd, xd, metric);
    std::vector<double> values = d.to_vector();
    for (int64_t i = 0; i < 70; ++i) {
      INFO(metric_name(metric) << " diagonal " << i);
      REQUIRE(values[i * 70 + i] == 0.0);
    }
    Tensor w = random_f32({70, 70}, 43);
    Tensor gx = engine::grad({engine::sum(engine::mul(d, w.to(Device::cuda())))}, {xd})[0];
    for (double v : gx.to_vector()) REQUIRE(std::isfinite(v));

    Tensor x64 = x.to(DType::F64);
    x64.set_requires_grad(true);
    Tensor loss =
        engine::sum(engine::mul(engine::pairwise_distance(x64, x64, metric), w.to(DType::F64)));
    Tensor expected = engine::grad({loss}, {x64})[0];
    // x feeds both sides: 2 * 70 pair terms per element.
    const test::Tolerance tol =
        test::reduction_tolerance(140, std::max(max_abs(expected), term_scale(metric, x)));
    test::require_close(gx, expected, tol.atol, tol.rtol, metric_name(metric));
  }
}

TEST_CASE("pairwise_distance cuda grad: da and db match cpu for every metric",
          "[pairwise_distance][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // L = sum(d(a, b) * w). da_i sums M pair terms (db_j: N terms): the error is ~sqrt(M) eps
  // times the terms' size (term_scale) or the result's, whichever is larger.
  const std::vector<Sizes> sizes = {{1, 1, 1},    {7, 33, 5},     {33, 7, 64},
                                    {65, 63, 17}, {130, 129, 70}, {257, 255, 129}};
  uint64_t seed = 100;
  for (const Sizes& s : sizes) {
    Tensor a = random_f32({s.N, s.D}, seed++);
    Tensor b = random_f32({s.M, s.D}, seed++);
    Tensor w = random_f32({s.N, s.M}, seed++);
    for (DistanceMetric metric : kMetrics) {
      // which = 0: both gradients; 1: only da; 2: only db.
      for (int which = 0; which < 3; ++which) {
        auto gradients = [&](Tensor x, Tensor y, const Tensor& weight) {
          if (which != 2) x.set_requires_grad(true);
          if (which != 1) y.set_requires_grad(true);
          Tensor loss = engine::sum(engine::mul(engine::pairwise_distance(x, y, metric), weight));
          if (which == 1) return std::vector<Tensor>{engine::grad({loss}, {x})[0], Tensor()};
          if (which == 2) return std::vector<Tensor>{Tensor(), engine::grad({loss}, {y})[0]};
          return engine::grad({loss}, {x, y});
        };
        std::vector<Tensor> expected =
            gradients(a.to(DType::F64), b.to(DType::F64), w.to(DType::F64));
        std::vector<Tensor> actual =
            gradients(a.to(Device::cuda()), b.to(Device::cuda()), w.to(Device::cuda()));
        for (int k = 0; k < 2; ++k) {
          if (!expected[k].defined()) continue;
          REQUIRE(actual[k].device().is_cuda());
          const int64_t length = k == 0 ? s.M : s.N;
          const double scale = std::max(max_abs(expected[k]), term_scale(metric, k == 0 ? a : b));
          const test::Tolerance tol = test::reduction_tolerance(length, scale);
          test::require_close(actual[k], expected[k], tol.atol, tol.rtol,
                              case_name(metric, s) + (k == 0 ? " da" : " db") +
                                  (which == 0 ? " (both)" : " (alone)"));
        }
      }
    }
  }
}
