// TrainingRun::step_with_global_mining (header: tools/dml/training_run.h): a step over
// micro-batches whose triplets are mined over the whole step (train.mining_scope "global",
// tools/dml/global_mining.h; docs/distributed.md "Global mining"). Kept beside, not in,
// training_run.cpp, which holds the run's other steps and its loop.
#include <optional>
#include <string>
#include <vector>

#include "attacks/defenses/defense.h"
#include "engine/autograd.h"
#include "engine/nn/batch_norm_sync.h"
#include "engine/ops.h"
#include "losses/miners.h"
#include "tools/dml/data_parallel.h"
#include "tools/dml/global_mining.h"
#include "tools/dml/training_loss.h"
#include "tools/dml/training_run.h"

namespace dml {

namespace {

using attacks::defenses::Recipe;

// What one micro-batch of a global-mining step computes from its own rows alone, before the
// gather (docs/distributed.md, "Global mining").
struct MicroBatchPart {
  engine::Tensor embeddings;  // the rows mined over the step, with their graph: f(x~) for EST,
                              // f(x) otherwise
  engine::Tensor shift;       // SES: each row's embedding shift [rows, 1], with its graph
  attacks::defenses::AttackedBatch attacked;  // EST, SES: the micro-batch's attack
};

// The micro-batch's part, its attack drawing from the context's (its own) stream.
MicroBatchPart embed_micro_batch(const TrainConfig& config,
                                 attacks::defenses::TrainingContext& context,
                                 const engine::Tensor& images, const engine::Tensor& labels) {
  MicroBatchPart part;
  switch (config.defense.recipe) {
    case Recipe::Est:
      part.attacked = attacks::defenses::est_attack(config.defense.pgd, context, images, labels);
      part.embeddings = context.model(part.attacked.adversarial);
      break;
    case Recipe::Ses: {
      part.attacked = attacks::defenses::ses_attack(config.defense.pgd, context, images);
      part.embeddings = context.model(images);
      const engine::Tensor shifted = context.model(part.attacked.adversarial);
      part.shift = attacks::defenses::ses_embedding_shift(shifted, part.embeddings, context.metric)
                       .unsqueeze(1);
      break;
    }
    default:  // no defense (check_global_mining refuses the others)
      part.embeddings = context.model(images);
  }
  return part;
}

// The step's loss (and logs) with the micro-batch's rows live, from row `first_row` of the step:
// the configured loss on the step's triplets, for SES plus ses_weight x the mean shift over all
// the step's rows (`step_shifts`).
attacks::defenses::StepResult micro_batch_result(const TrainConfig& config,
                                                 const engine::Tensor& step_embeddings,
                                                 const engine::Tensor& step_shifts,
                                                 const losses::Triplets& triplets,
                                                 const MicroBatchPart& part, int64_t first_row) {
  const engine::Tensor loss = loss_on_triplets(
      config, with_live_rows(step_embeddings, part.embeddings, first_row), triplets);
  switch (config.defense.recipe) {
    case Recipe::Est:
      return attacks::defenses::adversarial_loss_result(loss, part.attacked.clean_loss,
                                                        part.attacked.trace);
    case Recipe::Ses:
      return attacks::defenses::ses_loss_result(
          loss, engine::mean(with_live_rows(step_shifts, part.shift, first_row)),
          config.defense.ses_weight, part.attacked.trace);
    default: {
      attacks::defenses::StepResult result;
      result.loss = loss;
      return result;
    }
  }
}

}  // namespace

// This rank's micro-batches are embedded first (with EST, the embeddings of their adversarial
// examples; with SES, the clean ones and each row's embedding shift; each attack made on its own
// micro-batch with its own stream), the step's embeddings (and SES's shifts) gathered and the
// embeddings mined once (micro-batch 0's stream, on every rank), then each micro-batch
// back-propagates G x the step's loss through its own rows.
StepOutcome TrainingRun::step_with_global_mining(const data::Batch& batch, int64_t epoch) {
  const MicroBatchStep started = start_micro_batch_step();
  const int64_t total = started.total, local = started.local, first = started.first;
  GradientAverager gradients(averaged_parameters(*optimizer_, loss_optimizer_.get()));
  std::optional<engine::nn::BatchNormSync> synchronized_batch_norm;  // as step_in_micro_batches
  if (config_.batch_norm == "synchronized") synchronized_batch_norm.emplace(sum_over_ranks);
  const std::vector<engine::Tensor> buffers_before =
      local > 1 ? copy_buffers(*model_) : std::vector<engine::Tensor>();
  std::vector<engine::Tensor> buffers_after_first;
  std::vector<MicroBatchPart> parts;  // this rank's micro-batches', with their graphs
  std::vector<int64_t> first_rows;
  for (int64_t m = 0; m < local; ++m) {
    if (m > 0) restore_buffers(*model_, buffers_before);
    const RowRange rows = micro_batch_rows(batch.size(), first + m, total);
    engine::Generator gen = micro_batch_generator(mining_, first + m);
    attacks::defenses::TrainingContext context = context_with(gen);
    parts.push_back(embed_micro_batch(config_, context,
                                      batch.image_rows(rows.begin, rows.end).to(device_),
                                      batch.labels.slice(0, rows.begin, rows.end).to(device_)));
    check_micro_batch_draws(gen, mining_, first + m);
    first_rows.push_back(rows.begin);
    if (m == 0 && local > 1) buffers_after_first = copy_buffers(*model_);
  }
  std::vector<engine::Tensor> live, live_shifts;
  for (const MicroBatchPart& part : parts) {
    live.push_back(part.embeddings);
    if (part.shift.defined()) live_shifts.push_back(part.shift);
  }
  const engine::Tensor step_embeddings = gather_step_embeddings(live);
  const engine::Tensor step_shifts =
      live_shifts.empty() ? engine::Tensor() : gather_step_embeddings(live_shifts);
  live.clear();
  live_shifts.clear();
  engine::Generator gen = micro_batch_generator(mining_, 0);
  const losses::Triplets triplets =
      losses::mine_triplets(step_embeddings, batch.labels.to(device_), config_.miner,
                            config_.metric, gen, config_.margin);
  check_micro_batch_draws(gen, mining_, 0);
  std::vector<std::string> log_names;
  std::vector<double> sums;  // the step's loss (once per micro-batch), then the defense's logs
  int64_t passes = 0;
  for (int64_t m = 0; m < local; ++m) {
    const attacks::defenses::StepResult result = micro_batch_result(
        config_, step_embeddings, step_shifts, triplets, parts[m], first_rows[m]);
    const double value = result.loss.item();
    check_finite_loss(value, epoch, batch);
    optimizer_->zero_grad();
    if (loss_optimizer_) loss_optimizer_->zero_grad();
    // the last one's backward overlaps the all-reduce
    gradients.backward(engine::mul_scalar(result.loss, static_cast<double>(total)), m + 1 == local);
    parts[m] = MicroBatchPart();  // its graph is spent
    add_micro_batch_result(result, value, first + m, log_names, sums, passes);
  }
  return finish_micro_batch_step(batch, gradients, buffers_after_first, log_names, sums, passes,
                                 started);
}

}  // namespace dml
