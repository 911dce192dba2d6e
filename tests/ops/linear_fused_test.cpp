// linear_relu and linear_l2_normalize on the CPU: cases worked by hand, the f64 ops against
// the unfused ones over odd shapes, finite-difference gradient checks in f64, and the errors.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "tests/support/allclose.h"
#include "tests/support/gradcheck.h"
#include "tests/support/tensors.h"

using engine::DType;
using engine::Tensor;

namespace {

Tensor random_f64(const engine::Shape& shape, uint64_t seed) {
  engine::Generator gen(seed);
  Tensor t = engine::uniform(shape, -1.0, 1.0, gen, DType::F64);
  t.set_requires_grad(true);
  return t;
}

}  // namespace

// z = x W^T + b = [3, -1, 0; -1, -3, 0], so y = [3, 0, 0; 0, 0, 0]; with dy = 1 only z(0, 0)
// passes (relu'(0) = 0 at z(0, 2)): dz = e_00, dx = dz W = [1, 1; 0, 0], dW = dz^T x = [1, 2; 0,
// 0; 0, 0], db = [1, 0, 0].
TEST_CASE("linear_relu: a case worked by hand", "[linear_relu]") {
  const Tensor x = test::f64_leaf({1, 2, -1, 0}, {2, 2});
  const Tensor w = test::f64_leaf({1, 1, 2, -1, 0, 0}, {3, 2});
  const Tensor b = test::f64_leaf({0, -1, 0}, {3});
  const Tensor y = engine::linear_relu(x, w, b);
  REQUIRE(y.to_vector() == std::vector<double>{3, 0, 0, 0, 0, 0});
  const std::vector<Tensor> g = engine::grad({y}, {x, w, b}, {Tensor::ones({2, 3}, DType::F64)});
  REQUIRE(g[0].to_vector() == std::vector<double>{1, 1, 0, 0});
  REQUIRE(g[1].to_vector() == std::vector<double>{1, 2, 0, 0, 0, 0});
  REQUIRE(g[2].to_vector() == std::vector<double>{1, 0, 0});
}

// z = [3, 4]: norm 5, y = [0.6, 0.8]. dy = [1, 0]: dz = (dy - y <y, dy>) / 5 = [0.128, -0.096],
// dx = dz W = [0.384, 0], dW = dz^T x = [0.128, 0; -0.096, 0], db = dz.
TEST_CASE("linear_l2_normalize: a case worked by hand", "[linear_l2_normalize]") {
  const Tensor x = test::f64_leaf({1, 0}, {1, 2});
  const Tensor w = test::f64_leaf({3, 0, 0, 0}, {2, 2});
  const Tensor b = test::f64_leaf({0, 4}, {2});
  const Tensor y = engine::linear_l2_normalize(x, w, b);
  test::require_close(y, std::vector<double>{0.6, 0.8}, 1e-15, 0.0, "y");
  const std::vector<Tensor> g = engine::grad({y}, {x, w, b}, {test::f64({1, 0}, {1, 2})});
  test::require_close(g[0], std::vector<double>{0.384, 0}, 1e-15, 0.0, "dx");
  test::require_close(g[1], std::vector<double>{0.128, 0, -0.096, 0}, 1e-15, 0.0, "dw");
  test::require_close(g[2], std::vector<double>{0.128, -0.096}, 1e-15, 0.0, "db");
}

TEST_CASE("linear_relu and linear_l2_normalize: equal the unfused ops in f64 over odd shapes",
          "[linear_relu][linear_l2_normalize]") {
  struct Case {
    int64_t m, k, n;
    bool bias;
  };
  uint64_t seed = 40;
  for (const Case& c : std::vector<Case>{
           {1, 1, 1, true}, {3, 7, 5, true}, {9, 33, 17, false}, {2, 130, 129, true}}) {
    INFO("m " << c.m << " k " << c.k << " n " << c.n << (c.bias ? "" : " no bias"));
    const Tensor x = random_f64({c.m, c.k}, seed++), w = random_f64({c.n, c.k}, seed++);
    const Tensor b = c.bias ? random_f64({c.n}, seed++) : Tensor();
    std::vector<Tensor> inputs = {x, w};
    if (c.bias) inputs.push_back(b);
    const Tensor dy = random_f64({c.m, c.n}, seed++).detach();
    const std::vector<std::pair<Tensor, Tensor>> pairs = {
        {engine::linear_relu(x, w, b), engine::relu(engine::linear(x, w, b))},
        {engine::linear_l2_normalize(x, w, b), engine::l2_normalize(engine::linear(x, w, b))}};
    for (const auto& [fused, plain] : pairs) {
      // f64: the plain-loop GEMM and Eigen's differ only in rounding order.
      test::require_close(fused, plain, 1e-12, 1e-12, "forward");
      const std::vector<Tensor> gf = engine::grad({fused}, inputs, {dy});
      const std::vector<Tensor> gp = engine::grad({plain}, inputs, {dy});
      for (size_t i = 0; i < inputs.size(); ++i) {
        test::require_close(gf[i], gp[i], 1e-12, 1e-12, "gradient " + std::to_string(i));
      }
    }
  }
}

TEST_CASE("linear_relu and linear_l2_normalize grad: finite differences in f64",
          "[linear_relu][linear_l2_normalize]") {
  const std::vector<Tensor> inputs = {random_f64({4, 6}, 51), random_f64({5, 6}, 52),
                                      random_f64({5}, 53)};
  test::require_gradcheck(
      [](const std::vector<Tensor>& in) { return engine::linear_relu(in[0], in[1], in[2]); },
      inputs);
  test::require_gradcheck(
      [](const std::vector<Tensor>& in) {
        return engine::linear_l2_normalize(in[0], in[1], in[2]);
      },
      inputs);
}

TEST_CASE("linear_relu and linear_l2_normalize: errors name the op", "[linear_relu]") {
  const Tensor x = random_f64({2, 3}, 1);
  REQUIRE_THROWS_WITH(engine::linear_relu(x, random_f64({4, 2}, 2), Tensor()),
                      Catch::Contains("linear"));
  REQUIRE_THROWS_WITH(engine::linear_l2_normalize(x, random_f64({4, 3}, 3), Tensor(), 0.0),
                      Catch::Contains("linear_l2_normalize") && Catch::Contains("eps"));
  REQUIRE_THROWS_WITH(engine::linear_relu(Tensor::zeros({2, 0}, DType::F64),
                                          Tensor::zeros({4, 0}, DType::F64), Tensor()),
                      Catch::Contains("linear_relu") && Catch::Contains("no features"));
}
