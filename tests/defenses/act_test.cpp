// ACT (attacks/defenses/act.cpp): its collapse objective is a distance; a step with a budget
// equals act.cpp's math written out with public pieces on a twin, bit for bit. What every recipe
// promises (the step contract, eps = 0 with its band and its two forwards, the adversary's
// objective at the clean images and its direction) is in contract_test.cpp.
#include <catch2/catch.hpp>

#include "attacks/defenses/common.h"
#include "attacks/defenses/defense.h"
#include "attacks/pgd.h"
#include "engine/ops.h"
#include "tests/defenses/fixture.h"

namespace {

using engine::Tensor;
using losses::Metric;
using losses::Miner;

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
  // mining with band 1.0 on the clean eval-mode embeddings, PGD (attacks/pgd.h) in eval mode on
  // the stacked [P; N] images descending mean_i d(f^(p~_i), f^(n~_i)), then train-mode forwards
  // f([P~; N~]) and f(A) (a BN model: the batch statistics show the grouping) and the triplet
  // loss with the loss margin.
  defense_test::TwinSetup s(83, 24, 93);
  models::Model& m = *s.twin.model;
  const losses::Triplets t = s.mine_on_twin().triplets;
  const int64_t b = t.size();
  const Tensor adversarial_pn =
      s.pgd_on_twin(engine::concat({t.positive, t.negative}, 0), [&](const Tensor& x, int64_t) {
        const Tensor e = losses::embed_for_metric(m.forward(x), Metric::N);
        return engine::mean(
            losses::row_distance(e.slice(0, 0, b), e.slice(0, b, 2 * b), Metric::N));
      });
  const Tensor pn = m.forward(adversarial_pn);
  const Tensor anchors = m.forward(engine::index_select(s.batch.images, t.anchor));
  const double expected =
      losses::triplet_loss_rows(anchors, pn.slice(0, 0, b), pn.slice(0, b, 2 * b), Metric::N, 0.2)
          .item();

  // The same operations in the same order on the same values: bit-identical.
  s.check_matches_twin(s.step(s.options("act")), expected);
}
