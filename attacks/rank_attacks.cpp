// CA±, QA± and SP-QA±: attacks on the rank of chosen candidates or queries (Zhou et al. TPAMI §3,
// §6.1; the table: docs/attacks.md "The attacks"; the framework: attacks/attack_kinds.h).
#include <memory>

#include "attacks/attack_kinds.h"
#include "attacks/measures.h"
#include "attacks/objectives.h"
#include "engine/autograd.h"
#include "kernels/common/check.h"

namespace attacks {

using engine::Tensor;

// CA±: perturb the candidate c so that it rises (+) or sinks (-) in the rankings of W queries.
AttackPlan plan_candidate_attack(const AttackBatch& batch, engine::Generator& gen) {
  const AttackSpec& spec = batch.spec;
  const int64_t rows = batch.rows, nx = batch.clean_table.gallery;
  const losses::Metric metric = batch.gallery.metric;
  // Selection: W queries per candidate, uniform over the gallery (CA+) or its top-1% (CA-).
  const std::vector<int64_t> picked = spec.raise ? select_uniform(batch.clean_table, spec.W, gen)
                                                 : select_from_top(batch.clean_table, spec.W, gen);
  const Tensor queries = gallery_rows(batch.gallery, picked, rows, spec.W);
  const Tensor flat_queries = queries.reshape({rows * spec.W, queries.size(2)});
  Tensor query_gallery;
  {
    engine::NoGradGuard no_grad;
    query_gallery = gallery_distance(flat_queries, batch.gallery.embeddings, metric)
                        .reshape({rows, spec.W, nx});
  }
  const std::vector<double> qg = query_gallery.to_vector();
  auto qg_float = std::make_shared<std::vector<float>>(qg.begin(), qg.end());
  // The gallery holds the candidate's own clean copy. Its row entry came from the pairwise
  // kernel, while the measure computes d(c~, q) with row_metric_distance, so for the clean
  // candidate (c~ = c) the two are equal up to rounding and "strictly nearer" would be decided
  // by rounding, differently on CPU and GPU. Measure the copy with the same function as the
  // candidate: then the clean copy ties with the clean candidate exactly and is never ahead of
  // it, and it is ahead of a perturbed candidate exactly when d(c, q) < d(c~, q), as robrank.
  const std::vector<double> copy_to_query =
      row_metric_distance(repeat_rows(batch.clean, spec.W), flat_queries, metric);
  for (int64_t b = 0; b < rows; ++b) {
    if (batch.self_index[b] < 0) continue;
    for (int64_t w = 0; w < spec.W; ++w) {
      const int64_t pair = b * spec.W + w;
      (*qg_float)[pair * nx + batch.self_index[b]] = static_cast<float>(copy_to_query[pair]);
    }
  }
  AttackPlan plan;
  plan.objective = [=](const Tensor& e, int64_t) {
    return candidate_attack_loss(e, queries, query_gallery, metric, spec.raise);
  };
  plan.row_objective = [=](const Tensor& e, int64_t) {
    return candidate_attack_rows(e, queries, query_gallery, metric, spec.raise);
  };
  // Measure: the percentile of the candidate in its queries' rankings.
  plan.measure = [=, label = batch.label](const Tensor& e) {
    const std::vector<double> to_query =
        row_metric_distance(repeat_rows(e, spec.W), flat_queries, metric);
    const std::vector<float> c2q(to_query.begin(), to_query.end());
    return Measures{
        {label + ":prank", percent(candidate_percentile(*qg_float, c2q, rows, spec.W, nx))}};
  };
  return plan;
}

namespace {

// QA± and SP-QA±'s candidates: M per query, uniform over the gallery (+) or distinct from the
// query's top-1% (-).
struct QueryCandidates {
  std::vector<int64_t> indices;  // [B * M] gallery rows
  Tensor embeddings;             // [B, M, D]
};
QueryCandidates select_query_candidates(const AttackBatch& batch, engine::Generator& gen) {
  QueryCandidates candidates;
  candidates.indices = batch.spec.raise
                           ? select_uniform(batch.clean_table, batch.spec.M, gen)
                           : select_distinct_from_top(batch.clean_table, batch.spec.M, gen);
  candidates.embeddings = gallery_rows(batch.gallery, candidates.indices, batch.rows, batch.spec.M);
  return candidates;
}

}  // namespace

// QA±: perturb the query q so that M candidates rise (+) or sink (-) in its ranking.
AttackPlan plan_query_attack(const AttackBatch& batch, engine::Generator& gen) {
  const AttackSpec& spec = batch.spec;
  const Gallery& gallery = batch.gallery;
  const losses::Metric metric = gallery.metric;
  const QueryCandidates candidates = select_query_candidates(batch, gen);
  AttackPlan plan;
  plan.objective = [=](const Tensor& e, int64_t) {
    const Tensor to_gallery = gallery_distance(e, gallery.embeddings, metric);
    return query_attack_loss_from_distances(e, candidates.embeddings, to_gallery, metric,
                                            spec.raise);
  };
  plan.row_objective = [=](const Tensor& e, int64_t) {
    const Tensor to_gallery = gallery_distance(e, gallery.embeddings, metric);
    return query_attack_rows_from_distances(e, candidates.embeddings, to_gallery, metric,
                                            spec.raise);
  };
  // Measure: the candidates' rank in the perturbed query's ranking.
  plan.measure = [=, label = batch.label, self_index = batch.self_index](const Tensor& e) {
    const DistanceTable table = distance_table(e, gallery, self_index);
    return Measures{
        {label + ":prank", percent(query_percentile(table, candidates.indices, spec.M))}};
  };
  return plan;
}

// SP-QA±: QA± plus G semantic-preserving references that the query keeps near (Zhou et al. TPAMI
// §6.1, eq. 12), weighted by xi = min(1e9, exp(zeta * L_SP)).
AttackPlan plan_semantic_preserving_query_attack(const AttackBatch& batch, engine::Generator& gen) {
  const AttackSpec& spec = batch.spec;
  const Gallery& gallery = batch.gallery;
  const losses::Metric metric = gallery.metric;
  const QueryCandidates candidates = select_query_candidates(batch, gen);
  const std::vector<int64_t> references =
      select_semantic_references(batch.clean_table, candidates.indices, spec.M, spec.G, spec.raise);
  ENGINE_CHECK(static_cast<int64_t>(references.size()) == batch.rows * spec.G, batch.label,
               ": the gallery is too small for ", spec.G,
               " semantic-preserving references per query");
  const Tensor reference_rows = gallery_rows(gallery, references, batch.rows, spec.G);
  ENGINE_CHECK(spec.zeta > 0.0, batch.label,
               ": zeta is not set (the caller fills in default_zeta)");
  const bool batch_xi = batch.options.robrank_compat;
  AttackPlan plan;
  plan.objective = [=](const Tensor& e, int64_t) {
    // One query-vs-gallery distance matrix per step serves both QA terms.
    const Tensor to_gallery = gallery_distance(e, gallery.embeddings, metric);
    return semantic_preserving_query_loss(
        query_attack_rows_from_distances(e, candidates.embeddings, to_gallery, metric, spec.raise),
        query_attack_rows_from_distances(e, reference_rows, to_gallery, metric, true), spec.zeta,
        batch_xi);
  };
  plan.row_objective = [=](const Tensor& e, int64_t) {
    const Tensor to_gallery = gallery_distance(e, gallery.embeddings, metric);
    return semantic_preserving_query_rows(
        query_attack_rows_from_distances(e, candidates.embeddings, to_gallery, metric, spec.raise),
        query_attack_rows_from_distances(e, reference_rows, to_gallery, metric, true), spec.zeta,
        batch_xi);
  };
  // Measure: the candidates' rank and the references' rank in the perturbed query's ranking.
  plan.measure = [=, label = batch.label, self_index = batch.self_index](const Tensor& e) {
    const DistanceTable table = distance_table(e, gallery, self_index);
    return Measures{
        {label + ":prank", percent(query_percentile(table, candidates.indices, spec.M))},
        {label + ":GTprank", percent(query_percentile(table, references, spec.G))}};
  };
  return plan;
}

}  // namespace attacks
