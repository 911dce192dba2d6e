// The table of attack kinds and the helpers their definitions share (header:
// attacks/attack_kinds.h).
#include "attacks/attack_kinds.h"

#include "attacks/measures.h"
#include "attacks/objectives.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "kernels/common/check.h"

namespace attacks {

using engine::Tensor;
using losses::Metric;

const AttackDefinition kAttackDefinitions[10] = {
    {AttackKind::CA, "CA", plan_candidate_attack},
    {AttackKind::QA, "QA", plan_query_attack},
    {AttackKind::SPQA, "SPQA", plan_semantic_preserving_query_attack},
    {AttackKind::TMA, "TMA", plan_targeted_mismatch},
    {AttackKind::ES, "ES", plan_embedding_shift},
    {AttackKind::LTM, "LTM", plan_learning_to_misrank},
    {AttackKind::GTM, "GTM", plan_greedy_top1_misrank},
    {AttackKind::GTT, "GTT", plan_greedy_top1_translocation},
    {AttackKind::STAX, "STAX", plan_feature_targeted},
    {AttackKind::MTAX, "MTAX", plan_feature_targeted},
};

const AttackDefinition& attack_definition(AttackKind kind) {
  for (const AttackDefinition& definition : kAttackDefinitions) {
    if (definition.kind == kind) return definition;
  }
  engine::fail("attack kind ", static_cast<int>(kind), " has no definition");
}

Tensor gallery_rows(const Gallery& gallery, const std::vector<int64_t>& indices, int64_t rows,
                    int64_t per_row) {
  const Tensor index = Tensor::from_indices(indices, {static_cast<int64_t>(indices.size())},
                                            gallery.embeddings.device());
  const Tensor picked = engine::index_select(gallery.embeddings, index);
  const int64_t d = gallery.embeddings.size(1);
  return per_row == 0 ? picked.reshape({rows, d}) : picked.reshape({rows, per_row, d});
}

DistanceTable distance_table(const Tensor& embeddings, const Gallery& gallery,
                             const std::vector<int64_t>& self_index) {
  engine::NoGradGuard no_grad;
  const Tensor d = gallery_distance(embeddings, gallery.embeddings, gallery.metric);
  DistanceTable table;
  table.rows = d.size(0);
  table.gallery = d.size(1);
  const std::vector<double> values = d.to_vector();
  table.distances.assign(values.begin(), values.end());
  table.self_index = self_index;
  return table;
}

std::vector<double> row_metric_distance(const Tensor& a, const Tensor& b, Metric metric) {
  engine::NoGradGuard no_grad;
  if (metric == Metric::C) {
    const Tensor dot = engine::sum(a * b, {1});
    const Tensor norms = engine::sqrt(engine::sum(a * a, {1}) * engine::sum(b * b, {1}));
    return ((dot / norms) * -1.0 + 1.0).to_vector();
  }
  const Tensor diff = a - b;
  return engine::sqrt(engine::sum(diff * diff, {1})).to_vector();
}

std::vector<double> row_cosine(const Tensor& a, const Tensor& b) {
  engine::NoGradGuard no_grad;
  const Tensor dot = engine::sum(a * b, {1});
  const Tensor norms = engine::sqrt(engine::sum(a * a, {1}) * engine::sum(b * b, {1}));
  return (dot / norms).to_vector();
}

std::vector<double> percent(const std::vector<double>& fractions) {
  std::vector<double> out(fractions.size());
  for (size_t i = 0; i < fractions.size(); ++i) out[i] = 100.0 * fractions[i];
  return out;
}

std::vector<double> percent(const std::vector<bool>& hits) {
  std::vector<double> out(hits.size());
  for (size_t i = 0; i < hits.size(); ++i) out[i] = hits[i] ? 100.0 : 0.0;
  return out;
}

Tensor repeat_rows(const Tensor& a, int64_t per_row) {
  const int64_t rows = a.size(0), d = a.size(1);
  return a.unsqueeze(1).expand({rows, per_row, d}).reshape({rows * per_row, d});
}

std::vector<double> recall_at_1_percent(const AttackBatch& batch, const Tensor& embeddings) {
  const DistanceTable table = distance_table(embeddings, batch.gallery, batch.self_index);
  return percent(recall_at_1(table, batch.labels, batch.gallery.labels));
}

}  // namespace attacks
