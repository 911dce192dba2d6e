// conv2d_pool_relu on the CPU: a case worked by hand (window routing, a tie, ReLU at 0 and below,
// the backward through the window index), the f64 op against the unfused ops over odd shapes,
// finite-difference gradient checks of the fused backward in f64, and the errors.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "kernels/conv2d_pool_relu/conv2d_pool_relu.h"
#include "tests/ops/fused_test_util.h"
#include "tests/support/allclose.h"
#include "tests/support/gradcheck.h"
#include "tests/support/tensors.h"

using engine::Conv2dOptions;
using engine::DType;
using engine::Tensor;

namespace {

using fused_test::conv_options;

Tensor random_f64(const engine::Shape& shape, uint64_t seed, bool leaf) {
  engine::Generator gen(seed);
  Tensor t = engine::uniform(shape, -1.0, 1.0, gen, DType::F64);
  t.set_requires_grad(leaf);
  return t;
}

Tensor unfused(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dOptions& o) {
  return engine::relu(engine::max_pool2d(engine::conv2d(x, w, b, o), engine::Pool2dOptions{}));
}

}  // namespace

// A 1x1 conv with weight 2 and bias -1 makes z = 2x - 1, so every window is easy to read:
//   x = [0 1 3 3]    z = [-1  1  5  5]    window (0,0): -1 1 / 7 1       max 7, cell 2
//       [4 1 0 0]        [ 7  1 -1 -1]    window (0,1):  5 5 / -1 -1     tie: the first, cell 0
//       [0 0 .25 .5]     [-1 -1 -.5 0]    window (1,0): all -1           relu 0, no gradient
//       [0 0 .5 .25]     [-1 -1  0 -.5]   window (1,1): max 0            relu'(0) = 0: none
// dy = [10 20; 30 40] reaches z only at (1,0) (10) and (0,2) (20): dx = 2 dz, so dx(1,0) = 20
// and dx(0,2) = 40; dw = sum dz x = 10*4 + 20*3 = 100; db = 10 + 20 = 30.
TEST_CASE("conv2d_pool_relu: a case worked by hand", "[conv2d_pool_relu]") {
  const std::vector<double> xv = {0, 1, 3, 3, 4, 1, 0, 0, 0, 0, 0.25, 0.5, 0, 0, 0.5, 0.25};
  const Tensor x = test::f64_leaf(xv, {1, 1, 4, 4});
  const Tensor w = test::f64_leaf({2.0}, {1, 1, 1, 1});
  const Tensor b = test::f64_leaf({-1.0}, {1});
  const Tensor y = engine::conv2d_pool_relu(x, w, b, Conv2dOptions{});
  REQUIRE(y.shape() == engine::Shape{1, 1, 2, 2});
  REQUIRE(y.to_vector() == std::vector<double>{7, 5, 0, 0});

  std::vector<double> y_kernel(4);
  std::vector<uint8_t> window(4);
  engine::kernels::Conv2dShape shape;
  shape.N = shape.C = shape.K = shape.R = shape.S = 1;
  shape.H = shape.W = 4;
  const double weight = 2.0, bias = -1.0;
  engine::kernels::conv2d_pool_relu_forward_cpu<double>(shape, xv.data(), &weight, &bias,
                                                        y_kernel.data(), window.data());
  REQUIRE(window ==
          std::vector<uint8_t>{2, 0, engine::kernels::kNoGradient, engine::kernels::kNoGradient});

  const std::vector<Tensor> grads =
      engine::grad({y}, {x, w, b}, {test::f64({10, 20, 30, 40}, {1, 1, 2, 2})});
  std::vector<double> dx(16, 0.0);
  dx[4] = 20;  // (1, 0)
  dx[2] = 40;  // (0, 2)
  REQUIRE(grads[0].to_vector() == dx);
  REQUIRE(grads[1].to_vector() == std::vector<double>{100});
  REQUIRE(grads[2].to_vector() == std::vector<double>{30});
}

TEST_CASE("conv2d_pool_relu: equals relu(max_pool2d(conv2d)) in f64 over odd shapes",
          "[conv2d_pool_relu]") {
  struct Case {
    engine::Shape x, w;
    Conv2dOptions options;
    bool bias;
  };
  const std::vector<Case> cases = {
      {{2, 1, 28, 28}, {4, 1, 5, 5}, conv_options(1, 2), true},     // C2F2's conv1, fewer filters
      {{2, 3, 7, 7}, {4, 3, 5, 5}, conv_options(1, 2), true},       // odd conv output: 7 -> 3
      {{1, 2, 9, 11}, {3, 2, 3, 3}, conv_options(1, 1), false},     // rectangular, no bias
      {{3, 2, 13, 9}, {5, 2, 3, 3}, conv_options(2, 1), true},      // stride 2: 7x5 -> 3x2
      {{1, 3, 10, 10}, {2, 3, 3, 3}, conv_options(1, 2, 2), true},  // dilation 2
      {{2, 5, 5, 6}, {7, 5, 1, 1}, conv_options(1, 0), true},       // 1x1 filters
  };
  uint64_t seed = 10;
  for (const Case& c : cases) {
    INFO("x " << engine::shape_str(c.x) << " w " << engine::shape_str(c.w));
    const Tensor x = random_f64(c.x, seed++, true);
    const Tensor w = random_f64(c.w, seed++, true);
    const Tensor b = c.bias ? random_f64({c.w[0]}, seed++, true) : Tensor();
    const Tensor fused = engine::conv2d_pool_relu(x, w, b, c.options);
    const Tensor plain = unfused(x, w, b, c.options);
    REQUIRE(fused.shape() == plain.shape());
    // f64: the plain-loop conv and the im2col conv differ only in rounding order.
    test::require_close(fused, plain, 1e-12, 1e-12, "forward");
    const Tensor dy = random_f64(plain.shape(), seed++, false);
    std::vector<Tensor> inputs = {x, w};
    if (c.bias) inputs.push_back(b);
    const std::vector<Tensor> fused_grads = engine::grad({fused}, inputs, {dy});
    const std::vector<Tensor> plain_grads = engine::grad({plain}, inputs, {dy});
    for (size_t i = 0; i < inputs.size(); ++i) {
      test::require_close(fused_grads[i], plain_grads[i], 1e-12, 1e-12,
                          "gradient " + std::to_string(i));
    }
  }
}

TEST_CASE("conv2d_pool_relu grad: finite differences in f64", "[conv2d_pool_relu]") {
  // Random inputs: no two cells of a window within the finite-difference step of each other, and
  // no pooled value within it of 0, so the function is smooth where it is checked.
  const Tensor x = random_f64({2, 2, 7, 6}, 31, true);
  const Tensor w = random_f64({3, 2, 3, 3}, 32, true);
  const Tensor b = random_f64({3}, 33, true);
  test::require_gradcheck(
      [](const std::vector<Tensor>& in) {
        return engine::conv2d_pool_relu(in[0], in[1], in[2], conv_options(1, 1));
      },
      {x, w, b});
  test::require_gradcheck(
      [](const std::vector<Tensor>& in) {
        return engine::conv2d_pool_relu(in[0], in[1], Tensor(), conv_options(2, 1));
      },
      {random_f64({1, 3, 11, 9}, 34, true), random_f64({2, 3, 3, 3}, 35, true)});
}

TEST_CASE("conv2d_pool_relu: errors name the op", "[conv2d_pool_relu]") {
  const Tensor x = random_f64({1, 1, 3, 3}, 1, false);
  // 3x3 input, 3x3 filter, no padding: a 1x1 conv output, smaller than the pool window.
  REQUIRE_THROWS_WITH(
      engine::conv2d_pool_relu(x, random_f64({1, 1, 3, 3}, 2, false), Tensor(), Conv2dOptions{}),
      Catch::Contains("conv2d_pool_relu") && Catch::Contains("1x1"));
  REQUIRE_THROWS_WITH(
      engine::conv2d_pool_relu(x, random_f64({1, 2, 1, 1}, 3, false), Tensor(), Conv2dOptions{}),
      Catch::Contains("conv2d"));
}
