// LTM, GTM and GTT: attacks on the top of the query's own ranking, its nearest neighbours (seed
// 004 §6.1.4; the table: docs/attacks.md "The attacks"; the framework: attacks/attack_kinds.h).
#include "attacks/attack_kinds.h"
#include "attacks/measures.h"
#include "attacks/objectives.h"

namespace attacks {

using engine::Tensor;

// LTM: push the farthest other-class item nearer than the nearest same-class item (no selection;
// robrank_compat keeps the image's own copy among the same-class items, as robrank).
AttackPlan plan_learning_to_misrank(const AttackBatch& batch, engine::Generator&) {
  const bool include_self = batch.options.robrank_compat;
  AttackPlan plan;
  plan.objective = [=](const Tensor& e, int64_t) {
    return learning_to_misrank_loss(e, batch.gallery.embeddings, batch.gallery.labels, batch.labels,
                                    batch.self_index, batch.gallery.metric, include_self);
  };
  plan.row_objective = [=](const Tensor& e, int64_t) {
    return learning_to_misrank_rows(e, batch.gallery.embeddings, batch.gallery.labels, batch.labels,
                                    batch.self_index, batch.gallery.metric, include_self);
  };
  // Measure: recall@1.
  plan.measure = [=](const Tensor& e) {
    return Measures{{"LTM:r@1", recall_at_1_percent(batch, e)}};
  };
  plan.host_objective = true;  // learning_to_misrank_loss picks its rows on the host
  return plan;
}

// GTM: pull the query onto the nearest item of another class.
AttackPlan plan_greedy_top1_misrank(const AttackBatch& batch, engine::Generator&) {
  const Tensor targets = gallery_rows(
      batch.gallery,
      select_greedy_misrank_targets(batch.clean_table, batch.labels, batch.gallery.labels,
                                    batch.options.robrank_compat),
      batch.rows, 0);
  const losses::Metric metric = batch.gallery.metric;
  AttackPlan plan;
  plan.objective = [=](const Tensor& e, int64_t) {
    return greedy_top1_misrank_loss(e, targets, metric);
  };
  plan.row_objective = [=](const Tensor& e, int64_t) {
    return losses::row_distance(e, targets, metric);
  };
  // Measure: recall@1.
  plan.measure = [=](const Tensor& e) {
    return Measures{{"GTM:r@1", recall_at_1_percent(batch, e)}};
  };
  return plan;
}

// GTT: push the clean top-1 item out of the query's top ranks (QA- with that one candidate).
AttackPlan plan_greedy_top1_translocation(const AttackBatch& batch, engine::Generator&) {
  const std::vector<int64_t> top1 = select_nearest(batch.clean_table);
  const Tensor candidates = gallery_rows(batch.gallery, top1, batch.rows, 1);
  AttackPlan plan;
  plan.objective = [=](const Tensor& e, int64_t) {
    return query_attack_loss(e, candidates, batch.gallery.embeddings, batch.gallery.metric, false);
  };
  plan.row_objective = [=](const Tensor& e, int64_t) {
    const Tensor to_gallery = gallery_distance(e, batch.gallery.embeddings, batch.gallery.metric);
    return query_attack_rows_from_distances(e, candidates, to_gallery, batch.gallery.metric, false);
  };
  // Measure: whether the clean top-1 item is still among the first 4, and first 1, items.
  plan.measure = [=](const Tensor& e) {
    const DistanceTable table = distance_table(e, batch.gallery, batch.self_index);
    return Measures{{"GTT:retain@4", percent(retained_in_top(table, top1, 4))},
                    {"GTT:retain@1", percent(retained_in_top(table, top1, 1))}};
  };
  return plan;
}

}  // namespace attacks
