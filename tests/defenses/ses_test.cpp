// SES (attacks/defenses/ses.cpp): with eps = 0 the loss is the clean loss plus ses_weight times
// the shift between identical embeddings, which is hand-computable for every metric; after its
// ES adversary the shift is a real one; a step with a budget equals ses.cpp's math written out
// with public pieces on a twin, bit for bit. The step contract and the ES adversary's direction,
// which every recipe (every ES recipe) shares, are in contract_test.cpp.
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

TEST_CASE("SES trains against a real shift after its adversary: embedding_shift well above 2e-6",
          "[defenses]") {
  // After 5 steps of 0.02 the ES adversary has moved the embeddings by O(0.1) (contract_test.cpp),
  // so the shift SES logs and trains against is far above the 2e-6 of identical rows.
  engine::Generator data(62);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(4, 2, data);
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
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    INFO("metric " << losses::metric_name(metric));
    defense_test::TwinSetup s(64, 19, 74, metric);
    const defense_test::Spc2Batch& batch = s.batch;
    models::Model& m = *s.twin.model;
    const Tensor reference = attacks::defenses::clean_embeddings(m, batch.images);
    const Tensor adversarial = attacks::defenses::embedding_shift_adversary(
        m, batch.images, reference, metric, s.pgd, s.twin.mining, nullptr);
    const Tensor e = m.forward(batch.images);
    const Tensor shifted = m.forward(adversarial);
    const double clean_loss = s.twin.context.loss(e, batch.labels, s.twin.mining).item();
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

    attacks::defenses::DefenseOptions o = s.options("ses");
    o.ses_weight = 0.5;
    const attacks::defenses::StepResult r = s.step(o);
    CHECK(defense_test::log_value(r, "clean_loss") == clean_loss);
    CHECK(defense_test::log_value(r, "embedding_shift") == mean_shift);
    s.check_matches_twin(r, clean_loss + mean_shift * 0.5);
  }
}
