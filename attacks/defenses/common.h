// What several adversarial-training recipes share (defense.h lists the recipes): the clean
// reference embeddings, row gathering, robrank's sampling margin for training-time adversaries,
// and the embedding-shift (ES) adversary of EST, REST and SES.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "attacks/defenses/defense.h"
#include "attacks/pgd.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "losses/distance.h"
#include "losses/miners.h"
#include "models/model.h"

namespace attacks::defenses {

// The model's embeddings of `images` in eval mode, without gradient (model.eval() for the call,
// the previous mode restored): what every recipe mines on and measures against. Raw model
// outputs (not normalized).
engine::Tensor clean_embeddings(models::Model& model, const engine::Tensor& images);

// Rows `index` (I64 [T] on any device) of x [N, ...]: engine::index_select after moving the index
// to x's device.
engine::Tensor gather_rows(const engine::Tensor& x, const engine::Tensor& index);

// Semihard's band width when REST, ACT and Madry sample triplets for their adversary: robrank
// passes its Euclidean triplet margin 1.0 for metrics E and N and 0.2 only for C
// (docs/defenses.md, "Mining margin of the adversaries"). HM passes the loss margin instead.
double adversary_mining_margin(losses::Metric metric);

// Step 1 of REST, ACT and Madry: the clean embeddings of `images` (clean_embeddings()) and the
// triplets their adversary attacks, mined on those with the loss's miner and the adversary's band
// (adversary_mining_margin), drawing from context.mining.
struct AdversaryTriplets {
  engine::Tensor clean;
  losses::Triplets triplets;
};
AdversaryTriplets mine_adversary_triplets(TrainingContext& context, const engine::Tensor& images,
                                          const engine::Tensor& labels);

// PGD as every recipe's adversary runs it: with the model in eval mode for the attack (its mode
// restored after; attacks/pgd.h says why) and the random start, if any, drawn from `gen` (seeded(),
// one draw from the recipe's mining stream). Returns the adversarial images; `trace` receives the
// PGD trace.
engine::Tensor adversary_pgd(models::Model& model, const engine::Tensor& images,
                             const Objective& objective, const PgdOptions& options,
                             engine::Generator& gen, PgdTrace* trace);

// robrank's embedding-shift adversary (AdvRank.embShift), the adversary of EST, REST and SES:
// PGD descending -mean_i d(f^(x~_i), r_i) from x~ = images, where r = embed_for_metric(reference)
// is the clean embedding of each image, offset by 1e-7 * {-1, 0, 1} (uniform, from `gen`) at the
// first step, as robrank does, so the shift's gradient at x~ = x is defined. For N and E the
// distance ||e - r + 1e-6|| (PyTorch's pairwise_distance, attacks/objectives.h) adds 1e-6 to every
// coordinate, which outweighs the 1e-7 offset: the first step's direction is nearly the same for
// every row, in robrank as here. Runs through adversary_pgd.
engine::Tensor embedding_shift_adversary(models::Model& model, const engine::Tensor& images,
                                         const engine::Tensor& reference, losses::Metric metric,
                                         const PgdOptions& options, engine::Generator& gen,
                                         PgdTrace* trace);

// Appends what a training adversary did to a step's logs: "attack_objective<suffix>" (the
// objective before its last step) and "max_delta<suffix>" (max |x~ - x| over the adversarial
// images after it: the bound every attack reports, docs/attacks.md). Nothing when no step ran.
void log_attack(std::vector<std::pair<std::string, engine::Tensor>>& logs, const PgdTrace& trace,
                const std::string& suffix = "");

// The training loss of triplets `t` on the clean embeddings `clean` (clean_embeddings(): eval
// mode, no gradient, so nothing is recorded):
// robrank's Train/loss_orig, logged as "clean_loss" beside the adversarial loss by the recipes
// that train on triplets (ACT, REST, Madry, HM).
engine::Tensor clean_triplet_loss(const engine::Tensor& clean, const losses::Triplets& t,
                                  losses::Metric metric, double margin);

// The StepResult of a recipe that attacked once (`trace`, its PGD trace) and trains on `loss`:
// the logs `logs` followed by the attack's (log_attack), and passes = the PGD steps taken + 1
// (defense.h). SES calls it directly; the recipes that log their clean and adversarial losses
// call adversarial_loss_result().
StepResult adversarial_step_result(const engine::Tensor& loss,
                                   std::vector<std::pair<std::string, engine::Tensor>> logs,
                                   const PgdTrace& trace);

// adversarial_loss_result() (EST, REST, ACT and Madry) is declared in defense.h: the trainer's
// global mining with EST uses it too.

}  // namespace attacks::defenses
