// pairwise_distance: Euclidean, squared Euclidean and cosine distance matrices; exact zeros and
// NaN-free gradients on the diagonal of pairwise_distance(x, x); the fast CPU path (which the ops
// run) against the reference loops.
#include <omp.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/tensor.h"
#include "kernels/pairwise_distance/pairwise_distance.h"
#include "tests/ops/pairwise_distance_test_util.h"
#include "tests/support/allclose.h"
#include "tests/support/gradcheck.h"
#include "tests/support/tensors.h"

using engine::DistanceMetric;
using engine::DType;
using engine::Tensor;
using ops_test::metric_name;
using test::f64;

namespace {

// Rows for the fast-vs-reference sweep: random values, plus the cases with their own branches --
// row 0 of b repeats row 0 of a (distance exactly 0, the Euclidean subgradient), and the last row
// of a is all zero (cosine's norm clamp) when there are at least 3 rows.
template <typename T>
void sweep_rows(int64_t N, int64_t M, int64_t D, uint32_t seed, std::vector<T>& a,
                std::vector<T>& b) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> uniform(-2.0, 2.0);
  a.resize(N * D);
  b.resize(M * D);
  for (T& v : a) v = static_cast<T>(uniform(rng));
  for (T& v : b) v = static_cast<T>(uniform(rng));
  for (int64_t d = 0; d < D; ++d) b[d] = a[d];
  if (N >= 3) std::fill(a.end() - D, a.end(), T(0));
}

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }
std::vector<double> widen(const std::vector<double>& v) { return v; }

// Fast path vs reference on one shape, every metric, forward and each gradient alone and both.
// Both sum the same terms in double, in another order, so they agree to a few ulps of the double
// (f64) or to the rounding of the result to float (f32: rtol 5e-7, about 4 float ulps; atol 1e-9
// for entries that cancel to near 0).
template <typename T>
void require_fast_matches_reference(int64_t N, int64_t M, int64_t D, uint32_t seed) {
  const double rtol = std::is_same<T, double>::value ? 1e-12 : 5e-7;
  const double atol = std::is_same<T, double>::value ? 1e-12 : 1e-9;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  std::vector<T> a, b;
  sweep_rows(N, M, D, seed, a, b);
  std::vector<T> grad_out(N * M);
  std::mt19937 rng(seed + 1);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  for (T& v : grad_out) v = static_cast<T>(uniform(rng));
  using engine::kernels::PairwiseMetric;
  for (PairwiseMetric metric :
       {PairwiseMetric::Euclidean, PairwiseMetric::SquaredEuclidean, PairwiseMetric::Cosine}) {
    INFO("N " << N << " M " << M << " D " << D << " metric " << static_cast<int>(metric));
    const T eps = T(1e-12);
    std::vector<T> out_ref(N * M, nan), out_fast(N * M, nan);
    engine::kernels::pairwise_distance_forward_cpu(a.data(), b.data(), N, M, D, metric, eps,
                                                   out_ref.data());
    engine::kernels::pairwise_distance_forward_fast_cpu(a.data(), b.data(), N, M, D, metric, eps,
                                                        out_fast.data());
    test::require_close(widen(out_fast), widen(out_ref), atol, rtol, "forward");
    if (metric != PairwiseMetric::Cosine) CHECK(out_fast[0] == T(0));  // b_0 == a_0: exactly 0

    std::vector<T> da_ref(N * D, nan), db_ref(M * D, nan);
    engine::kernels::pairwise_distance_backward_cpu(grad_out.data(), a.data(), b.data(), N, M, D,
                                                    metric, eps, da_ref.data(), db_ref.data());
    for (int which = 0; which < 3; ++which) {  // both gradients, grad_a alone, grad_b alone
      std::vector<T> da(N * D, nan), db(M * D, nan);
      engine::kernels::pairwise_distance_backward_fast_cpu(
          grad_out.data(), a.data(), b.data(), N, M, D, metric, eps,
          which != 2 ? da.data() : nullptr, which != 1 ? db.data() : nullptr);
      if (which != 2) test::require_close(widen(da), widen(da_ref), atol, rtol, "grad_a");
      if (which != 1) test::require_close(widen(db), widen(db_ref), atol, rtol, "grad_b");
      if (which == 1) {  // grad_b not requested: left untouched
        for (T v : db) REQUIRE(std::isnan(v));
      }
      if (which == 2) {
        for (T v : da) REQUIRE(std::isnan(v));
      }
    }
  }
}

}  // namespace

// ---- kernel level: fast path vs reference ------------------------------------------------------

TEST_CASE("pairwise_distance kernels: fast path matches the reference, f64, odd shapes",
          "[pairwise_distance]") {
  // The last shape has 130 x 129 x 65 > 2^20 terms: the OpenMP path (the others run on one thread).
  const int64_t shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {17, 13, 33}, {64, 70, 129}, {130, 129, 65}};
  uint32_t seed = 100;
  for (const auto& s : shapes) require_fast_matches_reference<double>(s[0], s[1], s[2], seed++);
}

TEST_CASE("pairwise_distance kernels: fast path gives the same bits on one thread and on four",
          "[pairwise_distance]") {
  // 131 x 127 x 67 > 2^20 terms: the OpenMP path. Each row is one thread's whole sum, so the
  // number of threads must not change a bit.
  const int64_t N = 131, M = 127, D = 67;
  std::vector<float> a, b;
  sweep_rows(N, M, D, 300, a, b);
  std::vector<float> grad_out(N * M);
  for (int64_t e = 0; e < N * M; ++e) grad_out[e] = std::sin(0.01f * float(e));
  using engine::kernels::PairwiseMetric;
  for (PairwiseMetric metric :
       {PairwiseMetric::Euclidean, PairwiseMetric::SquaredEuclidean, PairwiseMetric::Cosine}) {
    auto run = [&](int threads) {
      std::vector<float> out(N * M), da(N * D), db(M * D);
      const int saved = omp_get_max_threads();
      omp_set_num_threads(threads);
      engine::kernels::pairwise_distance_forward_fast_cpu(a.data(), b.data(), N, M, D, metric,
                                                          1e-12f, out.data());
      engine::kernels::pairwise_distance_backward_fast_cpu(
          grad_out.data(), a.data(), b.data(), N, M, D, metric, 1e-12f, da.data(), db.data());
      omp_set_num_threads(saved);
      return std::vector<std::vector<float>>{out, da, db};
    };
    INFO("metric " << static_cast<int>(metric));
    CHECK(run(1) == run(4));
  }
}

TEST_CASE("pairwise_distance kernels: fast path matches the reference, f32, odd shapes",
          "[pairwise_distance]") {
  const int64_t shapes[][3] = {{2, 1, 3}, {9, 11, 512}, {131, 127, 67}};
  uint32_t seed = 200;
  for (const auto& s : shapes) require_fast_matches_reference<float>(s[0], s[1], s[2], seed++);
}

TEST_CASE("pairwise_distance: hand-computed 3-4-5 triangle", "[pairwise_distance]") {
  // a = {(0, 0), (3, 4)}, b = {(3, 0), (0, 0)}:
  //   |a0 - b0| = 3, |a0 - b1| = 0, |a1 - b0| = |(0, 4)| = 4, |a1 - b1| = 5.
  for (DType dtype : {DType::F64, DType::F32}) {
    Tensor a = Tensor::from_vector({0, 0, 3, 4}, {2, 2}, dtype);
    Tensor b = Tensor::from_vector({3, 0, 0, 0}, {2, 2}, dtype);
    Tensor euclidean = engine::pairwise_distance(a, b, DistanceMetric::Euclidean);
    REQUIRE(euclidean.shape() == engine::Shape{2, 2});
    test::require_close(euclidean, {3, 0, 4, 5}, 0.0, 0.0, "Euclidean");
    test::require_close(engine::pairwise_distance(a, b, DistanceMetric::SquaredEuclidean),
                        {9, 0, 16, 25}, 0.0, 0.0, "SquaredEuclidean");
  }
}

TEST_CASE("pairwise_distance: hand-computed cosine distances", "[pairwise_distance]") {
  // a = (3, 4) (norm 5) against b = (4, 3): cos = 24/25 -> 0.04; (-3, -4): cos = -1 -> 2;
  // (4, -3): cos = 0 -> 1; (6, 8): cos = 50/50 -> 0; (0, 0): <a, 0> = 0 -> 1 (norm clamped).
  Tensor a = f64({3, 4}, {1, 2});
  Tensor b = f64({4, 3, -3, -4, 4, -3, 6, 8, 0, 0}, {5, 2});
  test::require_close(engine::pairwise_distance(a, b, DistanceMetric::Cosine),
                      {0.04, 2.0, 1.0, 0.0, 1.0}, 1e-15, 1e-14, "Cosine");
  // The same in f32, different shapes: N = 5 rows against M = 1.
  Tensor b32 = b.to(DType::F32), a32 = a.to(DType::F32);
  test::require_close(engine::pairwise_distance(b32, a32, DistanceMetric::Cosine),
                      {0.04, 2.0, 1.0, 0.0, 1.0}, 1e-6, 1e-6, "Cosine f32");
}

TEST_CASE("pairwise_distance: distance of x to itself has an exact zero diagonal",
          "[pairwise_distance]") {
  // Large, nearly equal rows: the expansion |a|^2 + |b|^2 - 2<a, b> would cancel to garbage.
  Tensor x = f64({1000.0, 1000.0, 1000.0, 1000.0001, 1000.0, 1000.0, 3.0, -2.0, 7.5}, {3, 3});
  for (DistanceMetric metric : {DistanceMetric::Euclidean, DistanceMetric::SquaredEuclidean}) {
    INFO(metric_name(metric));
    const std::vector<double> d = engine::pairwise_distance(x, x, metric).to_vector();
    for (int i = 0; i < 3; ++i) CHECK(d[i * 3 + i] == 0.0);
    // Rows 0 and 1 differ by 1e-4 in one coordinate.
    const double d01 = metric == DistanceMetric::Euclidean ? 1e-4 : 1e-8;
    CHECK(d[1] == Approx(d01).epsilon(1e-6));
  }
}

TEST_CASE("pairwise_distance grad: Euclidean diagonal contributes a zero gradient, no NaN",
          "[pairwise_distance][grad]") {
  // x = {(0, 0), (3, 4)}: D(x, x) = [[0, 5], [5, 0]]. With dL/dD = all ones, x0 gets
  // (x0 - x1)/5 from D01 (as a) and -(x1 - x0)/5 from D10 (as b): 2 * (-3, -4)/5 = (-1.2, -1.6);
  // x1 gets (1.2, 1.6); the diagonal terms are 0.
  Tensor x = f64({0, 0, 3, 4}, {2, 2});
  x.set_requires_grad(true);
  Tensor d = engine::pairwise_distance(x, x, DistanceMetric::Euclidean);
  Tensor dx = engine::grad({d}, {x}, {Tensor::ones({2, 2}, DType::F64)})[0];
  test::require_close(dx, {-1.2, -1.6, 1.2, 1.6}, 1e-15, 1e-14, "dx");

  // Random rows: every gradient entry finite.
  Tensor y = test::random_leaf({4, 3}, 3);
  Tensor dy = engine::grad({engine::pairwise_distance(y, y, DistanceMetric::Euclidean)}, {y},
                           {Tensor::ones({4, 4}, DType::F64)})[0];
  for (double v : dy.to_vector()) CHECK(std::isfinite(v));
}

TEST_CASE("pairwise_distance grad: a != b, every metric", "[pairwise_distance][grad]") {
  const DistanceMetric metric =
      GENERATE(DistanceMetric::Euclidean, DistanceMetric::SquaredEuclidean, DistanceMetric::Cosine);
  INFO(metric_name(metric));
  // Independent random rows in 3-D: pairwise distances are well away from zero.
  Tensor a = test::random_leaf({3, 3}, 21);
  Tensor b = test::random_leaf({4, 3}, 22);
  test::require_gradcheck(
      [metric](const std::vector<Tensor>& in) {
        return engine::pairwise_distance(in[0], in[1], metric);
      },
      {a, b});
}

TEST_CASE("pairwise_distance grad: a == b, every metric", "[pairwise_distance][grad]") {
  const DistanceMetric metric =
      GENERATE(DistanceMetric::Euclidean, DistanceMetric::SquaredEuclidean, DistanceMetric::Cosine);
  INFO(metric_name(metric));
  // The diagonal of D(x, x) stays 0 under any perturbation (both sides move together), so its
  // finite difference is 0 too, matching the defined gradient.
  Tensor x = test::random_leaf({4, 3}, 31);
  test::require_gradcheck(
      [metric](const std::vector<Tensor>& in) {
        return engine::pairwise_distance(in[0], in[0], metric);
      },
      {x});
}

TEST_CASE("pairwise_distance grad: gradient for a alone skips b", "[pairwise_distance][grad]") {
  Tensor a = test::random_leaf({2, 3}, 41), b = test::random_leaf({3, 3}, 42);
  Tensor d = engine::pairwise_distance(a, b, DistanceMetric::SquaredEuclidean);
  engine::GradTrace trace;
  engine::grad({d}, {a}, {Tensor::ones({2, 3}, DType::F64)});
  CHECK(trace.contains("pairwise_distance:0"));
  CHECK_FALSE(trace.contains("pairwise_distance:1"));
}

TEST_CASE("pairwise_distance: bad shapes and dtypes are errors naming the op",
          "[pairwise_distance]") {
  using Catch::Contains;
  const auto metric = DistanceMetric::Euclidean;
  Tensor a = Tensor::ones({2, 3}, DType::F64);
  REQUIRE_THROWS_WITH(engine::pairwise_distance(a, Tensor::ones({2, 4}, DType::F64), metric),
                      Contains("pairwise_distance"));
  REQUIRE_THROWS_WITH(engine::pairwise_distance(Tensor::ones({3}, DType::F64), a, metric),
                      Contains("pairwise_distance"));
  REQUIRE_THROWS_WITH(engine::pairwise_distance(a, Tensor::ones({2, 3, 1}, DType::F64), metric),
                      Contains("pairwise_distance"));
  REQUIRE_THROWS_WITH(engine::pairwise_distance(a, Tensor::ones({2, 3}, DType::F32), metric),
                      Contains("pairwise_distance"));
  REQUIRE_THROWS_WITH(engine::pairwise_distance(a, Tensor(), metric),
                      Contains("pairwise_distance"));
}
