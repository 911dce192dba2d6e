// max_pool2d, avg_pool2d, adaptive_avg_pool2d: hand-computed forward and backward cases,
// finite-difference gradients in f64 (tie-free inputs for max), and error messages.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/tensor.h"
#include "kernels/pool/pool.h"
#include "tests/support/allclose.h"
#include "tests/support/gradcheck.h"

namespace {

using engine::DType;
using engine::Pool2dOptions;
using engine::Tensor;

Pool2dOptions pool_options(int64_t kernel_h, int64_t kernel_w, int64_t stride_h, int64_t stride_w,
                           int64_t pad_h = 0, int64_t pad_w = 0) {
  Pool2dOptions o;
  o.kernel_h = kernel_h, o.kernel_w = kernel_w;
  o.stride_h = stride_h, o.stride_w = stride_w;
  o.pad_h = pad_h, o.pad_w = pad_w;
  return o;
}

// 1  5  2  0
// 3  4  8  6
// 7  2  1  9
// 0 -1  3  4
Tensor grid_4x4(double shift = 0.0) {
  std::vector<double> v = {1, 5, 2, 0, 3, 4, 8, 6, 7, 2, 1, 9, 0, -1, 3, 4};
  for (double& e : v) e += shift;
  return Tensor::from_vector(v, {1, 1, 4, 4}, DType::F64);
}

// An f64 leaf whose values are a shuffled ladder with step 2/numel in (-1, 1): no two elements
// are within the finite-difference step of each other, so no max window has a (near) tie.
Tensor distinct_leaf(const engine::Shape& shape, uint64_t seed) {
  const int64_t n = engine::shape_numel(shape);
  std::vector<double> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.0);
  std::shuffle(v.begin(), v.end(), std::mt19937_64(seed));
  for (double& e : v) e = -1.0 + 2.0 * (e + 0.5) / static_cast<double>(n);
  Tensor t = Tensor::from_vector(v, shape, DType::F64);
  t.set_requires_grad(true);
  return t;
}

// dL/dx for L = sum(y * dy), through the op's backward.
Tensor input_grad(const Tensor& x, const Tensor& y, const std::vector<double>& dy) {
  return engine::grad({y}, {x}, {Tensor::from_vector(dy, y.shape(), DType::F64)})[0];
}

}  // namespace

// ---- max_pool2d --------------------------------------------------------------------------------

TEST_CASE("max_pool2d forward: 2x2 windows, stride 2", "[max_pool2d]") {
  // Windows of the 4x4 grid: {1,5,3,4} -> 5, {2,0,8,6} -> 8, {7,2,0,-1} -> 7, {1,9,3,4} -> 9.
  Tensor y = engine::max_pool2d(grid_4x4(), pool_options(2, 2, 2, 2));
  REQUIRE(y.shape() == engine::Shape{1, 1, 2, 2});
  test::require_close(y, {5, 8, 7, 9}, 0, 0);
}

TEST_CASE("max_pool2d forward: padding counts as -inf, not 0", "[max_pool2d]") {
  // Grid minus 10 (all negative). Kernel 3, stride 2, padding 1: output (4 + 2 - 3) / 2 + 1 = 2.
  // Windows cover rows/cols {-1,0,1} and {1,2,3}:
  //   (0,0): {1,5,3,4} - 10 -> -5        (0,1): {5,2,0,4,8,6} - 10 -> -2
  //   (1,0): {3,4,7,2,0,-1} - 10 -> -3   (1,1): {4,8,6,2,1,9,-1,3,4} - 10 -> -1
  // A zero-padding bug would give 0 in the three border windows.
  Tensor y = engine::max_pool2d(grid_4x4(-10.0), pool_options(3, 3, 2, 2, 1, 1));
  REQUIRE(y.shape() == engine::Shape{1, 1, 2, 2});
  test::require_close(y, {-5, -2, -3, -1}, 0, 0);
}

TEST_CASE("max_pool2d grad: ties route dy to the first maximal element", "[max_pool2d][grad]") {
  // One 2x2 window of equal values: row-major order picks (0,0).
  Tensor x = Tensor::from_vector({3, 3, 3, 3}, {1, 1, 2, 2}, DType::F64);
  x.set_requires_grad(true);
  Tensor y = engine::max_pool2d(x, pool_options(2, 2, 2, 2));
  test::require_close(input_grad(x, y, {1.5}), {1.5, 0, 0, 0}, 0, 0);

  // A tie across rows: 2 7 / 7 1 -> the 7 at (0,1) comes first.
  Tensor x2 = Tensor::from_vector({2, 7, 7, 1}, {1, 1, 2, 2}, DType::F64);
  x2.set_requires_grad(true);
  Tensor y2 = engine::max_pool2d(x2, pool_options(2, 2, 2, 2));
  test::require_close(input_grad(x2, y2, {1}), {0, 1, 0, 0}, 0, 0);
}

TEST_CASE("max_pool2d: a NaN in a window is its output and takes its gradient",
          "[max_pool2d][grad]") {
  // Two 2x2 windows side by side (x is 2 x 4):
  //   left  {1, NaN / 5, NaN}: the first NaN in row-major order, (0,1), wins over the larger 5;
  //   right {NaN, 9 / 2, 3}:   a NaN in the first cell is kept against the 9 after it.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = Tensor::from_vector({1, nan, nan, 9, 5, nan, 2, 3}, {1, 1, 2, 4}, DType::F64);
  x.set_requires_grad(true);
  Tensor y = engine::max_pool2d(x, pool_options(2, 2, 2, 2));
  const std::vector<double> out = y.to_vector();
  REQUIRE(out.size() == 2);
  CHECK(std::isnan(out[0]));
  CHECK(std::isnan(out[1]));
  test::require_close(input_grad(x, y, {1, 2}), {0, 1, 2, 0, 0, 0, 0, 0}, 0, 0);
}

TEST_CASE("max_pool2d grad: overlapping windows add their dy at a shared maximum",
          "[max_pool2d][grad]") {
  // x = 1 9 2 / 3 4 5, kernel 2, stride 1: windows {1,9,3,4} and {9,2,4,5} both pick the 9 at
  // (0,1), so dx there is dy0 + dy1 = 1 + 2 = 3.
  Tensor x = Tensor::from_vector({1, 9, 2, 3, 4, 5}, {1, 1, 2, 3}, DType::F64);
  x.set_requires_grad(true);
  Tensor y = engine::max_pool2d(x, pool_options(2, 2, 1, 1));
  test::require_close(y, {9, 9}, 0, 0);
  test::require_close(input_grad(x, y, {1, 2}), {0, 3, 0, 0, 0, 0}, 0, 0);
}

TEST_CASE("max_pool2d grad: finite differences over kernel, stride, padding",
          "[max_pool2d][grad]") {
  auto check = [](const engine::Shape& shape, const Pool2dOptions& options, uint64_t seed) {
    test::require_gradcheck(
        [options](const std::vector<Tensor>& in) { return engine::max_pool2d(in[0], options); },
        {distinct_leaf(shape, seed)});
  };
  check({2, 2, 4, 4}, pool_options(2, 2, 2, 2), 1);
  check({1, 2, 5, 5}, pool_options(3, 3, 2, 2, 1, 1), 2);
  check({2, 1, 5, 6}, pool_options(3, 2, 1, 2, 1, 1), 3);  // non-square, overlapping rows
  check({1, 3, 5, 4}, pool_options(2, 3, 3, 1, 0, 1), 4);  // stride > kernel skips rows
}

TEST_CASE("max_pool2d fast path: bit-identical to the reference, ties, NaN and signed zeros",
          "[max_pool2d]") {
  // The *_fast_cpu kernels the engine runs against the reference loops (kernels/pool/pool.h),
  // compared bit for bit. Values come from a small set, so most windows have ties, and include
  // NaN, -0 and +0; dy includes -0 (the reference turns it into +0) and NaN. Odd sizes leave a
  // last row/column outside every window; 3 x 30 x 29 x 29 crosses the OpenMP threshold.
  using engine::kernels::Pool2dShape;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> palette = {-1.0, -0.0, 0.0, 0.5, 2.0, 2.0, 3.0, nan};
  auto bits_equal = [](const std::vector<double>& a, const std::vector<double>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
  };
  struct Case {
    int64_t N, C, H, W;
  };
  for (const Case& c : {Case{1, 1, 2, 2}, Case{1, 1, 3, 3}, Case{2, 3, 4, 5}, Case{1, 2, 7, 6},
                        Case{2, 1, 28, 28}, Case{1, 1, 2, 9}, Case{3, 30, 29, 29}}) {
    Pool2dShape shape;
    shape.N = c.N, shape.C = c.C, shape.H = c.H, shape.W = c.W;
    INFO("N=" << c.N << " C=" << c.C << " H=" << c.H << " W=" << c.W);
    REQUIRE(engine::kernels::max_pool2d_has_fast_path(shape));
    std::mt19937_64 gen(static_cast<uint64_t>(c.H * 100 + c.W));
    std::uniform_int_distribution<size_t> pick(0, palette.size() - 1);
    std::vector<double> x(static_cast<size_t>(c.N * c.C * c.H * c.W));
    for (double& v : x) v = palette[pick(gen)];
    std::vector<double> dy(static_cast<size_t>(c.N * c.C * shape.out_h() * shape.out_w()));
    for (double& v : dy) v = palette[pick(gen)];

    std::vector<double> y_ref(dy.size(), 7.0), y_fast(dy.size(), -7.0);
    engine::kernels::max_pool2d_forward_cpu(shape, x.data(), y_ref.data());
    engine::kernels::max_pool2d_forward_fast_cpu(shape, x.data(), y_fast.data());
    CHECK(bits_equal(y_fast, y_ref));
    std::vector<double> dx_ref(x.size(), 7.0), dx_fast(x.size(), -7.0);
    engine::kernels::max_pool2d_backward_cpu(shape, x.data(), dy.data(), dx_ref.data());
    engine::kernels::max_pool2d_backward_fast_cpu(shape, x.data(), dy.data(), dx_fast.data());
    CHECK(bits_equal(dx_fast, dx_ref));
  }
  // Every other geometry is not the fast path's: the fast functions hand it to the reference.
  Pool2dShape overlapping;
  overlapping.N = overlapping.C = 1, overlapping.H = overlapping.W = 5;
  overlapping.kernel_h = overlapping.kernel_w = 3, overlapping.pad_h = overlapping.pad_w = 1;
  CHECK_FALSE(engine::kernels::max_pool2d_has_fast_path(overlapping));
  Pool2dShape padded;
  padded.N = padded.C = 1, padded.H = padded.W = 4, padded.pad_h = 1;
  CHECK_FALSE(engine::kernels::max_pool2d_has_fast_path(padded));
}

// ---- avg_pool2d --------------------------------------------------------------------------------

TEST_CASE("avg_pool2d forward: 2x2 windows, stride 2", "[avg_pool2d]") {
  // {1,5,3,4} -> 13/4 = 3.25, {2,0,8,6} -> 16/4 = 4, {7,2,0,-1} -> 8/4 = 2, {1,9,3,4} -> 17/4.
  Tensor y = engine::avg_pool2d(grid_4x4(), pool_options(2, 2, 2, 2));
  REQUIRE(y.shape() == engine::Shape{1, 1, 2, 2});
  test::require_close(y, {3.25, 4, 2, 4.25}, 0, 0);
}

TEST_CASE("avg_pool2d forward: padding counts as zeros in the divisor", "[avg_pool2d]") {
  // x = 1 2 3 / 4 5 6 / 7 8 9, kernel 2, stride 2, padding 1: output (3 + 2 - 2) / 2 + 1 = 2.
  //   (0,0): {1} / 4 = 0.25     (0,1): {2,3} / 4 = 1.25
  //   (1,0): {4,7} / 4 = 2.75   (1,1): {5,6,8,9} / 4 = 7
  Tensor x = Tensor::from_vector({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3}, DType::F64);
  x.set_requires_grad(true);
  Tensor y = engine::avg_pool2d(x, pool_options(2, 2, 2, 2, 1, 1));
  REQUIRE(y.shape() == engine::Shape{1, 1, 2, 2});
  test::require_close(y, {0.25, 1.25, 2.75, 7}, 0, 0);
  // Each pixel lies in exactly one window: dx = dy of that window / 4.
  //   dy = 4 8 / 12 16 -> dx = 1 2 2 / 3 4 4 / 3 4 4
  test::require_close(input_grad(x, y, {4, 8, 12, 16}), {1, 2, 2, 3, 4, 4, 3, 4, 4}, 0, 0);
}

TEST_CASE("avg_pool2d grad: finite differences over kernel, stride, padding",
          "[avg_pool2d][grad]") {
  auto check = [](const engine::Shape& shape, const Pool2dOptions& options, uint64_t seed) {
    test::require_gradcheck(
        [options](const std::vector<Tensor>& in) { return engine::avg_pool2d(in[0], options); },
        {test::random_leaf(shape, seed)});
  };
  check({2, 2, 4, 4}, pool_options(2, 2, 2, 2), 5);
  check({1, 2, 5, 5}, pool_options(3, 3, 2, 2, 1, 1), 6);
  check({2, 1, 5, 6}, pool_options(3, 2, 1, 2, 1, 1), 7);
  check({1, 3, 5, 4}, pool_options(2, 3, 3, 1, 0, 1), 8);
}

// ---- adaptive_avg_pool2d -----------------------------------------------------------------------

TEST_CASE("adaptive_avg_pool2d forward and backward: mean over H, W", "[adaptive_avg_pool2d]") {
  // Channel 0 = 1 2 / 3 4 -> 10/4 = 2.5; channel 1 = 10 20 / 30 60 -> 120/4 = 30.
  // dy = (1, 2) -> dx = 1/4 on channel 0, 2/4 on channel 1.
  Tensor x = Tensor::from_vector({1, 2, 3, 4, 10, 20, 30, 60}, {1, 2, 2, 2}, DType::F64);
  x.set_requires_grad(true);
  Tensor y = engine::adaptive_avg_pool2d(x);
  REQUIRE(y.shape() == engine::Shape{1, 2, 1, 1});
  test::require_close(y, {2.5, 30}, 0, 0);
  test::require_close(input_grad(x, y, {1, 2}), {0.25, 0.25, 0.25, 0.25, 0.5, 0.5, 0.5, 0.5}, 0, 0);
}

TEST_CASE("adaptive_avg_pool2d grad: finite differences", "[adaptive_avg_pool2d][grad]") {
  test::require_gradcheck(
      [](const std::vector<Tensor>& in) { return engine::adaptive_avg_pool2d(in[0]); },
      {test::random_leaf({2, 3, 3, 5}, 9)});
}

TEST_CASE("max_pool2d, avg_pool2d, adaptive_avg_pool2d forward: non-contiguous input",
          "[max_pool2d][avg_pool2d][adaptive_avg_pool2d]") {
  Tensor x = distinct_leaf({2, 3, 6, 5}, 10).detach().transpose(2, 3);  // [2, 3, 5, 6], strided
  REQUIRE_FALSE(x.is_contiguous());
  Pool2dOptions o = pool_options(3, 2, 2, 2, 1, 1);
  test::require_close(engine::max_pool2d(x, o), engine::max_pool2d(x.contiguous(), o), 0, 0);
  test::require_close(engine::avg_pool2d(x, o), engine::avg_pool2d(x.contiguous(), o), 0, 0);
  test::require_close(engine::adaptive_avg_pool2d(x), engine::adaptive_avg_pool2d(x.contiguous()),
                      0, 0);
}

// ---- errors ------------------------------------------------------------------------------------

TEST_CASE("max_pool2d and avg_pool2d errors: bad shapes and options name the op",
          "[max_pool2d][avg_pool2d]") {
  using Catch::Contains;
  Tensor x = Tensor::zeros({1, 2, 4, 4}, DType::F64);
  for (auto op : {&engine::max_pool2d, &engine::avg_pool2d}) {
    const char* name = op == &engine::max_pool2d ? "max_pool2d" : "avg_pool2d";
    INFO(name);
    // Not 4-D.
    REQUIRE_THROWS_WITH(op(Tensor::zeros({2, 4, 4}, DType::F64), pool_options(2, 2, 2, 2)),
                        Contains(name) && Contains("4-D") && Contains("[2, 4, 4]"));
    // Padding above half the kernel.
    REQUIRE_THROWS_WITH(op(x, pool_options(2, 2, 2, 2, 2, 0)),
                        Contains(name) && Contains("padding") && Contains("half the kernel"));
    // Kernel larger than the padded input: 5 > 2 + 2*1.
    REQUIRE_THROWS_WITH(
        op(Tensor::zeros({1, 1, 2, 2}, DType::F64), pool_options(5, 5, 1, 1, 1, 1)),
        Contains(name) && Contains("larger than the padded input") && Contains("[1, 1, 2, 2]"));
    // Zero stride, zero kernel.
    REQUIRE_THROWS_WITH(op(x, pool_options(2, 2, 0, 2)), Contains(name) && Contains("stride"));
    REQUIRE_THROWS_WITH(op(x, pool_options(0, 2, 1, 1)), Contains(name) && Contains("kernel"));
  }
}

TEST_CASE("adaptive_avg_pool2d errors: non-4-D or integer input", "[adaptive_avg_pool2d]") {
  using Catch::Contains;
  REQUIRE_THROWS_WITH(engine::adaptive_avg_pool2d(Tensor::zeros({2, 4}, DType::F64)),
                      Contains("adaptive_avg_pool2d") && Contains("[2, 4]"));
  REQUIRE_THROWS_WITH(engine::adaptive_avg_pool2d(Tensor::from_indices({1, 2, 3, 4}, {1, 1, 2, 2})),
                      Contains("adaptive_avg_pool2d"));
}
