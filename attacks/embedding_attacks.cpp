// TMA, ES and STAX/MTAX: attacks that move the query's embedding itself, towards a target, away
// from where it was, or onto targets of other classes (Zhou et al. TPAMI §6.1.4; MDProp eq. 3, eq.
// 16; the table: docs/attacks.md "The attacks"; the framework: attacks/attack_kinds.h).
#include "attacks/attack_kinds.h"
#include "attacks/objectives.h"
#include "engine/ops.h"

namespace attacks {

using engine::Tensor;

// TMA: pull the query's embedding towards one target drawn uniformly from the gallery.
AttackPlan plan_targeted_mismatch(const AttackBatch& batch, engine::Generator& gen) {
  const Tensor targets =
      gallery_rows(batch.gallery, select_uniform(batch.clean_table, 1, gen), batch.rows, 0);
  AttackPlan plan;
  plan.objective = [=](const Tensor& e, int64_t) { return targeted_mismatch_loss(e, targets); };
  plan.row_objective = [=](const Tensor& e, int64_t) {
    return losses::row_distance(e, targets, losses::Metric::C);
  };
  // Measure: the cosine of the query's embedding and its target.
  plan.measure = [=](const Tensor& e) { return Measures{{"TMA:cosine", row_cosine(e, targets)}}; };
  return plan;
}

// ES: push the query's embedding as far as possible from its clean embedding (no selection).
AttackPlan plan_embedding_shift(const AttackBatch& batch, engine::Generator&) {
  // At q~ = q the shift has no gradient, so the first step measures it from q + 1e-7 in every
  // coordinate, as robrank's evaluation attack (AdvRank, "avoid zero gradient"). Its training
  // adversaries (EST, REST, SES: embShift) use a random 1e-7 * {-1, 0, 1} instead
  // (attacks/defenses/common.cpp).
  const Tensor reference = batch.clean.detach();
  const Tensor first_reference = reference + 1e-7;
  const losses::Metric metric = batch.gallery.metric;
  AttackPlan plan;
  plan.objective = [=](const Tensor& e, int64_t step) {
    return embedding_shift_loss(e, step == 0 ? first_reference : reference, metric);
  };
  plan.row_objective = [=](const Tensor& e, int64_t step) {
    return -losses::row_distance(e, step == 0 ? first_reference : reference, metric);
  };
  // Measure: how far the embedding moved, and recall@1.
  plan.measure = [=](const Tensor& e) {
    return Measures{{"ES:D", row_metric_distance(e, reference, metric)},
                    {"ES:R", recall_at_1_percent(batch, e)}};
  };
  return plan;
}

// STAX (one target) and MTAX (T targets): pull the query's embedding onto targets of other,
// pairwise different classes, in squared Euclidean distance.
AttackPlan plan_feature_targeted(const AttackBatch& batch, engine::Generator& gen) {
  const int64_t rows = batch.rows;
  const int64_t count = batch.spec.kind == AttackKind::STAX ? 1 : batch.spec.T;
  const Tensor targets = gallery_rows(
      batch.gallery, select_feature_targets(batch.labels, batch.gallery.labels, count, gen), rows,
      count);
  AttackPlan plan;
  plan.objective = [=](const Tensor& e, int64_t) { return feature_targeted_loss(e, targets); };
  plan.row_objective = [=](const Tensor& e, int64_t) { return feature_targeted_rows(e, targets); };
  // Measure: recall@1, and the mean over targets of the squared distance to each.
  plan.measure = [=](const Tensor& e) {
    const std::vector<double> recall = recall_at_1_percent(batch, e);
    std::vector<double> squared(static_cast<size_t>(rows), 0.0);
    const std::vector<double> d = row_metric_distance(
        repeat_rows(e, count), targets.reshape({rows * count, targets.size(2)}), losses::Metric::E);
    for (int64_t b = 0; b < rows; ++b) {
      for (int64_t j = 0; j < count; ++j) {
        const double v = d[static_cast<size_t>(b * count + j)];
        squared[static_cast<size_t>(b)] += v * v / static_cast<double>(count);
      }
    }
    return Measures{{batch.label + ":r@1", recall}, {batch.label + ":sqdist", squared}};
  };
  return plan;
}

}  // namespace attacks
