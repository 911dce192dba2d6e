// REST (attacks/defenses/rest.cpp): a step with a budget equals rest.cpp's math written out with
// public pieces on a twin, bit for bit. What every recipe promises (the step contract, eps = 0
// with its band and its one forward of [a; p; n], the ES adversary's objective at the clean
// images and its direction) is in contract_test.cpp.
#include <catch2/catch.hpp>

#include "attacks/defenses/common.h"
#include "attacks/defenses/defense.h"
#include "attacks/pgd.h"
#include "engine/ops.h"
#include "tests/defenses/fixture.h"

namespace {

using engine::Tensor;
using losses::Metric;

}  // namespace

TEST_CASE(
    "REST's step is its header's math written out: ES adversary on [p; n] only, one "
    "forward of [a; p~; n~]",
    "[defenses]") {
  // rest.cpp steps 1-3 re-derived on a twin (same weights, same stream) from public pieces:
  // mining on the clean eval-mode embeddings with band 1.0, the ES adversary (common.h) on the
  // stacked positive and negative images against their clean embeddings, the anchors left
  // clean, one train-mode forward of [A; P~; N~] (a BN model: its batch statistics show the
  // grouping), the triplet loss with the loss margin.
  defense_test::TwinSetup s(23, 13, 33);
  const defense_test::Spc2Batch& batch = s.batch;
  models::Model& m = *s.twin.model;
  const auto [clean, t] = s.mine_on_twin();
  const int64_t b = t.size();
  const Tensor pn = engine::concat({t.positive, t.negative}, 0);
  const Tensor adversarial_pn = attacks::defenses::embedding_shift_adversary(
      m, engine::index_select(batch.images, pn), engine::index_select(clean, pn), Metric::N, s.pgd,
      s.twin.mining, nullptr);
  const Tensor e =
      m.forward(engine::concat({engine::index_select(batch.images, t.anchor), adversarial_pn}, 0));
  const double expected = losses::triplet_loss_rows(e.slice(0, 0, b), e.slice(0, b, 2 * b),
                                                    e.slice(0, 2 * b, 3 * b), Metric::N, 0.2)
                              .item();

  // The same operations in the same order on the same values: bit-identical.
  s.check_matches_twin(s.step(s.options("rest")), expected);
}
