// Scalar and unary ops (add_scalar, mul_scalar, neg, relu, exp, log, sqrt, pow, abs, sign, clamp):
// hand-computed forward cases, f64 gradient checks away from kinks, the conventions at the kinks
// (relu'(0) = abs'(0) = 0, sign' = 0, clamp passes the gradient at its edges), and errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/tensor.h"
#include "kernels/unary/unary.h"
#include "tests/support/allclose.h"
#include "tests/support/gradcheck.h"
#include "tests/support/tensors.h"

using engine::DType;
using engine::Shape;
using engine::Tensor;
using test::f64;
using test::f64_leaf;

namespace {

// dL/dx of L = sum(f(x)), i.e. f'(x) elementwise.
std::vector<double> derivative(Tensor (*f)(const Tensor&), const Tensor& x) {
  return engine::grad({engine::sum(f(x))}, {x})[0].to_vector();
}

// Values away from every kink and inside every domain (all positive, none near 0 or 1).
const std::vector<double> kPositive{0.3, 0.7, 1.4, 2.2, 0.9, 1.8};
// Signed values, none within 0.1 of 0.
const std::vector<double> kSigned{-1.3, -0.4, 0.2, 0.8, -0.7, 1.5};

}  // namespace

TEST_CASE("unary kernel: relu and its backward on raw arrays", "[relu]") {
  using engine::kernels::UnaryOp;
  std::vector<float> x{-2.0f, -0.5f, 0.0f, 1.5f}, y(4), g{1, 1, 1, 1}, dx(4);
  engine::kernels::unary_cpu<float>(UnaryOp::Relu, x.data(), 4, {}, y.data());
  REQUIRE(y == std::vector<float>{0, 0, 0, 1.5f});
  engine::kernels::unary_backward_cpu<float>(UnaryOp::Relu, x.data(), nullptr, g.data(), 4, {},
                                             dx.data());
  REQUIRE(dx == std::vector<float>{0, 0, 0, 1});  // relu'(0) = 0
}

TEST_CASE("add_scalar, mul_scalar, neg: hand-computed", "[add_scalar][mul_scalar][neg]") {
  Tensor x = f64({1, -2, 3.5}, {3});
  test::require_close(engine::add_scalar(x, 0.5), {1.5, -1.5, 4}, 0, 0, "add_scalar");
  test::require_close(engine::mul_scalar(x, -2), {-2, 4, -7}, 0, 0, "mul_scalar");
  test::require_close(engine::neg(x), {-1, 2, -3.5}, 0, 0, "neg");
  test::require_close(x * 2.0 - 1.0, {1, -5, 6}, 0, 0, "operators");
}

TEST_CASE("relu, abs, sign: hand-computed, including 0", "[relu][abs][sign]") {
  Tensor x = f64({-2, -0.5, 0, 1.5}, {2, 2});
  Tensor r = engine::relu(x);
  REQUIRE(r.shape() == Shape{2, 2});
  test::require_close(r, {0, 0, 0, 1.5}, 0, 0, "relu");
  test::require_close(engine::abs(x), {2, 0.5, 0, 1.5}, 0, 0, "abs");
  test::require_close(engine::sign(x), {-1, -1, 0, 1}, 0, 0, "sign");
}

TEST_CASE("exp, log, sqrt, pow: hand-computed", "[exp][log][sqrt][pow]") {
  const double e = std::exp(1.0);
  test::require_close(engine::exp(f64({0, 1, -1}, {3})), {1, e, 1 / e}, 1e-15, 1e-15, "exp");
  test::require_close(engine::log(f64({1, e, 1 / e}, {3})), {0, 1, -1}, 1e-15, 1e-15, "log");
  test::require_close(engine::sqrt(f64({4, 9, 0.25}, {3})), {2, 3, 0.5}, 0, 0, "sqrt");
  test::require_close(engine::pow(f64({2, 3, -1}, {3}), 3), {8, 27, -1}, 0, 0, "pow 3");
  test::require_close(engine::pow(f64({4, 16}, {2}), 0.5), {2, 4}, 0, 0, "pow 0.5");
  test::require_close(engine::pow(f64({2, 4}, {2}), -1), {0.5, 0.25}, 0, 0, "pow -1");
}

TEST_CASE("clamp: hand-computed, f32", "[clamp]") {
  Tensor x = Tensor::from_vector({-2, 0, 0.5, 1, 3}, {5}, DType::F32);
  Tensor y = engine::clamp(x, 0, 1);
  REQUIRE(y.dtype() == DType::F32);
  test::require_close(y, {0, 0, 0.5, 1, 1}, 0, 0, "clamp");
}

TEST_CASE("neg: a transposed input keeps its logical order", "[neg]") {
  // x = [[0, 1], [2, 3]]; x^T = [[0, 2], [1, 3]]; neg(x^T) = [[0, -2], [-1, -3]].
  Tensor xt = f64({0, 1, 2, 3}, {2, 2}).transpose(0, 1);
  test::require_close(engine::neg(xt), {0, -2, -1, -3}, 0, 0, "neg of a transpose");
}

TEST_CASE("add_scalar, mul_scalar, neg grad", "[add_scalar][mul_scalar][neg][grad]") {
  auto add = [](const std::vector<Tensor>& in) { return engine::add_scalar(in[0], 2.5); };
  auto mul = [](const std::vector<Tensor>& in) { return engine::mul_scalar(in[0], -1.5); };
  auto neg = [](const std::vector<Tensor>& in) { return engine::neg(in[0]); };
  test::require_gradcheck(add, {test::random_leaf({2, 3}, 1)});
  test::require_gradcheck(mul, {test::random_leaf({2, 3}, 2)});
  test::require_gradcheck(neg, {test::random_leaf({2, 3}, 3)});
}

TEST_CASE("relu grad, abs grad: inputs away from 0", "[relu][abs][grad]") {
  auto relu = [](const std::vector<Tensor>& in) { return engine::relu(in[0]); };
  auto abs = [](const std::vector<Tensor>& in) { return engine::abs(in[0]); };
  test::require_gradcheck(relu, {f64_leaf(kSigned, {2, 3})});
  test::require_gradcheck(abs, {f64_leaf(kSigned, {2, 3})});
}

TEST_CASE("exp grad, log grad, sqrt grad", "[exp][log][sqrt][grad]") {
  auto exp = [](const std::vector<Tensor>& in) { return engine::exp(in[0]); };
  auto log = [](const std::vector<Tensor>& in) { return engine::log(in[0]); };
  auto sqrt = [](const std::vector<Tensor>& in) { return engine::sqrt(in[0]); };
  test::require_gradcheck(exp, {f64_leaf(kSigned, {2, 3})});
  test::require_gradcheck(log, {f64_leaf(kPositive, {2, 3})});
  test::require_gradcheck(sqrt, {f64_leaf(kPositive, {3, 2})});
}

TEST_CASE("pow grad: integer, fractional and negative exponents", "[pow][grad]") {
  for (double p : {2.0, 3.0, 0.5, -1.5}) {
    auto f = [p](const std::vector<Tensor>& in) { return engine::pow(in[0], p); };
    test::require_gradcheck(f, {f64_leaf(kPositive, {2, 3})});
  }
  auto cube = [](const std::vector<Tensor>& in) { return engine::pow(in[0], 3.0); };
  test::require_gradcheck(cube, {f64_leaf(kSigned, {6})});
}

TEST_CASE("clamp grad: inside and outside the interval", "[clamp][grad]") {
  auto f = [](const std::vector<Tensor>& in) { return engine::clamp(in[0], -0.5, 1.0); };
  // -1.3 and 1.5 are clamped (gradient 0), the rest pass; none is near -0.5 or 1.0.
  test::require_gradcheck(f, {f64_leaf(kSigned, {2, 3})});
}

TEST_CASE("relu, abs, sign, clamp, pow grad at the kinks: relu'(0) = abs'(0) = 0, sign' = 0",
          "[relu][abs][sign][clamp][pow][grad]") {
  Tensor x = f64_leaf({-1, 0, 2}, {3});
  REQUIRE(derivative(engine::relu, x) == std::vector<double>{0, 0, 1});
  REQUIRE(derivative(engine::abs, x) == std::vector<double>{-1, 0, 1});
  REQUIRE(derivative(engine::sign, x) == std::vector<double>{0, 0, 0});
  // clamp to [0, 2]: x = 0 and x = 2 sit on the edges and get the gradient; -1 does not.
  std::vector<double> dclamp =
      engine::grad({engine::sum(engine::clamp(x, 0, 2))}, {x})[0].to_vector();
  REQUIRE(dclamp == std::vector<double>{0, 1, 1});
  // d/dx x^0 = 0 everywhere, also at x = 0 (not 0 * inf).
  std::vector<double> dpow0 = engine::grad({engine::sum(engine::pow(x, 0))}, {x})[0].to_vector();
  REQUIRE(dpow0 == std::vector<double>{0, 0, 0});
  // sqrt'(4) = 0.5 / 2 = 0.25.
  Tensor four = f64_leaf({4}, {1});
  REQUIRE(derivative(engine::sqrt, four) == std::vector<double>{0.25});
}

TEST_CASE("relu, exp, clamp errors: integer inputs, clamp with low > high", "[relu][exp][clamp]") {
  Tensor idx = Tensor::from_indices({1, 2}, {2});
  REQUIRE_THROWS_WITH(engine::relu(idx), Catch::Contains("relu"));
  REQUIRE_THROWS_WITH(engine::exp(idx), Catch::Contains("exp"));
  REQUIRE_THROWS_WITH(engine::clamp(f64({1}, {1}), 2, 1), Catch::Contains("clamp"));
}
