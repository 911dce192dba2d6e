// Generalized lifted-structure loss (losses/lifted.h): hand-computed value, gradient check,
// an anchor without negatives.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "losses/lifted.h"
#include "tests/losses/helpers.h"
#include "tests/support/gradcheck.h"

using engine::Tensor;
using losses::Metric;
using losses_test::f64;
using losses_test::labels_of;

TEST_CASE("lifted loss: hand-computed, metric E", "[losses][lifted]") {
  // 1-D rows 0 (A), 1 (A), 3 (B), 0.5 (B); margin 1. Anchors rows 0 and 2.
  // Anchor 0: P = {row 1}: log e^1 = 1; N = {3, 0.5}: log(e^{1-3} + e^{1-0.5}) =
  //   log(0.135335 + 1.648721) = 0.578890 -> l = 1.578890.
  // Anchor 2 (x = 3): P = {row 3}: d = 2.5; N = {0, 1}: d = 3, 2: log(e^{-2} + e^{-1}) =
  //   log(0.503215) = -0.686738 -> l = 1.813262.
  // Mean 1.696076, plus 5e-3 * mean |x| = 5e-3 * (0 + 1 + 3 + 0.5)/4 = 0.005625 -> 1.701701.
  Tensor x = f64({0, 1, 3, 0.5}, {4, 1});
  CHECK(losses::lifted_loss(x, labels_of({0, 0, 1, 1}), Metric::E).item() ==
        Approx(1.7017007).margin(1e-6));
}

TEST_CASE("lifted loss: an anchor without negatives contributes 0", "[losses][lifted]") {
  // One class: l_a = relu(log sum_P exp d + log sum over nothing) = relu(-inf) = 0, so only the
  // norm term remains: 5e-3 * mean(|0|, |2|) = 0.005; and the gradient is finite.
  Tensor x = f64({0, 2}, {2, 1});
  x.set_requires_grad(true);
  Tensor loss = losses::lifted_loss(x, labels_of({5, 5}), Metric::E);
  CHECK(loss.item() == Approx(0.005).margin(1e-15));
  engine::backward(loss);
  for (double v : x.grad().to_vector()) CHECK(std::isfinite(v));
}

TEST_CASE("lifted loss grad: N, E and C", "[losses][lifted][grad]") {
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    INFO("metric " << losses::metric_name(metric));
    Tensor x = test::random_leaf({8, 3}, 81);
    Tensor y = labels_of({0, 0, 1, 1, 2, 2, 0, 0});
    test::require_gradcheck(
        [&](const std::vector<Tensor>& in) { return losses::lifted_loss(in[0], y, metric); }, {x});
  }
}
