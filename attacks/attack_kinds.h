// The ten attack kinds as attack_batch (attacks/attack.h) runs them: one definition each, giving
// the attack's
//   selection  the constants of its objective, chosen once from the clean ranking
//              (attacks/selection.h; the draws come from the batch's generator, in a fixed order);
//   objective  the loss PGD minimizes, as a function of the perturbed embeddings and the step
//              (attacks/objectives.h);
//   measure    what it reports for an embedding batch, clean or adversarial, with that same
//              selection (attacks/measures.h).
// A definition is a function that makes the selection and returns the objective and the measure
// as closures over it (AttackPlan); kAttackDefinitions is the table of kinds, names and
// definitions. The families, one file each (the table: docs/attacks.md "The attacks"):
//   attacks/rank_attacks.cpp       CA±, QA±, SP-QA± (the rank of chosen candidates/queries)
//   attacks/embedding_attacks.cpp  TMA, ES, STAX/MTAX (the embedding itself: its cosine to a
//                                  target, its shift, its distance to targets)
//   attacks/top1_attacks.cpp       LTM, GTM, GTT (the top of the image's own ranking)
// This header is internal to attacks/: callers use attack_batch.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "attacks/attack.h"
#include "attacks/selection.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "losses/distance.h"

namespace attacks {

// What every definition sees of one attacked batch: the clean embeddings (as the metric sees
// them) and their ranking against the gallery, before any PGD step.
struct AttackBatch {
  const AttackSpec& spec;
  const AttackOptions& options;
  const std::string& label;  // attack_label(spec), the measures' prefix
  const Gallery& gallery;
  const std::vector<int64_t>& labels;      // B
  const std::vector<int64_t>& self_index;  // B gallery rows, -1 = none
  const engine::Tensor& clean;             // [B, D]
  const DistanceTable& clean_table;        // d(clean_b, x) over the gallery
  int64_t rows = 0;                        // B
};

struct AttackPlan {
  // The loss of the perturbed embeddings [B, D] before PGD step `step` (0-based).
  std::function<engine::Tensor(const engine::Tensor& embeddings, int64_t step)> objective;
  std::function<Measures(const engine::Tensor& embeddings)> measure;
  // Each image's own loss [B] (the objective is their mean): what the NES black-box attack
  // estimates its gradient from (attacks/nes.h), never differentiated.
  std::function<engine::Tensor(const engine::Tensor& embeddings, int64_t step)> row_objective;
  // The objective reads device data on the host at every step (PgdOptions::host_objective).
  bool host_objective = false;
};

struct AttackDefinition {
  AttackKind kind;
  const char* name;  // the spec's keyword, e.g. "CA"
  AttackPlan (*plan)(const AttackBatch& batch, engine::Generator& gen);
};
extern const AttackDefinition kAttackDefinitions[10];
const AttackDefinition& attack_definition(AttackKind kind);

// The definitions (selection, objective, measure), by family.
AttackPlan plan_candidate_attack(const AttackBatch& batch, engine::Generator& gen);  // CA±
AttackPlan plan_query_attack(const AttackBatch& batch, engine::Generator& gen);      // QA±
AttackPlan plan_semantic_preserving_query_attack(const AttackBatch& batch,
                                                 engine::Generator& gen);               // SP-QA±
AttackPlan plan_targeted_mismatch(const AttackBatch& batch, engine::Generator& gen);    // TMA
AttackPlan plan_embedding_shift(const AttackBatch& batch, engine::Generator& gen);      // ES
AttackPlan plan_feature_targeted(const AttackBatch& batch, engine::Generator& gen);     // STAX/MTAX
AttackPlan plan_learning_to_misrank(const AttackBatch& batch, engine::Generator& gen);  // LTM
AttackPlan plan_greedy_top1_misrank(const AttackBatch& batch, engine::Generator& gen);  // GTM
AttackPlan plan_greedy_top1_translocation(const AttackBatch& batch,
                                          engine::Generator& gen);  // GTT

// attack_batch's body (attacks/attack.cpp): with `source` (and its gallery) given, the transfer
// attack of transfer_attack_batch; without, the attack on `model` itself.
BatchResult attack_batch_through(models::Model& model, const Gallery& gallery,
                                 models::Model* source, const Gallery* source_gallery,
                                 const engine::Tensor& images, const std::vector<int64_t>& labels,
                                 const std::vector<int64_t>& self_index, const AttackSpec& spec,
                                 engine::Generator& gen, const AttackOptions& options);

// Helpers the definitions share (no gradients unless said).

// Gallery rows picked by a row-major index list, reshaped to [B, per_row, D] (or [B, D] when
// per_row is 0).
engine::Tensor gallery_rows(const Gallery& gallery, const std::vector<int64_t>& indices,
                            int64_t rows, int64_t per_row);
// d(embeddings_b, x) over the gallery, on the host.
DistanceTable distance_table(const engine::Tensor& embeddings, const Gallery& gallery,
                             const std::vector<int64_t>& self_index);
// The metric's distance between matching rows of a and b [R, D], exactly (no epsilon): robrank's
// `(Q - c).norm(2)` for N and E, 1 - cos for C.
std::vector<double> row_metric_distance(const engine::Tensor& a, const engine::Tensor& b,
                                        losses::Metric metric);
std::vector<double> row_cosine(const engine::Tensor& a, const engine::Tensor& b);
// Fractions and hits as percent (x 100; a hit is 100, a miss 0).
std::vector<double> percent(const std::vector<double>& fractions);
std::vector<double> percent(const std::vector<bool>& hits);
// [B, D] repeated per_row times along a new axis and flattened: row b*per_row + w = a[b].
engine::Tensor repeat_rows(const engine::Tensor& a, int64_t per_row);
// recall@1 of the embeddings against the gallery (ES:R, LTM, GTM, STAX/MTAX), in percent.
std::vector<double> recall_at_1_percent(const AttackBatch& batch, const engine::Tensor& embeddings);

}  // namespace attacks
