// ACT (attacks/defenses/act.cpp): its collapse objective is a distance; a step with a budget
// equals act.cpp's math written out with public pieces on a twin, bit for bit. What every recipe
// promises (the step contract, eps = 0 with its band and its two forwards, the adversary's
// objective at the clean images and its direction) is in contract_test.cpp.
#include <catch2/catch.hpp>

#include <utility>

#include "attacks/defenses/act.h"
#include "attacks/defenses/common.h"
#include "attacks/defenses/defense.h"
#include "attacks/pgd.h"
#include "engine/ops.h"
#include "tests/defenses/fixture.h"

namespace {

using engine::Tensor;
using losses::Metric;
using losses::Miner;

// ACT's steps 1-2 re-derived on the twin from public pieces: mining with band 1.0 on the clean
// eval-mode embeddings, then PGD (attacks/pgd.h) in eval mode on the stacked [P; N] images
// descending mean_i d(f^(p~_i), f^(n~_i)). Returns the triplets and the adversarial [P~; N~].
struct MinedAndCollapsed {
  losses::Triplets triplets;
  Tensor adversarial_pn;
};

MinedAndCollapsed mine_and_collapse_on_twin(defense_test::TwinSetup& s) {
  models::Model& m = *s.twin.model;
  losses::Triplets t = s.mine_on_twin().triplets;
  const int64_t b = t.size();
  Tensor adversarial_pn =
      s.pgd_on_twin(engine::concat({t.positive, t.negative}, 0), [&](const Tensor& x, int64_t) {
        const Tensor e = losses::embed_for_metric(m.forward(x), Metric::N);
        return engine::mean(
            losses::row_distance(e.slice(0, 0, b), e.slice(0, b, 2 * b), Metric::N));
      });
  return {std::move(t), std::move(adversarial_pn)};
}

}  // namespace

TEST_CASE(
    "ACT's collapse objective is a mean distance: well above 0 at the clean images, >= 0 "
    "after the attack",
    "[defenses]") {
  // One step logs mean_i d(f^(p_i), f^(n_i)) at the clean images (contract_test.cpp recomputes
  // it by hand on the same batch and seeds).
  engine::Generator data(81);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(6, 3, data);
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    INFO("metric " << losses::metric_name(metric));
    CHECK(defense_test::attack_objective_after("act", 1, 20, metric, Miner::Semihard, 91, batch) >
          0.05);
    CHECK(defense_test::attack_objective_after("act", 5, 20, metric, Miner::Semihard, 91, batch) >=
          0.0);
  }
}

TEST_CASE(
    "ACT's step is its header's math written out: PGD collapsing p onto n, anchors clean "
    "in a second forward",
    "[defenses]") {
  // act.cpp steps 1-3 re-derived on a twin (same weights, same stream) from public pieces:
  // mine_and_collapse_on_twin (steps 1-2), then train-mode forwards f([P~; N~]) and f(A) (a BN
  // model: the batch statistics show the grouping) and the triplet loss with the loss margin.
  defense_test::TwinSetup s(83, 24, 93);
  models::Model& m = *s.twin.model;
  const MinedAndCollapsed mc = mine_and_collapse_on_twin(s);
  const losses::Triplets& t = mc.triplets;
  const int64_t b = t.size();
  const Tensor pn = m.forward(mc.adversarial_pn);
  const Tensor anchors = m.forward(engine::index_select(s.batch.images, t.anchor));
  const double expected =
      losses::triplet_loss_rows(anchors, pn.slice(0, 0, b), pn.slice(0, b, 2 * b), Metric::N, 0.2)
          .item();

  // The same operations in the same order on the same values: bit-identical.
  s.check_matches_twin(s.step(s.options("act")), expected);
}

TEST_CASE(
    "ACT's training loss with act.anchor unnormalized (robrank before its issue #7): raw anchors "
    "against unit p~ and n~, worked by hand",
    "[defenses]") {
  using attacks::defenses::act_triplet_loss;
  using attacks::defenses::ActAnchor;
  // Row 0: a = (3, 4) (norm 5), p~ = (2, 0) -> (1, 0), n~ = (0, 3) -> (0, 1).
  //   unnormalized: ||(2, 4)|| - ||(3, 3)|| + 0.2 = sqrt(20) - sqrt(18) + 0.2 = 0.4294953
  //   normalized, a -> (0.6, 0.8): ||(-0.4, 0.8)|| - ||(0.6, -0.2)|| + 0.2
  //                               = sqrt(0.8) - sqrt(0.4) + 0.2 = 0.4619717
  // Row 1: a = (0, -2), p~ = (0, -5) -> (0, -1), n~ = (4, 0) -> (1, 0): inactive either way
  //   (unnormalized 1 - sqrt(5) + 0.2 < 0; normalized 0 - sqrt(2) + 0.2 < 0).
  // The 1e-6 that pairwise_distance adds moves each distance by < 2e-6.
  const Tensor a = Tensor::from_vector({3.0, 4.0, 0.0, -2.0}, {2, 2});
  const Tensor p = Tensor::from_vector({2.0, 0.0, 0.0, -5.0}, {2, 2});
  const Tensor n = Tensor::from_vector({0.0, 3.0, 4.0, 0.0}, {2, 2});
  CHECK(act_triplet_loss(a, p, n, Metric::N, 0.2, ActAnchor::Unnormalized).item() ==
        Approx(0.4294953 / 2).margin(1e-5));
  CHECK(act_triplet_loss(a, p, n, Metric::N, 0.2, ActAnchor::Normalized).item() ==
        Approx(0.4619717 / 2).margin(1e-5));
  // 1 - cos ignores norms: row 0 (1 - 0.6) - (1 - 0.8) + 0.2 = 0.4, row 1 inactive; both modes.
  for (ActAnchor mode : {ActAnchor::Normalized, ActAnchor::Unnormalized}) {
    CHECK(act_triplet_loss(a, p, n, Metric::C, 0.2, mode).item() == Approx(0.2).margin(1e-6));
  }
}

TEST_CASE(
    "ACT with act.anchor unnormalized: anchors from an eval-mode forward, kept unnormalized in "
    "the loss",
    "[defenses]") {
  // As the written-out step above, but f(a) in eval mode (a BN model: the running statistics
  // show that only [P~; N~] went through train mode) and the loss from raw anchors to the unit
  // f^(p~), f^(n~) (metric E's distance, which normalizes nothing).
  defense_test::TwinSetup s(83, 24, 93);
  models::Model& m = *s.twin.model;
  const MinedAndCollapsed mc = mine_and_collapse_on_twin(s);
  const losses::Triplets& t = mc.triplets;
  const int64_t b = t.size();
  const Tensor pn = m.forward(mc.adversarial_pn);
  m.eval();
  const Tensor anchors = m.forward(engine::index_select(s.batch.images, t.anchor));
  m.train();
  const double expected =
      losses::triplet_loss_rows(anchors, engine::l2_normalize(pn.slice(0, 0, b)),
                                engine::l2_normalize(pn.slice(0, b, 2 * b)), Metric::E, 0.2)
          .item();

  attacks::defenses::DefenseOptions o = s.options("act");
  o.act_anchor = attacks::defenses::ActAnchor::Unnormalized;
  s.check_matches_twin(s.step(o), expected);
}
