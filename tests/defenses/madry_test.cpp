// Madry min-max (attacks/defenses/madry.cpp): with eps = 0 it is the triplet loss on triplets
// mined on the clean eval-mode embeddings with robrank's adversary band (1.0 for N), embedded in
// one train-mode forward of [a; p; n]; with a budget its adversary makes the triplets harder; a
// step with a budget equals madry.cpp's math written out with public pieces on a twin, bit for
// bit; and it keeps the step contract of defense.h.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

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

// The triplet loss of one train-mode forward of [A; P; N] through a fresh twin.
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

TEST_CASE(
    "Madry with eps = 0 is the triplet loss on triplets mined with band 1.0 for N, 0.2 for "
    "C",
    "[defenses]") {
  engine::Generator data(21);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(6, 3, data);
  for (Metric metric : {Metric::N, Metric::C}) {
    INFO("metric " << losses::metric_name(metric));
    const double band = metric == Metric::C ? 0.2 : 1.0;  // robrank-spec §5.4 pitfall 5
    const double other_band = metric == Metric::C ? 1.0 : 0.2;
    Harness h(11, 1, metric, Miner::Semihard, 31);
    Harness twin(11, 1, metric, Miner::Semihard, 31);
    Harness twin_other(11, 1, metric, Miner::Semihard, 31);
    twin.model->eval();
    const Tensor clean = twin.model->forward(batch.images);  // what Madry mines on
    twin.model->train();
    engine::Generator g1 = h.mining, g2 = h.mining;  // Madry mines first, from the stream
    const losses::Triplets t =
        losses::mine_triplets(clean, batch.labels, Miner::Semihard, metric, g1, band);
    const losses::Triplets t_other =
        losses::mine_triplets(clean, batch.labels, Miner::Semihard, metric, g2, other_band);
    REQUIRE(t.negative.to_indices() != t_other.negative.to_indices());
    const double expected = one_forward_triplet_loss(twin, batch.images, t, metric);
    const double wrong = one_forward_triplet_loss(twin_other, batch.images, t_other, metric);
    REQUIRE(std::fabs(expected - wrong) > 1e-6);

    const auto madry =
        attacks::defenses::make_defense(defense_test::defense_options("madry", 0.0, 0.01, 3));
    const attacks::defenses::StepResult r = madry->step(h.context, batch.images, batch.labels);
    // Bit-identical: eps = 0 leaves every pixel as it was, and the same forward and loss run.
    CHECK(r.loss.item() == expected);
    CHECK(defense_test::log_value(r, "adversarial_loss") == expected);
  }
}

TEST_CASE("Madry's adversary hardens the triplets: attack_objective below its clean value",
          "[defenses]") {
  // The objective -mean_i (d(a_i, p_i) - d(a_i, n_i)) at the clean images, recomputed here from
  // the same mined triplets (Madry mines first, from the stream) and host-side distances.
  engine::Generator data(101);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(6, 3, data);
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    INFO("metric " << losses::metric_name(metric));
    Harness h(22, 0, metric, Miner::Semihard, 111);  // for the clean side only
    const Tensor clean = h.model->forward(batch.images).detach();
    engine::Generator copy = h.mining;
    const losses::Triplets t =
        losses::mine_triplets(clean, batch.labels, Miner::Semihard, metric, copy,
                              attacks::defenses::adversary_mining_margin(metric));
    const defense_test::Rows rows = defense_test::host_rows(clean);
    const std::vector<int64_t> a = t.anchor.to_indices(), p = t.positive.to_indices(),
                               n = t.negative.to_indices();
    double clean_value = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
      clean_value -= defense_test::metric_distance(metric, rows[a[i]], rows[p[i]]) -
                     defense_test::metric_distance(metric, rows[a[i]], rows[n[i]]);
    }
    clean_value /= static_cast<double>(a.size());

    auto objective_after = [&](int64_t steps) {
      Harness fresh(22, 0, metric, Miner::Semihard, 111);
      return defense_test::log_value(
          attacks::defenses::make_defense(defense_test::defense_options("madry", 0.2, 0.02, steps))
              ->step(fresh.context, batch.images, batch.labels),
          "attack_objective");
    };
    // One step logs the objective at the clean images (before the step): the formula itself.
    // 1e-12: host vs engine arithmetic on O(1) values.
    CHECK(objective_after(1) == Approx(clean_value).margin(1e-12));
    CHECK(objective_after(5) < clean_value - 0.01);
  }
}

TEST_CASE("Madry's step is its header's math written out: PGD hardening [a; p; n], one forward",
          "[defenses]") {
  // madry.cpp steps 1-3 re-derived on a twin (same weights, same stream) from public pieces:
  // mining with band 1.0 on the clean eval-mode embeddings, PGD (attacks/pgd.h) in eval mode on
  // the stacked [A; P; N] images descending -mean_i H(a~_i, p~_i, n~_i), then one train-mode
  // forward of the 3B adversarial images (a BN model) and the triplet loss with the loss margin.
  engine::Generator data(103);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(6, 3, data);
  const attacks::PgdOptions pgd{0.15, 0.03, 3, false, 0, 0.0};
  Harness h(25, 1, Metric::N, Miner::Semihard, 113);
  Harness twin(25, 1, Metric::N, Miner::Semihard, 113);
  models::Model& m = *twin.model;
  const Tensor clean = attacks::defenses::clean_embeddings(m, batch.images);
  const losses::Triplets t =
      losses::mine_triplets(clean, batch.labels, Miner::Semihard, Metric::N, twin.mining, 1.0);
  const int64_t b = t.size();
  m.eval();
  const Tensor adversarial = attacks::pgd_attack(
      engine::index_select(batch.images, engine::concat({t.anchor, t.positive, t.negative}, 0)),
      [&](const Tensor& x, int64_t) {
        const Tensor e = m.forward(x);
        return -engine::mean(losses::triplet_hardness(e.slice(0, 0, b), e.slice(0, b, 2 * b),
                                                      e.slice(0, 2 * b, 3 * b), Metric::N));
      },
      pgd);
  m.train();
  const Tensor e = m.forward(adversarial);
  const double expected = losses::triplet_loss_rows(e.slice(0, 0, b), e.slice(0, b, 2 * b),
                                                    e.slice(0, 2 * b, 3 * b), Metric::N, 0.2)
                              .item();

  const attacks::defenses::StepResult r =
      attacks::defenses::make_defense(
          defense_test::defense_options("madry", pgd.eps, pgd.alpha, pgd.steps))
          ->step(h.context, batch.images, batch.labels);
  // The same operations in the same order on the same values: bit-identical.
  CHECK(r.loss.item() == expected);
  CHECK(h.mining.offset == twin.mining.offset);
  CHECK(engine::nn::batch_norm_layers(*h.model)[0]->running_mean().to_vector() ==
        engine::nn::batch_norm_layers(m)[0]->running_mean().to_vector());
}

TEST_CASE("Madry: passes = steps + 1, train mode, no weight gradient, differentiable loss",
          "[defenses]") {
  engine::Generator data(102);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(4, 2, data);
  for (int64_t steps : {1, 4}) {
    INFO("steps " << steps);
    Harness h(23, 1, Metric::N, Miner::Semihard, 112);
    const auto madry =
        attacks::defenses::make_defense(defense_test::defense_options("madry", 0.1, 0.02, steps));
    const attacks::defenses::StepResult r = madry->step(h.context, batch.images, batch.labels);
    defense_test::check_step_contract(*h.model, r, steps + 1);
  }
}
