// Contrastive loss (losses/contrastive.h): hand-computed values for N, E and C (with robrank's
// always-zero cosine negative term), gradient checks, and the SPC-2 path.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "engine/ops.h"
#include "losses/contrastive.h"
#include "tests/losses/helpers.h"
#include "tests/support/gradcheck.h"

using engine::Tensor;
using losses::Metric;
using losses_test::f64;
using losses_test::index;
using losses_test::labels_of;
using losses_test::make_triplets;

TEST_CASE("contrastive loss: hand-computed, metric E", "[losses][contrastive]") {
  // Rows (0,0) A, (3,4) A, (0,0.5) B, (0,3) B; triplets (0,1,2) and (2,3,1); margin 1.
  // Positive pairs: d(0,1) = 5, d(2,3) = 2.5 -> mean 3.75.
  // Negative pairs: 1 - d(0,2) = 1 - 0.5 = 0.5 (active), 1 - d(2,1) = 1 - |(3, 3.5)| < 0
  //   (inactive) -> mean over the active one only: 0.5. Total 4.25 (up to the 1e-6 eps).
  Tensor x = f64({0, 0, 3, 4, 0, 0.5, 0, 3}, {4, 2});
  Tensor loss = losses::contrastive_loss(x, make_triplets({0, 2}, {1, 3}, {2, 1}), Metric::E);
  CHECK(loss.item() == Approx(4.25).margin(1e-5));
}

TEST_CASE("contrastive loss: hand-computed, metric N", "[losses][contrastive]") {
  // Unit rows (1,0) A, (0.6,0.8) A, (0.8,0.6) B, (0,1) B; triplets (0,1,2) and (2,3,0).
  // d(0,1) = |(0.4,-0.8)| = sqrt 0.8 = 0.894427, d(2,3) = |(0.8,-0.4)| = 0.894427 -> 0.894427.
  // d(0,2) = |(0.2,-0.6)| = sqrt 0.4 = 0.632456 and d(2,0) the same: both active,
  //   1 - 0.632456 = 0.367544 each. Total 1.261972.
  Tensor x = f64({1, 0, 0.6, 0.8, 0.8, 0.6, 0, 1}, {4, 2});
  Tensor loss = losses::contrastive_loss(x, make_triplets({0, 2}, {1, 3}, {2, 0}), Metric::N);
  CHECK(loss.item() == Approx(1.2619717).margin(3e-6));
}

TEST_CASE("contrastive loss: hand-computed, metric C (negative term is always 0 at margin 1)",
          "[losses][contrastive]") {
  // Same rows: cos(0,1) = 0.6 and cos(2,3) = 0.6 -> positive term mean(1 - 0.6) = 0.4.
  // Negative term max(0, cos - 1) = 0 for every pair (robrank's quirk). Total 0.4.
  // With margin 0.5 instead: cos(0,2) = cos(2,0) = 0.8 -> 0.3 each: 0.4 + 0.3 = 0.7.
  Tensor x = f64({1, 0, 0.6, 0.8, 0.8, 0.6, 0, 1}, {4, 2});
  losses::Triplets t = make_triplets({0, 2}, {1, 3}, {2, 0});
  CHECK(losses::contrastive_loss(x, t, Metric::C).item() == Approx(0.4).margin(1e-12));
  CHECK(losses::contrastive_loss(x, t, Metric::C, 0.5).item() == Approx(0.7).margin(1e-12));
}

TEST_CASE("contrastive loss grad: N, E and C", "[losses][contrastive][grad]") {
  // Random rows in [-1, 1]^3. Every negative hinge argument (m - d(a,n); 1 - m - d(a,n) for C)
  // must be 1e-3 from 0, so finite differences never cross a kink (nor change active_mean's
  // count), and at least one must be active, so the negative term's gradient is checked too.
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    INFO("metric " << losses::metric_name(metric));
    Tensor x = test::random_leaf({6, 3}, 41);
    const double margin = metric == Metric::C ? 0.5 : 1.0;  // C at 1.0 has no negative gradient
    losses::Triplets t = make_triplets({0, 2, 4}, {1, 3, 5}, {3, 5, 0});
    const Tensor rows = losses::embed_for_metric(x.detach(), metric);
    const Tensor d_an = losses::row_distance(engine::index_select(rows, t.anchor),
                                             engine::index_select(rows, t.negative), metric);
    int active = 0;
    for (double d : d_an.to_vector()) {
      const double hinge = (metric == Metric::C ? 1.0 - margin : margin) - d;
      REQUIRE(std::fabs(hinge) > 1e-3);
      active += hinge > 0;
    }
    CHECK(active > 0);
    test::require_gradcheck(
        [&](const std::vector<Tensor>& in) {
          return losses::contrastive_loss(in[0], t, metric, margin);
        },
        {x});
  }
}

TEST_CASE("contrastive loss: spc2 path runs backward without NaN", "[losses][contrastive]") {
  engine::Generator data_gen(5), gen(6);
  Tensor x = engine::normal({8, 4}, 0, 1, data_gen);
  x.set_requires_grad(true);
  Tensor loss = losses::spc2_contrastive_loss(x, labels_of({0, 0, 1, 1, 2, 2, 3, 3}),
                                              losses::Miner::Distance, Metric::N, gen);
  engine::backward(loss);
  for (double v : x.grad().to_vector()) CHECK(std::isfinite(v));
}
