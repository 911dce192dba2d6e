// N-pair loss (losses/npair.h): hand-computed value, gradient check.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "engine/ops.h"
#include "losses/npair.h"
#include "tests/losses/helpers.h"
#include "tests/support/gradcheck.h"

using engine::Tensor;
using losses::Metric;
using losses_test::f64;
using losses_test::labels_of;

TEST_CASE("npair loss: hand-computed, metric E", "[losses][npair]") {
  // Rows (1,0) A, (0,1) A, (2,0) B, (0,-1) B. Anchors rows 0 and 2, re-normalized: both (1, 0).
  // Anchor 0: p = (0,1); negatives rows 2, 3: <a, n - p> = <(1,0), (2,-1)> = 2 and
  //   <(1,0), (0,-2)> = 0 -> log(1 + e^2 + e^0) = log 9.389056 = 2.239545.
  // Anchor 2: p = (0,-1); negatives rows 0, 1: <(1,0), (1,1)> = 1, <(1,0), (0,2)> = 0 ->
  //   log(1 + e + 1) = log 4.718282 = 1.551445.
  // Mean 1.895495, plus 5e-3 * mean |x| = 5e-3 * (1 + 1 + 2 + 1)/4 = 0.00625 -> 1.901745.
  Tensor x = f64({1, 0, 0, 1, 2, 0, 0, -1}, {4, 2});
  CHECK(losses::npair_loss(x, labels_of({0, 0, 1, 1}), Metric::E).item() ==
        Approx(1.9017447).margin(1e-6));
  // N normalizes every row first: row 2 becomes (1, 0), so anchor 0's first inner product is 1:
  // log(1 + e + 1) twice -> 1.551445, and the norm term 5e-3.
  CHECK(losses::npair_loss(x, labels_of({0, 0, 1, 1}), Metric::N).item() ==
        Approx(1.5514447 + 0.005).margin(1e-6));
}

TEST_CASE("npair loss grad: N, E and C", "[losses][npair][grad]") {
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    INFO("metric " << losses::metric_name(metric));
    Tensor x = test::random_leaf({8, 3}, 91);
    Tensor y = labels_of({0, 0, 1, 1, 2, 2, 0, 0});
    test::require_gradcheck(
        [&](const std::vector<Tensor>& in) { return losses::npair_loss(in[0], y, metric); }, {x});
  }
}
