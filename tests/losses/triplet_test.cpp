// Triplet loss (losses/triplet.h) and the ICS term (losses/ics.h): hand-computed values for the
// three metrics, f64 gradient checks away from the hinge, and the SPC-2 mining + loss path.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "losses/ics.h"
#include "losses/triplet.h"
#include "tests/losses/helpers.h"
#include "tests/support/allclose.h"
#include "tests/support/gradcheck.h"

using engine::Tensor;
using losses::Metric;
using losses_test::f64;
using losses_test::index;
using losses_test::labels_of;

namespace {

// Two triplets on 2-D rows: (a, p, n) = ((3,4), (0,5), (4,-3)) and ((1,0), (0,2), (2,2)).
Tensor triplet_rows() {
  return f64({3, 4, 0, 5, 4, -3,  //
              1, 0, 0, 2, 2, 2},
             {6, 2});
}

}  // namespace

TEST_CASE("triplet loss: hand-computed, metric E", "[losses][triplet]") {
  // Rows 0..4 = (0,0), (3,4), (6,8), (0,2), (1,0).
  // t0 = (0, 1, 2): d(a,p) = 5, d(a,n) = 10: max(0, 5 - 10 + 1) = 0.
  // t1 = (0, 3, 4) with row 4 = (1, 0): d(a,p) = 2, d(a,n) = 1: max(0, 2 - 1 + 1) = 2.
  // Mean (0 + 2)/2 = 1 (the 1e-6 added to each difference moves it by ~1e-6).
  Tensor x = f64({0, 0, 3, 4, 6, 8, 0, 2, 1, 0}, {5, 2});
  Tensor loss = losses::triplet_loss(x, index({0, 0}), index({1, 3}), index({2, 4}), Metric::E,
                                     losses::default_margin(Metric::E));
  REQUIRE(loss.shape() == engine::Shape{});
  CHECK(loss.item() == Approx(1.0).margin(1e-5));
}

TEST_CASE("triplet loss: hand-computed, metric N", "[losses][triplet]") {
  // Normalized: t0 = a (0.6, 0.8), p (0, 1), n (0.8, -0.6): d(a,p) = |(0.6, -0.2)| = sqrt 0.4 =
  //   0.632456, d(a,n) = |(-0.2, 1.4)| = sqrt 2: max(0, 0.632 - 1.414 + 0.2) = 0.
  // t1 = a (1, 0), p (0, 1), n (1, 1)/sqrt 2: d(a,p) = sqrt 2 = 1.414214, d(a,n) =
  //   sqrt((1 - 0.707107)^2 + 0.5) = sqrt(2 - sqrt 2) = 0.765367: 1.414214 - 0.765367 + 0.2 =
  //   0.848847. Mean 0.424423.
  Tensor rows = triplet_rows();
  Tensor loss =
      losses::triplet_loss(rows, index({0, 3}), index({1, 4}), index({2, 5}), Metric::N, 0.2);
  CHECK(loss.item() == Approx(0.4244233).margin(2e-6));
  // The same through triplet_loss_rows on gathered rows.
  Tensor a = engine::index_select(rows, index({0, 3}));
  Tensor p = engine::index_select(rows, index({1, 4}));
  Tensor n = engine::index_select(rows, index({2, 5}));
  CHECK(losses::triplet_loss_rows(a, p, n, Metric::N, 0.2).item() ==
        Approx(0.4244233).margin(2e-6));
  // Hardness of each: 0.632456 - 1.414214 = -0.781758, 1.414214 - 0.765367 = 0.648847.
  test::require_close(losses::triplet_hardness(a, p, n, Metric::N), {-0.781758, 0.648847}, 3e-6, 0,
                      "hardness");
}

TEST_CASE("triplet loss: hand-computed, metric C", "[losses][triplet]") {
  // t0: cos(a,p) = 0.8 -> d 0.2; cos(a,n) = 0.48 - 0.48 = 0 -> d 1: max(0, 0.2 - 1 + 0.2) = 0.
  // t1: cos((1,0), (0,1)) = 0 -> d 1; cos((1,0), (1,1)) = 0.707107 -> d 0.292893:
  //   1 - 0.292893 + 0.2 = 0.907107. Mean 0.453553.
  Tensor rows = triplet_rows();
  Tensor loss =
      losses::triplet_loss(rows, index({0, 3}), index({1, 4}), index({2, 5}), Metric::C, 0.2);
  CHECK(loss.item() == Approx(0.4535534).margin(1e-7));
}

TEST_CASE("triplet loss grad: N, E and C away from the hinge", "[losses][triplet][grad]") {
  // 6 rows, 4 triplets with repeated rows (index_select accumulates their gradients). The margin
  // is chosen per metric so some triplets are active and some are not; the test asserts every
  // hinge argument is at least 1e-3 from 0 so finite differences never cross the kink.
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    INFO("metric " << losses::metric_name(metric));
    Tensor x = test::random_leaf({6, 3}, 21);
    Tensor a = index({0, 2, 4, 0}), p = index({1, 3, 5, 1}), n = index({2, 0, 1, 5});
    const double margin = losses::default_margin(metric);
    Tensor h = losses::triplet_hardness(engine::index_select(x, a), engine::index_select(x, p),
                                        engine::index_select(x, n), metric);
    int active = 0;
    for (double v : h.to_vector()) {
      REQUIRE(std::fabs(v + margin) > 1e-3);
      active += v + margin > 0;
    }
    CHECK(active > 0);
    test::require_gradcheck(
        [&](const std::vector<Tensor>& in) {
          return losses::triplet_loss(in[0], a, p, n, metric, margin);
        },
        {x});
  }
}

TEST_CASE("triplet loss: spc2 path mines then averages the hinge", "[losses][triplet]") {
  // spc2_triplet_loss(x, y, miner, N, gen) must equal mining with the same seed and then
  // triplet_loss with margin 0.2; and backward reaches the embeddings.
  engine::Generator data_gen(3);
  Tensor x = engine::normal({8, 5}, 0, 1, data_gen, engine::DType::F64);
  x.set_requires_grad(true);
  Tensor y = labels_of({0, 0, 1, 1, 2, 2, 0, 0});
  engine::Generator g1(9), g2(9);
  Tensor direct = losses::spc2_triplet_loss(x, y, losses::Miner::Semihard, Metric::N, g1);
  losses::Triplets t = losses::mine_triplets(x, y, losses::Miner::Semihard, Metric::N, g2, 0.2);
  CHECK(direct.item() == Approx(losses::triplet_loss(x, t, Metric::N, 0.2).item()).epsilon(1e-14));
  engine::backward(direct);
  REQUIRE(x.grad().defined());
  for (double v : x.grad().to_vector()) CHECK_FALSE(std::isnan(v));
}

TEST_CASE("triplet loss: errors name the argument", "[losses][triplet]") {
  Tensor x = f64({0, 1, 2, 3}, {2, 2});
  REQUIRE_THROWS_WITH(
      losses::triplet_loss(x, index({0}), index({1, 0}), index({1}), Metric::E, 1.0),
      Catch::Contains("triplet_loss") && Catch::Contains("positive"));
  REQUIRE_THROWS_WITH(losses::triplet_loss(x, index({0}), index({1}), index({7}), Metric::E, 1.0),
                      Catch::Contains("index_select"));
  REQUIRE_THROWS_WITH(losses::triplet_loss_rows(x, x, f64({0, 1}, {1, 2}), Metric::N, 0.2),
                      Catch::Contains("triplet_loss"));
}

TEST_CASE("ics loss: hand-computed L_T(a, adv a, p; 0) scaled by lambda", "[losses][ics]") {
  // Unit rows (metric N). t0: a = (1, 0), adv a = (0.8, 0.6), p = (0, 1): d(a, adv a) =
  //   |(0.2, -0.6)| = sqrt 0.4 = 0.632456 < d(a, p) = sqrt 2 -> max(0, .) = 0.
  // t1: a = (1, 0), adv a = (-1, 0), p = (0.6, 0.8): d(a, adv a) = 2, d(a, p) = |(0.4, -0.8)| =
  //   sqrt 0.8 = 0.894427 -> 1.105573. Mean 0.552786, times lambda 0.5 = 0.276393.
  Tensor clean_a = f64({1, 0, 1, 0}, {2, 2});
  Tensor adv_a = f64({0.8, 0.6, -1, 0}, {2, 2});
  Tensor clean_p = f64({0, 1, 0.6, 0.8}, {2, 2});
  CHECK(losses::ics_loss(clean_a, adv_a, clean_p).item() == Approx(0.2763932).margin(2e-6));
  CHECK(losses::ics_loss(clean_a, adv_a, clean_p, Metric::N, 0.05).item() ==
        Approx(0.02763932).margin(2e-7));
  REQUIRE_THROWS_WITH(losses::ics_loss(clean_a, adv_a, clean_p, Metric::N, -1.0),
                      Catch::Contains("ics_loss"));
}

TEST_CASE("ics loss grad: all three inputs", "[losses][ics][grad]") {
  // Adversarial anchors near the clean ones but farther than the positives for half the rows, so
  // both sides of the hinge occur; asserted away from the kink.
  Tensor a = test::random_leaf({4, 3}, 31), adv = test::random_leaf({4, 3}, 32),
         p = test::random_leaf({4, 3}, 33);
  Tensor h = losses::triplet_hardness(a, adv, p, Metric::N);
  for (double v : h.to_vector()) REQUIRE(std::fabs(v) > 1e-3);
  test::require_gradcheck(
      [](const std::vector<Tensor>& in) { return losses::ics_loss(in[0], in[1], in[2]); },
      {a, adv, p});
}

TEST_CASE("ics loss: the margin setting (HM supplement Table 10's 0.2)", "[losses][ics]") {
  // The rows of the hand-computed case above. Margin 0.2: t0 max(0, 0.632456 - 1.414214 + 0.2)
  //   = 0; t1 2 - 0.894427 + 0.2 = 1.305573. Mean 0.652786, times lambda 0.5 = 0.326393.
  Tensor clean_a = f64({1, 0, 1, 0}, {2, 2});
  Tensor adv_a = f64({0.8, 0.6, -1, 0}, {2, 2});
  Tensor clean_p = f64({0, 1, 0.6, 0.8}, {2, 2});
  CHECK(losses::ics_loss(clean_a, adv_a, clean_p, Metric::N, 0.5, 0.2).item() ==
        Approx(0.3263932).margin(2e-6));
  CHECK(losses::ics_loss(clean_a, adv_a, clean_p, Metric::N, 0.5, 0.0).item() ==
        Approx(0.2763932).margin(2e-6));
  REQUIRE_THROWS_WITH(losses::ics_loss(clean_a, adv_a, clean_p, Metric::N, 0.5, -0.1),
                      Catch::Contains("margin"));
}
