// SES (attacks/defenses/ses.cpp): with eps = 0 the loss is the clean loss plus ses_weight times
// the shift between identical embeddings, which is hand-computable for every metric; with a
// budget its ES adversary shifts the embeddings; a step with a budget equals ses.cpp's math
// written out with public pieces on a twin, bit for bit; and it keeps the step contract of
// defense.h.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "attacks/defenses/common.h"
#include "attacks/defenses/defense.h"
#include "attacks/pgd.h"
#include "engine/ops.h"
#include "tests/defenses/fixture.h"

namespace {

using defense_test::Harness;
using engine::Tensor;
using losses::Metric;
using losses::Miner;

}  // namespace

TEST_CASE(
    "SES with eps = 0 is the clean loss plus ses_weight times the shift of identical "
    "embeddings",
    "[defenses]") {
  // The hardest miner: the clean loss depends on the embeddings only, not on how far the ES
  // adversary advanced the mining stream. A BN model (one branch): SES trains on train-mode
  // embeddings (batch statistics), which the twin reproduces with one train-mode forward.
  engine::Generator data(61);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(5, 3, data);
  const double weight = 3.0;
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    INFO("metric " << losses::metric_name(metric));
    Harness h(17, 1, metric, Miner::Hardest, 71);
    Harness twin(17, 1, metric, Miner::Hardest, 71);
    const Tensor e = twin.model->forward(batch.images);
    engine::Generator any(5);
    const double clean_loss =
        losses::spc2_triplet_loss(e, batch.labels, Miner::Hardest, metric, any).item();

    // The mean shift s between e~ = e (eps = 0: the same images through the same train-mode
    // forward give bit-identical rows):
    double shift = 0.0;
    double tolerance = 0.0;
    if (metric == Metric::N) {
      // ||n(e) - n(e) + 1e-6 * 1|| = 1e-6 sqrt(D) = 2e-6 for D = 4, every row.
      shift = 2e-6;
      tolerance = 1e-18;  // a few ulps of 2e-6 (1e-6 squared, summed and square-rooted)
    } else if (metric == Metric::C) {
      // 1 - cos(e, e) = 0, up to the rounding of a 4-term dot product of unit rows (~1e-16).
      shift = 0.0;
      tolerance = 1e-14;
    } else {
      // E: robrank normalizes only the adversarial side: ||n(e_i) - e_i + 1e-6 * 1||, which is
      // not 0 (the rows of e are not unit).
      const defense_test::Rows rows = defense_test::host_rows(e);
      for (const std::vector<double>& row : rows) {
        shift += defense_test::offset_euclidean(defense_test::unit(row), row);
      }
      shift /= static_cast<double>(rows.size());
      REQUIRE(shift > 0.1);  // a real term, not a rounding residue
      tolerance = 1e-13;     // host vs engine summation order of ~10 O(1) terms
    }

    attacks::defenses::DefenseOptions o = defense_test::defense_options("ses", 0.0, 0.01, 3);
    o.ses_weight = weight;
    const auto ses = attacks::defenses::make_defense(o);
    const attacks::defenses::StepResult r = ses->step(h.context, batch.images, batch.labels);
    CHECK(defense_test::log_value(r, "clean_loss") == clean_loss);
    const double logged_shift = defense_test::log_value(r, "embedding_shift");
    CHECK(std::fabs(logged_shift - shift) <= tolerance);
    // loss - clean_loss recovers weight * shift up to one rounding of the sum (ulp(loss) ~ 1e-16).
    CHECK(std::fabs((r.loss.item() - clean_loss) - weight * shift) <= 3.0 * tolerance + 1e-15);
  }
}

TEST_CASE("SES's adversary shifts the embeddings: attack_objective below its clean value",
          "[defenses]") {
  // attack_objective = -mean_i d(f^(x~_i), f^(x_i)) before the last step: with one step the
  // clean images' value (fixture.h check_clean_es_objective); after 4 steps of 0.02 the
  // embeddings have moved by O(0.1).
  engine::Generator data(62);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(4, 2, data);
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    INFO("metric " << losses::metric_name(metric));
    const double one =
        defense_test::attack_objective_after("ses", 1, 18, metric, Miner::Hardest, 72, batch);
    defense_test::check_clean_es_objective(one, metric);
    CHECK(defense_test::attack_objective_after("ses", 5, 18, metric, Miner::Hardest, 72, batch) <
          one - 1e-3);
  }
  // The shift SES trains against is then a real shift too (well above the 2e-6 of identical rows).
  Harness h(18, 0, Metric::N, Miner::Hardest, 72);
  const attacks::defenses::StepResult r =
      attacks::defenses::make_defense(defense_test::defense_options("ses", 0.2, 0.02, 5))
          ->step(h.context, batch.images, batch.labels);
  CHECK(defense_test::log_value(r, "embedding_shift") > 1e-3);
}

TEST_CASE("SES's step is its header's math written out: ES adversary, then L(f(x)) + w * shift",
          "[defenses]") {
  // ses.cpp steps 1-2 re-derived on a twin (same weights, same stream) from public pieces, with
  // the shift of each metric as the header writes it (n = L2 normalization):
  //   N: ||n(e~) - n(e) + 1e-6||   E: ||n(e~) - e + 1e-6||   C: 1 - cos(e~, e)
  engine::Generator data(64);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(6, 3, data);
  const attacks::PgdOptions pgd{0.15, 0.03, 3, false, 0, 0.0};
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    INFO("metric " << losses::metric_name(metric));
    Harness h(19, 1, metric, Miner::Semihard, 74);
    Harness twin(19, 1, metric, Miner::Semihard, 74);
    models::Model& m = *twin.model;
    const Tensor reference = attacks::defenses::clean_embeddings(m, batch.images);
    const Tensor adversarial = attacks::defenses::embedding_shift_adversary(
        m, batch.images, reference, metric, pgd, twin.mining, nullptr);
    const Tensor e = m.forward(batch.images);
    const Tensor shifted = m.forward(adversarial);
    const double clean_loss = twin.context.loss(e, batch.labels, twin.mining).item();
    const Tensor normalized_shifted = losses::embed_for_metric(shifted, Metric::N);
    Tensor shift;
    if (metric == Metric::N) {
      shift = losses::row_distance(normalized_shifted, losses::embed_for_metric(e, Metric::N),
                                   Metric::E);
    } else if (metric == Metric::E) {
      shift = losses::row_distance(normalized_shifted, e, Metric::E);
    } else {
      shift = losses::row_distance(shifted, e, Metric::C);
    }
    const double mean_shift = engine::mean(shift).item();

    attacks::defenses::DefenseOptions o =
        defense_test::defense_options("ses", pgd.eps, pgd.alpha, pgd.steps);
    o.ses_weight = 0.5;
    const attacks::defenses::StepResult r =
        attacks::defenses::make_defense(o)->step(h.context, batch.images, batch.labels);
    CHECK(defense_test::log_value(r, "clean_loss") == clean_loss);
    CHECK(defense_test::log_value(r, "embedding_shift") == mean_shift);
    CHECK(r.loss.item() == clean_loss + mean_shift * 0.5);
    CHECK(h.mining.offset == twin.mining.offset);
  }
}

TEST_CASE("SES: passes = steps + 1, train mode, no weight gradient, differentiable loss",
          "[defenses]") {
  engine::Generator data(63);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(4, 2, data);
  for (int64_t steps : {1, 4}) {
    INFO("steps " << steps);
    Harness h(19, 1, Metric::N, Miner::Semihard, 73);
    const auto ses =
        attacks::defenses::make_defense(defense_test::defense_options("ses", 0.1, 0.02, steps));
    const attacks::defenses::StepResult r = ses->step(h.context, batch.images, batch.labels);
    defense_test::check_step_contract(*h.model, r, steps + 1);
  }
}
