// REST (attacks/defenses/rest.cpp): with eps = 0 it is the triplet loss on triplets mined on the
// clean eval-mode embeddings with robrank's adversary band (1.0 for N, 0.2 for C), embedded in one
// train-mode forward of [a; p; n]; with a budget its ES adversary shifts the positives and
// negatives; a step with a budget equals rest.cpp's math written out with public pieces on a
// twin, bit for bit; and it keeps the step contract of defense.h.
#include <catch2/catch.hpp>

#include <memory>

#include "attacks/defenses/common.h"
#include "attacks/defenses/defense.h"
#include "attacks/pgd.h"
#include "engine/nn/batch_norm.h"
#include "engine/ops.h"
#include "tests/defenses/fixture.h"

namespace {

using defense_test::Harness;
using engine::Tensor;
using losses::Metric;
using losses::Miner;

// The triplet loss of one train-mode forward of [A; P; N] (the rows of `t`) through a fresh twin
// of the recipe's model: what REST (and Madry) train on when nothing is perturbed.
double one_forward_triplet_loss(Harness& twin, const Tensor& images, const losses::Triplets& t,
                                Metric metric) {
  const Tensor index = engine::concat({t.anchor, t.positive, t.negative}, 0);
  const Tensor e = twin.model->forward(engine::index_select(images, index));
  const int64_t b = t.size();
  return losses::triplet_loss_rows(e.slice(0, 0, b), e.slice(0, b, 2 * b), e.slice(0, 2 * b, 3 * b),
                                   metric, losses::default_margin(metric))
      .item();
}

}  // namespace

TEST_CASE("REST with eps = 0 is the triplet loss on triplets mined with band 1.0 for N, 0.2 for C",
          "[defenses]") {
  // A BN model (one branch): mining must use the eval-mode (running statistics) embeddings and
  // the loss one train-mode forward of the 3B gathered images (batch statistics over all 3B).
  engine::Generator data(21);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(6, 3, data);
  for (Metric metric : {Metric::N, Metric::C}) {
    INFO("metric " << losses::metric_name(metric));
    const double band = metric == Metric::C ? 0.2 : 1.0;  // robrank-spec §5.4 pitfall 5
    const double other_band = metric == Metric::C ? 1.0 : 0.2;
    Harness h(11, 1, metric, Miner::Semihard, 31);
    Harness twin(11, 1, metric, Miner::Semihard, 31);
    Harness twin_other(11, 1, metric, Miner::Semihard, 31);
    // Expected: mine on the clean eval-mode embeddings with the same stream (REST mines first).
    twin.model->eval();
    const Tensor clean = twin.model->forward(batch.images);
    twin.model->train();
    engine::Generator g1 = h.mining, g2 = h.mining;
    const losses::Triplets t =
        losses::mine_triplets(clean, batch.labels, Miner::Semihard, metric, g1, band);
    const losses::Triplets t_other =
        losses::mine_triplets(clean, batch.labels, Miner::Semihard, metric, g2, other_band);
    // The premise that makes the band matter: the two bands pick different negatives here, and
    // the losses on them differ.
    REQUIRE(t.negative.to_indices() != t_other.negative.to_indices());
    const double expected = one_forward_triplet_loss(twin, batch.images, t, metric);
    const double wrong = one_forward_triplet_loss(twin_other, batch.images, t_other, metric);
    REQUIRE(std::fabs(expected - wrong) > 1e-6);

    const auto rest =
        attacks::defenses::make_defense(defense_test::defense_options("rest", 0.0, 0.01, 3));
    const attacks::defenses::StepResult r = rest->step(h.context, batch.images, batch.labels);
    // Bit-identical: eps = 0 leaves every pixel exactly as it was (x0 + clip(., -0, 0)), and the
    // same forward and loss run on the same rows.
    CHECK(r.loss.item() == expected);
    CHECK(defense_test::log_value(r, "adversarial_loss") == expected);
  }
}

TEST_CASE("REST's adversary shifts the positives and negatives away from their clean embeddings",
          "[defenses]") {
  // attack_objective = -mean_i d(f^(x~_i), f^(x_i)) over the 2B positives and negatives, before
  // the last step: with one step the clean images' value (fixture.h check_clean_es_objective);
  // after 4 steps of 0.02 the embeddings have moved by O(0.1).
  engine::Generator data(21);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(6, 3, data);
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    INFO("metric " << losses::metric_name(metric));
    const double one =
        defense_test::attack_objective_after("rest", 1, 11, metric, Miner::Semihard, 31, batch);
    defense_test::check_clean_es_objective(one, metric);
    CHECK(defense_test::attack_objective_after("rest", 5, 11, metric, Miner::Semihard, 31, batch) <
          one - 1e-3);
  }
}

TEST_CASE(
    "REST's step is its header's math written out: ES adversary on [p; n] only, one "
    "forward of [a; p~; n~]",
    "[defenses]") {
  // rest.cpp steps 1-3 re-derived on a twin (same weights, same stream) from public pieces:
  // mining on the clean eval-mode embeddings with band 1.0, the ES adversary (common.h) on the
  // stacked positive and negative images against their clean embeddings, the anchors left
  // clean, one train-mode forward of [A; P~; N~] (a BN model: its batch statistics show the
  // grouping), the triplet loss with the loss margin.
  engine::Generator data(23);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(6, 3, data);
  const attacks::PgdOptions pgd{0.15, 0.03, 3, false, 0, 0.0};
  Harness h(13, 1, Metric::N, Miner::Semihard, 33);
  Harness twin(13, 1, Metric::N, Miner::Semihard, 33);
  const Tensor clean = attacks::defenses::clean_embeddings(*twin.model, batch.images);
  const losses::Triplets t =
      losses::mine_triplets(clean, batch.labels, Miner::Semihard, Metric::N, twin.mining, 1.0);
  const int64_t b = t.size();
  const Tensor pn = engine::concat({t.positive, t.negative}, 0);
  const Tensor adversarial_pn = attacks::defenses::embedding_shift_adversary(
      *twin.model, engine::index_select(batch.images, pn), engine::index_select(clean, pn),
      Metric::N, pgd, twin.mining, nullptr);
  const Tensor e = twin.model->forward(
      engine::concat({engine::index_select(batch.images, t.anchor), adversarial_pn}, 0));
  const double expected = losses::triplet_loss_rows(e.slice(0, 0, b), e.slice(0, b, 2 * b),
                                                    e.slice(0, 2 * b, 3 * b), Metric::N, 0.2)
                              .item();

  const attacks::defenses::StepResult r =
      attacks::defenses::make_defense(
          defense_test::defense_options("rest", pgd.eps, pgd.alpha, pgd.steps))
          ->step(h.context, batch.images, batch.labels);
  // The same operations in the same order on the same values: bit-identical.
  CHECK(r.loss.item() == expected);
  CHECK(h.mining.offset == twin.mining.offset);
  CHECK(engine::nn::batch_norm_layers(*h.model)[0]->running_mean().to_vector() ==
        engine::nn::batch_norm_layers(*twin.model)[0]->running_mean().to_vector());
}

TEST_CASE("REST: passes = steps + 1, train mode, no weight gradient, differentiable loss",
          "[defenses]") {
  engine::Generator data(22);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(4, 2, data);
  for (int64_t steps : {1, 4}) {
    INFO("steps " << steps);
    Harness h(12, 1, Metric::N, Miner::Semihard, 32);
    const auto rest =
        attacks::defenses::make_defense(defense_test::defense_options("rest", 0.1, 0.02, steps));
    const attacks::defenses::StepResult r = rest->step(h.context, batch.images, batch.labels);
    defense_test::check_step_contract(*h.model, r, steps + 1);
  }
}
