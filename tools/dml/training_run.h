// One run of `dml train`, as the loop of dml::train (trainer.cpp) drives it: each concern of the
// loop (set-up, one optimizer step, the progress log, evaluation, the checkpoint, the early stop,
// the final outputs) is one method here. What a step does, the run's randomness and its outputs:
// trainer.h; the checkpoint: train_checkpoint.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attacks/defenses/defense.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/sampler.h"
#include "engine/device.h"
#include "engine/optim/optimizer.h"
#include "engine/random.h"
#include "metrics/evaluate.h"
#include "models/model.h"
#include "tools/dml/config.h"
#include "tools/dml/data_parallel.h"
#include "tools/dml/train_checkpoint.h"
#include "tools/dml/trainer.h"
#include "tools/dml/training_loss.h"

namespace dml {

class RunLog;

// What one optimizer step leaves for the progress log.
struct StepOutcome {
  double loss = 0.0;   // the batch's loss
  int64_t images = 0;  // images in the batch
  // The defense's log values of this step (attacks/defenses/defense.h StepResult::logs).
  std::vector<std::pair<std::string, engine::Tensor>> defense_logs;
};

// The steps since the last progress line (within one epoch): their wall time and images, for
// images/s.
struct ProgressWindow {
  std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now();
  int64_t images = 0;
};

class TrainingRun {
 public:
  // Opens the data, clears stale outputs, builds the model, sampler, loss, defense and optimizers
  // (in the order that fixes the draws of the init generator), restores the checkpoint on
  // --resume, opens the log and prints the run's opening line.
  TrainingRun(const TrainConfig& config, const TrainOptions& options);
  ~TrainingRun();
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  // The sampler's cursor: the epoch and batch the run continues from.
  data::SamplerState cursor() const { return sampler_->state(); }
  int64_t batches_per_epoch() const { return per_epoch_; }
  const data::Dataset& train_set() const { return *train_set_; }
  // The batches of the current epoch from batch `first` on (the epoch truncated to
  // max_batches_per_epoch), and how the loader loads them.
  std::vector<std::vector<int64_t>> rest_of_epoch(int64_t first) const;
  data::LoaderOptions loader_options(int64_t epoch, int64_t first) const;

  // One optimizer step on `batch`; advances the sampler's cursor past it.
  StepOutcome step(const data::Batch& batch, int64_t epoch);
  // A progress record (log.jsonl) and line (stderr) after every log_every_batches batches and
  // at the epoch's last; starts a new window.
  bool progress_due(const data::Batch& batch) const;
  void log_progress(int64_t epoch, const data::Batch& batch, const StepOutcome& step,
                    ProgressWindow& window);

  // End of an epoch: the cursor moves to the next epoch (a truncated epoch does not roll over by
  // itself); the evaluation every eval_every_epochs epochs and after the last, once per epoch.
  void advance_to_next_epoch(int64_t epoch);
  bool evaluation_due(int64_t epoch) const;
  void evaluate(int64_t epoch);

  // A checkpoint every checkpoint_every_batches steps (mid-epoch; every epoch's end has one).
  bool checkpoint_due() const;
  void save_checkpoint();

  // --stop-after-batches: the run has done the steps asked for. stop() says so and returns the
  // exit code (0); the checkpoint must have been written.
  bool stop_requested() const;
  int stop() const;

  // After the last epoch: the final weights, metrics.json, the closing line and the result
  // table. Returns the exit code (0).
  int finish();

 private:
  RunParts parts();
  // What the defense trains with, drawing its mining from `mining`.
  attacks::defenses::TrainingContext context_with(engine::Generator& mining);
  attacks::defenses::StepResult batch_loss(attacks::defenses::TrainingContext& context,
                                           const engine::Tensor& images,
                                           const engine::Tensor& labels);
  void check_finite_loss(double value, int64_t epoch, const data::Batch& batch) const;
  // The start of a step over micro-batches: the clock, the device counters and the passes so
  // far (for record_step_time), the micro-batch counts; the model is put in train mode.
  struct MicroBatchStep {
    std::chrono::steady_clock::time_point start;
    engine::kernels::DeviceCounters counters_at_start;
    int64_t passes_before = 0;
    int64_t total = 0;  // micro-batches of the step, over all ranks
    int64_t local = 0;  // this rank's
    int64_t first = 0;  // this rank's first
  };
  MicroBatchStep start_micro_batch_step();
  // step() when a step has several micro-batches (train.micro_batches, MPI ranks).
  StepOutcome step_in_micro_batches(const data::Batch& batch, int64_t epoch);
  // The same with train.mining_scope "global" (global_mining.h; defined in global_mining_step.cpp).
  StepOutcome step_with_global_mining(const data::Batch& batch, int64_t epoch);
  // Adds micro-batch g's loss value and log values to `sums` (the loss, then the logs, named
  // `log_names` by micro-batch 0) and its passes to `passes`.
  static void add_micro_batch_result(const attacks::defenses::StepResult& result, double value,
                                     int64_t g, std::vector<std::string>& log_names,
                                     std::vector<double>& sums, int64_t& passes);
  // The end of a step over micro-batches: batch-norm buffers, the averaged gradients, loss, log
  // values and passes, the optimizer step and the counters. `sums` holds the loss, then the
  // log values (named `log_names`), each summed over this rank's micro-batches.
  StepOutcome finish_micro_batch_step(const data::Batch& batch, GradientAverager& gradients,
                                      const std::vector<engine::Tensor>& buffers_after_first,
                                      const std::vector<std::string>& log_names,
                                      const std::vector<double>& sums, int64_t passes,
                                      const MicroBatchStep& started);
  void write_progress(const nlohmann::json& record, int64_t epoch, const data::Batch& batch,
                      double passes_per_batch);
  void build(engine::Generator& init_gen);
  void restore_or_start();
  void open_log();
  void print_opening_line() const;
  engine::kernels::DeviceCounters start_step_instruments() const;
  void record_step_time(std::chrono::steady_clock::time_point step_start,
                        const engine::kernels::DeviceCounters& counters_at_start, int64_t images,
                        int64_t passes_before) const;
  metrics::Evaluation evaluate_now(int64_t epoch, bool write_record);

  const TrainConfig& config_;
  const TrainOptions& options_;
  const engine::Device device_;
  std::unique_ptr<data::Dataset> train_set_;
  std::unique_ptr<data::Dataset> test_set_;
  const std::string checkpoint_;  // its path
  std::shared_ptr<models::Model> model_;
  std::unique_ptr<data::BatchSampler> sampler_;
  TrainingLoss loss_;
  std::unique_ptr<attacks::defenses::Defense> defense_;  // null: no defense
  engine::Generator mining_;
  RunState run_;
  std::unique_ptr<engine::optim::Optimizer> optimizer_;
  std::unique_ptr<engine::optim::Optimizer> loss_optimizer_;     // null: the loss has no parameters
  std::unique_ptr<attacks::defenses::TrainingContext> context_;  // what the defense trains with
  int64_t per_epoch_ = 0;
  bool tty_ = false;
  std::unique_ptr<RunLog> log_;  // log.jsonl, log.csv and the TensorBoard files; rank 0 only
  EvalSettings eval_settings_;
  double eval_seconds_ = 0.0;  // this process's time in evaluations, for the closing line
  std::optional<metrics::Evaluation> final_eval_;
  // The ETA on progress lines: this process's mean time per step (evaluations included) times
  // the steps left.
  std::chrono::steady_clock::time_point run_start_;
  int64_t first_step_ = 0;
};

}  // namespace dml
