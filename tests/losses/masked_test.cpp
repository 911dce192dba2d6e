// The subset reductions the DML losses share (losses/masked.h), tested on their own: values and
// gradients by hand, the edge cases the losses rely on (an empty set, no active hinge, a zero
// row), and an f64 finite-difference check.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "losses/masked.h"
#include "tests/losses/helpers.h"
#include "tests/support/allclose.h"
#include "tests/support/gradcheck.h"

using engine::Tensor;
using losses_test::f64;

TEST_CASE("masked log1p_sum_exp: hand-computed values and gradient", "[losses][masked]") {
  // Row 0 sums its members 0 and ln 2 (not the 5): log(1 + e^0 + e^ln2) = log 4. Row 1 has no
  // member: log 1 = 0. The gradient of a member is its softmax weight in [1, e^z...]: 1/4 and
  // 2/4; a non-member's is exactly 0, however large its z.
  Tensor z = f64({0.0, std::log(2.0), 5.0, 1.0, 2.0, 3.0}, {2, 3});
  z.set_requires_grad(true);
  const std::vector<uint8_t> member = {1, 1, 0, 0, 0, 0};
  const Tensor out = losses::detail::log1p_sum_exp(z, member);
  test::require_close(out, {std::log(4.0), 0.0}, 1e-15, 0, "values");
  const Tensor dz = engine::grad({engine::sum(out)}, {z})[0];
  test::require_close(dz, {0.25, 0.5, 0.0, 0.0, 0.0, 0.0}, 1e-15, 0, "gradient");
}

TEST_CASE("masked log1p_sum_exp: stable for large z", "[losses][masked]") {
  // log(1 + e^1000 + e^999) = 1000 + log(1 + e^-1) + log(1 + e^-1000 / (1 + e^-1)), about
  // 1000.3132617; a direct exp would overflow to inf.
  const Tensor z = f64({1000.0, 999.0}, {1, 2});
  const double expected = 1000.0 + std::log1p(std::exp(-1.0));
  test::require_close(losses::detail::log1p_sum_exp(z, {1, 1}), {expected}, 1e-12, 0, "value");
}

TEST_CASE("masked log1p_sum_exp grad: f64 finite differences", "[losses][masked][grad]") {
  const Tensor z = test::random_leaf({3, 4}, 61, -2.0, 2.0);
  const std::vector<uint8_t> member = {1, 0, 1, 1, 0, 0, 0, 0, 0, 1, 1, 0};
  test::require_gradcheck(
      [&](const std::vector<Tensor>& in) { return losses::detail::log1p_sum_exp(in[0], member); },
      {z});
}

TEST_CASE("masked log1p_sum_exp: a mask of the wrong size is an error", "[losses][masked]") {
  const Tensor z = f64({1, 2, 3, 4}, {2, 2});
  REQUIRE_THROWS_WITH(losses::detail::log1p_sum_exp(z, {1, 0, 1}),
                      Catch::Contains("mask has 3 entries"));
}

TEST_CASE("masked active_mean: the mean of the positive entries, 0 when none", "[losses][masked]") {
  // [0, 2, 0, 4]: two active terms, mean 3, gradient 1/2 on each active entry. A zero entry's
  // gradient is 1/2 as well (the sum's), which is harmless: the hinge relu in front of it
  // passes none back through an inactive term.
  Tensor h = f64({0.0, 2.0, 0.0, 4.0}, {4});
  h.set_requires_grad(true);
  const Tensor mean = losses::detail::active_mean(h);
  CHECK(mean.item() == 3.0);
  test::require_close(engine::grad({mean}, {h})[0], {0.5, 0.5, 0.5, 0.5}, 0, 0, "gradient");
  // No active term: 0, not PyTorch's NaN from an empty mean (robrank turns that NaN into 0).
  Tensor none = f64({0.0, 0.0, 0.0}, {3});
  none.set_requires_grad(true);
  const Tensor zero = losses::detail::active_mean(none);
  CHECK(zero.item() == 0.0);
  test::require_close(engine::grad({zero}, {none})[0], {1.0, 1.0, 1.0}, 0, 0, "gradient, none");
}

TEST_CASE("masked row_norms: Euclidean norms with a zero gradient at a zero row",
          "[losses][masked]") {
  Tensor x = f64({3.0, 4.0, 0.0, 0.0}, {2, 2});
  x.set_requires_grad(true);
  const Tensor norms = losses::detail::row_norms(x);
  REQUIRE(norms.shape() == engine::Shape{2});
  test::require_close(norms, {5.0, 0.0}, 1e-12, 0, "values");
  const Tensor dx = engine::grad({engine::sum(norms)}, {x})[0];
  const std::vector<double> g = dx.to_vector();
  for (double v : g) REQUIRE_FALSE(std::isnan(v));
  test::require_close(dx, {0.6, 0.8, 0.0, 0.0}, 1e-6, 0, "gradient");
}
