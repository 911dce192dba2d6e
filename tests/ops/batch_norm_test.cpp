// batch_norm with K branches: hand-computed forward cases, the multi-branch acceptance test
// (routing halves of a batch to two branches equals two independent single-branch BNs), f64
// gradient checks in train and eval mode, and argument errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/tensor.h"
#include "tests/support/allclose.h"
#include "tests/support/gradcheck.h"
#include "tests/support/tensors.h"

using engine::BatchNormRoute;
using engine::DType;
using engine::Shape;
using engine::Tensor;
using test::f64;
using test::f64_leaf;

namespace {

// Host values of `rows` consecutive rows (dim 0) of a contiguous tensor, starting at `first`.
std::vector<double> host_rows(const Tensor& t, int64_t first, int64_t rows) {
  const std::vector<double> all = t.to_vector();
  const int64_t row_size = t.numel() / t.size(0);
  return std::vector<double>(all.begin() + first * row_size,
                             all.begin() + (first + rows) * row_size);
}

std::vector<double> join(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

// Per-channel batch statistics of host data laid out [N, C, HW], computed here independently of
// the engine: mean, and the unbiased variance a running estimate is updated with.
struct ChannelStats {
  std::vector<double> mean, unbiased_var;
};

ChannelStats channel_stats(const std::vector<double>& x, int64_t N, int64_t C, int64_t HW) {
  ChannelStats stats{std::vector<double>(C, 0.0), std::vector<double>(C, 0.0)};
  const double m = double(N * HW);
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < HW; ++s) stats.mean[c] += x[(n * C + c) * HW + s] / m;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < HW; ++s) {
        const double d = x[(n * C + c) * HW + s] - stats.mean[c];
        stats.unbiased_var[c] += d * d / (m - 1.0);
      }
  }
  return stats;
}

// A fixed, distinct weight per output element: the upstream gradient of the comparisons.
Tensor upstream(const Shape& shape, uint64_t seed) {
  engine::Generator gen(seed);
  return engine::uniform(shape, -1.0, 1.0, gen, DType::F64);
}

}  // namespace

TEST_CASE("batch_norm: hand-computed batch_norm1d training forward and running stats",
          "[batch_norm]") {
  // eps = 1.44 makes sqrt(var + eps) exact: channel 0 = {0.1, 1.9, 1.9, 0.1} has mean 1 and
  // biased var 0.81 -> sqrt(0.81 + 1.44) = 1.5, xhat = {-0.6, 0.6, 0.6, -0.6};
  // channel 1 = {-1.6, 1.6, -1.6, 1.6} has mean 0 and var 2.56 -> sqrt(4) = 2, xhat = +-0.8.
  // weight {2, -1}, bias {0.5, 3}:  y0 = 2 xhat + 0.5 = {-0.7, 1.7, 1.7, -0.7},
  //                                 y1 = 3 - xhat     = {3.8, 2.2, 3.8, 2.2}.
  // Running stats from (mean 0, var 1) with momentum 0.1 (unbiased var = biased * 4/3):
  //   mean {0.1, 0}, var {0.9 + 0.1 * 1.08, 0.9 + 0.1 * 3.41333...} = {1.008, 1.2413333...}.
  for (DType dtype : {DType::F64, DType::F32}) {
    Tensor x = Tensor::from_vector({0.1, -1.6, 1.9, 1.6, 1.9, -1.6, 0.1, 1.6}, {4, 2}, dtype);
    Tensor weight = Tensor::from_vector({2.0, -1.0}, {1, 2}, dtype);
    Tensor bias = Tensor::from_vector({0.5, 3.0}, {1, 2}, dtype);
    Tensor running_mean = Tensor::zeros({1, 2}, dtype);
    Tensor running_var = Tensor::ones({1, 2}, dtype);
    Tensor y = engine::batch_norm(x, weight, bias, running_mean, running_var,
                                  engine::single_branch_route(4), true, 0.1, 1.44);
    const double tol = dtype == DType::F64 ? 1e-12 : 1e-5;
    test::require_close(y, {-0.7, 3.8, 1.7, 2.2, 1.7, 3.8, -0.7, 2.2}, tol, tol, "y");
    test::require_close(running_mean, {0.1, 0.0}, tol, tol, "running_mean");
    test::require_close(running_var, {1.008, 0.9 + 0.1 * 10.24 / 3.0}, tol, tol, "running_var");
  }
}

TEST_CASE("batch_norm: hand-computed batch_norm2d training forward reduces over H and W",
          "[batch_norm]") {
  // x [2, 1, 1, 2]: the one channel holds {0.1, 1.9, 1.9, 0.1} over (N, H, W): mean 1, var 0.81,
  // eps 1.44 -> xhat = {-0.6, 0.6, 0.6, -0.6}; weight 2, bias 0.5 -> {-0.7, 1.7, 1.7, -0.7}.
  Tensor x = f64({0.1, 1.9, 1.9, 0.1}, {2, 1, 1, 2});
  Tensor running_mean = Tensor::zeros({1, 1}, DType::F64);
  Tensor running_var = Tensor::ones({1, 1}, DType::F64);
  Tensor y = engine::batch_norm(x, f64({2.0}, {1, 1}), f64({0.5}, {1, 1}), running_mean,
                                running_var, engine::single_branch_route(2), true, 0.5, 1.44);
  test::require_close(y, {-0.7, 1.7, 1.7, -0.7}, 1e-12, 1e-12, "y");
  // momentum 0.5: mean 0.5 * 1 = 0.5; var 0.5 * 1 + 0.5 * 0.81 * 4/3 = 1.04.
  test::require_close(running_mean, {0.5}, 1e-12, 1e-12, "running_mean");
  test::require_close(running_var, {1.04}, 1e-12, 1e-12, "running_var");
}

TEST_CASE("batch_norm: hand-computed eval forward uses the routed branch's running stats",
          "[batch_norm]") {
  // x [2, 1, 1, 2], routes: row 0 -> branch 1, row 1 -> branch 0; eps 1.
  // Branch 1: mean -1, var 8 -> std 3; row 0 {2, 5} -> xhat {1, 2}; weight 2, bias 0 -> {2, 4}.
  // Branch 0: mean 1, var 3 -> std 2; row 1 {3, -1} -> xhat {1, -1}; weight 1, bias 0.5
  //   -> {1.5, -0.5}.
  Tensor x = f64({2.0, 5.0, 3.0, -1.0}, {2, 1, 1, 2});
  Tensor running_mean = f64({1.0, -1.0}, {2, 1});
  Tensor running_var = f64({3.0, 8.0}, {2, 1});
  Tensor y = engine::batch_norm(x, f64({1.0, 2.0}, {2, 1}), f64({0.5, 0.0}, {2, 1}), running_mean,
                                running_var, {{0, 1, 1}, {1, 2, 0}}, false, 0.1, 1.0);
  test::require_close(y, {2.0, 4.0, 1.5, -0.5}, 1e-12, 1e-12, "y");
  // Eval mode leaves the running statistics alone.
  test::require_close(running_mean, {1.0, -1.0}, 0.0, 0.0, "running_mean");
  test::require_close(running_var, {3.0, 8.0}, 0.0, 0.0, "running_var");
}

TEST_CASE("batch_norm: single_branch_route covers the batch with one route", "[batch_norm]") {
  const std::vector<BatchNormRoute> routes = engine::single_branch_route(7, 2);
  REQUIRE(routes.size() == 1);
  CHECK(routes[0].begin == 0);
  CHECK(routes[0].end == 7);
  CHECK(routes[0].branch == 2);
  REQUIRE_THROWS_WITH(engine::single_branch_route(0), Catch::Contains("single_branch_route"));
}

// The acceptance test: rows [0, n/2) -> branch 0 and [n/2, n) -> branch 1 give the same
// output and the same x/weight/bias gradients as two single-branch BNs applied to the halves, and
// each branch's running statistics move independently, to momentum-updated unbiased batch stats
// computed here from the raw data.
TEST_CASE("batch_norm grad: two-branch routing equals two independent single-branch BNs",
          "[batch_norm][grad]") {
  const bool training = GENERATE(true, false);
  const Shape x_shape = GENERATE(Shape{8, 3}, Shape{6, 2, 2, 3});
  INFO((training ? "train" : "eval") << " mode, x " << engine::shape_str(x_shape));
  const int64_t n = x_shape[0], C = x_shape[1], half = n / 2;
  const int64_t HW = x_shape.size() == 4 ? x_shape[2] * x_shape[3] : 1;
  Shape half_shape = x_shape;
  half_shape[0] = half;
  const double momentum = 0.3, eps = 1e-5;

  // Two branches with different parameters and running statistics.
  Tensor x = test::random_leaf(x_shape, 11, -2.0, 3.0);
  Tensor weight = test::random_leaf({2, C}, 12, 0.5, 1.5);
  Tensor bias = test::random_leaf({2, C}, 13);
  const Tensor initial_mean = test::random_leaf({2, C}, 14).detach();
  const Tensor initial_var = test::random_leaf({2, C}, 15, 0.5, 2.0).detach();
  Tensor running_mean = initial_mean.clone(), running_var = initial_var.clone();
  Tensor y = engine::batch_norm(x, weight, bias, running_mean, running_var,
                                {{0, half, 0}, {half, n, 1}}, training, momentum, eps);
  const Tensor dy = upstream(x_shape, 16);
  std::vector<Tensor> grads = engine::grad({y}, {x, weight, bias}, {dy});

  // The same data, split by hand into two single-branch problems.
  std::vector<double> expected_y, expected_dx, expected_dw, expected_db;
  for (int64_t k = 0; k < 2; ++k) {
    Tensor xk = f64_leaf(host_rows(x, k * half, half), half_shape);
    Tensor wk = f64_leaf(host_rows(weight, k, 1), {1, C});
    Tensor bk = f64_leaf(host_rows(bias, k, 1), {1, C});
    Tensor mean_k = f64(host_rows(initial_mean, k, 1), {1, C});
    Tensor var_k = f64(host_rows(initial_var, k, 1), {1, C});
    Tensor yk = engine::batch_norm(xk, wk, bk, mean_k, var_k, engine::single_branch_route(half),
                                   training, momentum, eps);
    std::vector<Tensor> gk =
        engine::grad({yk}, {xk, wk, bk}, {f64(host_rows(dy, k * half, half), half_shape)});
    expected_y = join(expected_y, yk.to_vector());
    expected_dx = join(expected_dx, gk[0].to_vector());
    expected_dw = join(expected_dw, gk[1].to_vector());
    expected_db = join(expected_db, gk[2].to_vector());

    // Running statistics of branch k: its own update only, from its own half of the batch.
    std::vector<double> want_mean = host_rows(initial_mean, k, 1);
    std::vector<double> want_var = host_rows(initial_var, k, 1);
    if (training) {
      const ChannelStats stats = channel_stats(host_rows(x, k * half, half), half, C, HW);
      for (int64_t c = 0; c < C; ++c) {
        want_mean[c] = (1 - momentum) * want_mean[c] + momentum * stats.mean[c];
        want_var[c] = (1 - momentum) * want_var[c] + momentum * stats.unbiased_var[c];
      }
    }
    test::require_close(host_rows(running_mean, k, 1), want_mean, 1e-13, 1e-12, "running_mean");
    test::require_close(host_rows(running_var, k, 1), want_var, 1e-13, 1e-12, "running_var");
    test::require_close(mean_k, want_mean, 1e-13, 1e-12, "single-branch running_mean");
    test::require_close(var_k, want_var, 1e-13, 1e-12, "single-branch running_var");
  }
  test::require_close(y, expected_y, 1e-12, 1e-12, "y");
  test::require_close(grads[0], expected_dx, 1e-12, 1e-12, "dx");
  test::require_close(grads[1], expected_dw, 1e-12, 1e-12, "dweight");
  test::require_close(grads[2], expected_db, 1e-12, 1e-12, "dbias");
}

TEST_CASE("batch_norm: training with unused branch leaves its running stats untouched",
          "[batch_norm]") {
  Tensor x = test::random_leaf({6, 2}, 21).detach();
  Tensor weight = Tensor::ones({3, 2}, DType::F64), bias = Tensor::zeros({3, 2}, DType::F64);
  Tensor running_mean = f64({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor running_var = f64({1, 2, 3, 4, 5, 6}, {3, 2});
  engine::batch_norm(x, weight, bias, running_mean, running_var, {{0, 3, 2}, {3, 6, 0}}, true, 0.1,
                     1e-5);
  test::require_close(host_rows(running_mean, 1, 1), {3, 4}, 0.0, 0.0, "branch 1 mean");
  test::require_close(host_rows(running_var, 1, 1), {3, 4}, 0.0, 0.0, "branch 1 var");
  CHECK(host_rows(running_mean, 0, 1) != std::vector<double>{1, 2});
  CHECK(host_rows(running_mean, 2, 1) != std::vector<double>{5, 6});
}

// ---- finite-difference gradient checks (f64) --------------------------------------------------

namespace {

// Gradient check of batch_norm over x, weight, bias; the running statistics are buffers (in
// training they move on every call, which does not change the output).
void check_batch_norm_grad(const Shape& x_shape, int64_t K,
                           const std::vector<BatchNormRoute>& routes, bool training,
                           uint64_t seed) {
  const int64_t C = x_shape[1];
  Tensor x = test::random_leaf(x_shape, seed, -2.0, 2.0);
  Tensor weight = test::random_leaf({K, C}, seed + 1, 0.5, 1.5);
  Tensor bias = test::random_leaf({K, C}, seed + 2);
  Tensor running_mean = test::random_leaf({K, C}, seed + 3).detach();
  Tensor running_var = test::random_leaf({K, C}, seed + 4, 0.5, 2.0).detach();
  test::require_gradcheck(
      [&](const std::vector<Tensor>& in) {
        return engine::batch_norm(in[0], in[1], in[2], running_mean, running_var, routes, training,
                                  0.1, 1e-5);
      },
      {x, weight, bias});
}

}  // namespace

TEST_CASE("batch_norm grad: batch_norm1d training, one branch", "[batch_norm][grad]") {
  check_batch_norm_grad({5, 3}, 1, engine::single_branch_route(5), true, 100);
}

TEST_CASE("batch_norm grad: batch_norm2d training, two branches", "[batch_norm][grad]") {
  check_batch_norm_grad({4, 2, 2, 3}, 2, {{0, 2, 1}, {2, 4, 0}}, true, 200);
}

TEST_CASE("batch_norm grad: batch_norm1d training, three branches with one unused",
          "[batch_norm][grad]") {
  check_batch_norm_grad({6, 2}, 3, {{0, 3, 2}, {3, 6, 0}}, true, 300);
}

TEST_CASE("batch_norm grad: batch_norm2d training, three routes of unequal size",
          "[batch_norm][grad]") {
  check_batch_norm_grad({5, 2, 1, 2}, 3, {{0, 1, 0}, {1, 4, 2}, {4, 5, 1}}, true, 400);
}

TEST_CASE("batch_norm grad: batch_norm1d eval, one branch", "[batch_norm][grad]") {
  check_batch_norm_grad({4, 3}, 1, engine::single_branch_route(4), false, 500);
}

TEST_CASE("batch_norm grad: batch_norm2d eval, three branches with one unused",
          "[batch_norm][grad]") {
  check_batch_norm_grad({3, 2, 2, 2}, 3, {{0, 1, 1}, {1, 3, 2}}, false, 600);
}

TEST_CASE("batch_norm grad: an input gradient alone runs no weight gradient",
          "[batch_norm][grad]") {
  Tensor x = test::random_leaf({4, 2}, 31);
  Tensor weight = test::random_leaf({1, 2}, 32), bias = test::random_leaf({1, 2}, 33);
  Tensor running_mean = Tensor::zeros({1, 2}, DType::F64);
  Tensor running_var = Tensor::ones({1, 2}, DType::F64);
  Tensor y = engine::batch_norm(x, weight, bias, running_mean, running_var,
                                engine::single_branch_route(4), true, 0.1, 1e-5);
  engine::GradTrace trace;
  engine::grad({y}, {x}, {upstream({4, 2}, 34)});
  CHECK(trace.contains("batch_norm:0"));
  CHECK_FALSE(trace.contains("batch_norm:1"));
  CHECK_FALSE(trace.contains("batch_norm:2"));
}

// ---- argument errors ---------------------------------------------------------------------------

TEST_CASE("batch_norm: bad shapes, routes and options are errors naming the op", "[batch_norm]") {
  const Tensor x = Tensor::zeros({4, 2}, DType::F64);
  const Tensor p1 = Tensor::ones({1, 2}, DType::F64), p2 = Tensor::ones({2, 2}, DType::F64);
  auto bn = [](const Tensor& xx, const Tensor& w, const std::vector<BatchNormRoute>& routes,
               bool training = true, double momentum = 0.1, double eps = 1e-5) {
    Tensor mean = Tensor::zeros(w.shape(), w.dtype()), var = Tensor::ones(w.shape(), w.dtype());
    return engine::batch_norm(xx, w, w, mean, var, routes, training, momentum, eps);
  };
  const auto all = engine::single_branch_route(4);
  using Catch::Contains;

  SECTION("x must be 2-D or 4-D") {
    REQUIRE_THROWS_WITH(bn(Tensor::zeros({4, 2, 3}, DType::F64), p1, all), Contains("batch_norm"));
  }
  SECTION("parameters must be [K, C]") {
    REQUIRE_THROWS_WITH(bn(x, Tensor::ones({1, 3}, DType::F64), all), Contains("batch_norm"));
    REQUIRE_THROWS_WITH(bn(x, Tensor::ones({2}, DType::F64), all), Contains("batch_norm"));
    Tensor mean = Tensor::zeros({2, 2}, DType::F64), var = Tensor::ones({1, 2}, DType::F64);
    REQUIRE_THROWS_WITH(engine::batch_norm(x, p1, p1, mean, var, all, true, 0.1, 1e-5),
                        Contains("running_mean"));
  }
  SECTION("parameters must match x's dtype") {
    REQUIRE_THROWS_WITH(bn(x, Tensor::ones({1, 2}, DType::F32), all), Contains("batch_norm"));
  }
  SECTION("routes must cover [0, N) in order without overlap") {
    REQUIRE_THROWS_WITH(bn(x, p2, {{0, 2, 0}}), Contains("batch_norm"));             // short
    REQUIRE_THROWS_WITH(bn(x, p2, {{0, 3, 0}, {2, 4, 1}}), Contains("batch_norm"));  // overlap
    REQUIRE_THROWS_WITH(bn(x, p2, {{2, 4, 0}, {0, 2, 1}}), Contains("batch_norm"));  // order
    REQUIRE_THROWS_WITH(bn(x, p2, {{0, 2, 0}, {2, 5, 1}}), Contains("batch_norm"));  // past N
    REQUIRE_THROWS_WITH(bn(x, p2, {{0, 0, 0}, {0, 4, 1}}), Contains("batch_norm"));  // empty
    REQUIRE_THROWS_WITH(bn(x, p2, {}), Contains("batch_norm"));
  }
  SECTION("branches must exist and be named at most once") {
    REQUIRE_THROWS_WITH(bn(x, p2, {{0, 2, 0}, {2, 4, 2}}), Contains("branch 2"));
    REQUIRE_THROWS_WITH(bn(x, p2, {{0, 2, -1}, {2, 4, 0}}), Contains("batch_norm"));
    REQUIRE_THROWS_WITH(bn(x, p2, {{0, 2, 1}, {2, 4, 1}}), Contains("more than once"));
  }
  SECTION("training needs more than one value per channel in every route") {
    REQUIRE_THROWS_WITH(bn(x, p2, {{0, 1, 0}, {1, 4, 1}}), Contains("more than one value"));
    REQUIRE_NOTHROW(bn(x, p2, {{0, 1, 0}, {1, 4, 1}}, false));
  }
  SECTION("momentum in [0, 1] and eps > 0") {
    REQUIRE_THROWS_WITH(bn(x, p1, all, true, 1.5), Contains("momentum"));
    REQUIRE_THROWS_WITH(bn(x, p1, all, true, 0.1, 0.0), Contains("eps"));
  }
}
