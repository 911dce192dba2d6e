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

// This rank's micro-batches are embedded first (with EST, the embeddings of their adversarial
// examples, each made on its own micro-batch with its own stream), the step's embeddings gathered
// and mined once (micro-batch 0's stream, on every rank), then each micro-batch back-propagates
// G x the step's loss through its own rows.
StepOutcome TrainingRun::step_with_global_mining(const data::Batch& batch, int64_t epoch) {
  const MicroBatchStep started = start_micro_batch_step();
  const int64_t total = started.total, local = started.local, first = started.first;
  GradientAverager gradients(averaged_parameters(*optimizer_, loss_optimizer_.get()));
  std::optional<engine::nn::BatchNormSync> synchronized_batch_norm;  // as step_in_micro_batches
  if (config_.batch_norm == "synchronized") synchronized_batch_norm.emplace(sum_over_ranks);
  const std::vector<engine::Tensor> buffers_before =
      local > 1 ? copy_buffers(*model_) : std::vector<engine::Tensor>();
  std::vector<engine::Tensor> buffers_after_first;
  std::vector<engine::Tensor> live;  // this rank's micro-batches' embeddings, with their graphs
  std::vector<int64_t> first_rows;
  std::vector<attacks::defenses::AttackedBatch> attacked;  // EST: each micro-batch's attack
  for (int64_t m = 0; m < local; ++m) {
    if (m > 0) restore_buffers(*model_, buffers_before);
    const RowRange rows = micro_batch_rows(batch.images.size(0), first + m, total);
    engine::Tensor images = batch.images.slice(0, rows.begin, rows.end).to(device_);
    if (defense_ != nullptr) {  // EST (check_global_mining refuses the others)
      const engine::Tensor labels = batch.labels.slice(0, rows.begin, rows.end).to(device_);
      engine::Generator gen = micro_batch_generator(mining_, first + m);
      attacks::defenses::TrainingContext context = context_with(gen);
      attacked.push_back(
          attacks::defenses::est_attack(config_.defense.pgd, context, images, labels));
      check_micro_batch_draws(gen, mining_, first + m);
      images = attacked.back().adversarial;
    }
    live.push_back((*model_)(images));
    first_rows.push_back(rows.begin);
    if (m == 0 && local > 1) buffers_after_first = copy_buffers(*model_);
  }
  const engine::Tensor step_embeddings = gather_step_embeddings(live);
  engine::Generator gen = micro_batch_generator(mining_, 0);
  const losses::Triplets triplets =
      losses::mine_triplets(step_embeddings, batch.labels.to(device_), config_.miner,
                            config_.metric, gen, config_.margin);
  check_micro_batch_draws(gen, mining_, 0);
  std::vector<std::string> log_names;
  std::vector<double> sums;  // the step's loss (once per micro-batch), then the defense's logs
  int64_t passes = 0;
  for (int64_t m = 0; m < local; ++m) {
    attacks::defenses::StepResult result;
    result.loss = loss_on_triplets(config_, with_live_rows(step_embeddings, live[m], first_rows[m]),
                                   triplets);
    if (!attacked.empty()) {
      result = attacks::defenses::adversarial_loss_result(result.loss, attacked[m].clean_loss,
                                                          attacked[m].trace);
    }
    const double value = result.loss.item();
    check_finite_loss(value, epoch, batch);
    optimizer_->zero_grad();
    if (loss_optimizer_) loss_optimizer_->zero_grad();
    // the last one's backward overlaps the all-reduce
    gradients.backward(engine::mul_scalar(result.loss, static_cast<double>(total)), m + 1 == local);
    live[m] = engine::Tensor();  // its graph is spent
    add_micro_batch_result(result, value, first + m, log_names, sums, passes);
  }
  return finish_micro_batch_step(batch, gradients, buffers_after_first, log_names, sums, passes,
                                 started);
}

}  // namespace dml
