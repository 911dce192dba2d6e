// l2_normalize: rows divided by max(||x_i||, eps); gradient (I - y y^T) / ||x|| on the normal
// branch and 1/eps on the clamped one.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/tensor.h"
#include "tests/support/allclose.h"
#include "tests/support/gradcheck.h"

using engine::DType;
using engine::Tensor;

TEST_CASE("l2_normalize: hand-computed rows, a zero row and a row below eps", "[l2_normalize]") {
  // [3, 4] has norm 5 -> [0.6, 0.8]; [0, 0] stays 0 (divided by eps, not by 0);
  // [3e-13, 4e-13] has norm 5e-13 < eps = 1e-12 -> divided by eps: [0.3, 0.4].
  for (DType dtype : {DType::F64, DType::F32}) {
    Tensor x = Tensor::from_vector({3.0, 4.0, 0.0, 0.0, 3e-13, 4e-13}, {3, 2}, dtype);
    const double tol = dtype == DType::F64 ? 1e-15 : 1e-6;
    test::require_close(engine::l2_normalize(x), {0.6, 0.8, 0.0, 0.0, 0.3, 0.4}, tol, tol, "y");
  }
}

TEST_CASE("l2_normalize: hand-computed gradient (I - y y^T) dy / ||x||", "[l2_normalize][grad]") {
  // x = [3, 4], y = [0.6, 0.8], dy = [1, 0]: <y, dy> = 0.6,
  // dx = ([1, 0] - 0.6 [0.6, 0.8]) / 5 = [0.64, -0.48] / 5 = [0.128, -0.096].
  Tensor x = Tensor::from_vector({3.0, 4.0}, {1, 2}, DType::F64);
  x.set_requires_grad(true);
  Tensor dy = Tensor::from_vector({1.0, 0.0}, {1, 2}, DType::F64);
  Tensor dx = engine::grad({engine::l2_normalize(x)}, {x}, {dy})[0];
  test::require_close(dx, {0.128, -0.096}, 1e-15, 1e-14, "dx");
}

TEST_CASE("l2_normalize: normalized rows have unit norm", "[l2_normalize]") {
  Tensor x = test::random_leaf({5, 7}, 1, -3.0, 3.0).detach();
  const std::vector<double> y = engine::l2_normalize(x).to_vector();
  for (int i = 0; i < 5; ++i) {
    double squares = 0.0;
    for (int d = 0; d < 7; ++d) squares += y[i * 7 + d] * y[i * 7 + d];
    CHECK(std::sqrt(squares) == Approx(1.0).epsilon(1e-14));
  }
}

TEST_CASE("l2_normalize grad: random rows on the normal branch", "[l2_normalize][grad]") {
  const int64_t D = GENERATE(1, 3, 8);
  // Entries in [0.2, 1) keep every norm far from eps.
  Tensor x = test::random_leaf({4, D}, 10 + D, 0.2, 1.0);
  test::require_gradcheck([](const std::vector<Tensor>& in) { return engine::l2_normalize(in[0]); },
                          {x});
}

TEST_CASE("l2_normalize grad: rows on both sides of a large eps", "[l2_normalize][grad]") {
  // eps = 1: row 0 (norm ~0.37) and row 2 (norm ~0.5) are divided by the constant 1, rows 1 and 3
  // (norms 5 and ~2.4) by their norm; none is near the kink at norm = 1.
  Tensor x = Tensor::from_vector({0.2, -0.1, 0.3, 3.0, 4.0, 0.0, 0.0, 0.5, 0.0, -1.5, 1.0, 1.6},
                                 {4, 3}, DType::F64);
  x.set_requires_grad(true);
  test::require_gradcheck(
      [](const std::vector<Tensor>& in) { return engine::l2_normalize(in[0], 1.0); }, {x});
}

TEST_CASE("l2_normalize: bad shapes and eps are errors naming the op", "[l2_normalize]") {
  using Catch::Contains;
  REQUIRE_THROWS_WITH(engine::l2_normalize(Tensor::ones({4}, DType::F64)),
                      Contains("l2_normalize"));
  REQUIRE_THROWS_WITH(engine::l2_normalize(Tensor::ones({2, 3, 4}, DType::F64)),
                      Contains("l2_normalize"));
  REQUIRE_THROWS_WITH(engine::l2_normalize(Tensor::ones({2, 3}, DType::F64), 0.0),
                      Contains("l2_normalize"));
  REQUIRE_THROWS_WITH(engine::l2_normalize(Tensor::arange(4).reshape({2, 2})),
                      Contains("l2_normalize"));
}
