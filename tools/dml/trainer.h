// The training loop of `dml train` and its checkpoints (docs/config.md, Outputs; issue 6).
//
// One step: the next SPC-2 batch [a0, p0, a1, p1, ...] (data/sampler.h, loaded by
// data/loader.h), model.train(), embeddings, the configured loss (loss.name: triplet,
// contrastive and margin mine triplets with loss.miner first; multi_similarity, arcface, lifted
// and npair take the batch's labels), backward, optimizer step(s). With a defense
// (defense.name != "none", attacks/defenses/defense.h) the recipe's step() replaces "embeddings,
// the configured loss": it crafts its adversarial examples and returns the loss to back-propagate,
// its log values and its cost in passes (PGD steps + 1), which the log and metrics.json record.
// Evaluation: the test split
// (first eval.max_images images) embedded in eval mode and scored by
// metrics::evaluate_embeddings under loss.metric.
//
// Optimizers: the model's (optimizer.*: group 0 = the default group, then one group per
// optimizer.groups entry, config.h) and, for a loss with parameters of its own, the loss's:
//   margin   "beta" (losses/margin.h), plain SGD with loss.margin_loss.beta_lr (robrank's separate
//            SGD optimizer for beta)
//   arcface  "centers" [classes, D] (losses/arcface.h), Adam with loss.arcface.centers_lr, the
//            model optimizer's betas and eps and no weight decay (the criterion's own parameter
//            group in the "Revisiting DML" code MDProp uses; a separate Adam instance computes
//            exactly what a separate group of the same Adam would)
//
// Randomness, all derived from config.seed so a run is a function of its config:
//   model init   Generator(seed)                 (consumed once, before step 0; then ArcFace's
//                                                 centers draw from it, after the model)
//   batches      Spc2Sampler(seed): batch k of epoch e is a function of (seed, e, k)
//   pixels       loader seed = seed (train transforms; Fashion-MNIST has none)
//   mining       Generator(seed ^ kMiningSeedMix), saved as (seed, offset) in checkpoints
//   k-means      seed (NMI)
//
// The loop, train() in trainer.cpp, reads as its steps (sample, step, log, evaluate, checkpoint,
// stop); each is a method of TrainingRun (training_run.h).
//
// Checkpoint: <output_dir>/checkpoint.safetensors, written atomically every
// checkpoint_every_batches steps and at each epoch's end; what it holds and how --resume restores
// it bit-identically: train_checkpoint.h.
// At the end, <output_dir>/model.safetensors holds the final weights (models::save_weights, with
// metadata naming the model), <output_dir>/metrics.json the last evaluation and
// <output_dir>/log.jsonl one JSON object per logged step and per evaluation (appended on resume),
// the same records as log.csv and as TensorBoard scalars in tensorboard/ (run_log.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/dataset.h"
#include "engine/device.h"
#include "kernels/common/device_counters.h"
#include "metrics/evaluate.h"
#include "models/model.h"
#include "tools/dml/config.h"

namespace dml {

// What `dml bench --train` reads back from a run: per-step wall times and device counters, the
// last step's size, and the launches of one profiled step.
struct StepTiming {
  std::vector<double> seconds;
  // Per step: kernel launches, library calls and device allocations during it (CUDA only;
  // kernels/common/device_counters.h).
  std::vector<engine::kernels::DeviceCounters> counters;
  int64_t images = 0;  // images in the batch of the last step
  int64_t passes = 0;  // forward/backward passes of the last step (PGD steps + 1 with a defense)
  // On a CUDA device, the step with this index (counted from 0 in this run) runs under the
  // profiler (kernel_profile.cu) and its launches land in `profile`; -1 = none.
  int64_t profile_step = -1;
  std::vector<engine::kernels::ProfiledLaunch> profile;
};

struct TrainOptions {
  bool resume = false;
  // Debug/test hook: after this many optimizer steps (counted over the whole run), write a
  // checkpoint and return as if interrupted (0 = never).
  int64_t stop_after_batches = 0;
  // Benchmark hook (`dml bench --train`): when set, the wall time of every optimizer step is
  // appended, from the batch's copy to the device to the end of the optimizer step, with the
  // device synchronized so that queued GPU work is counted.
  StepTiming* timing = nullptr;
};

// Runs (or resumes) training; returns the process exit code. Throws UsageError for config problems
// found late (missing dataset, resume against a different config) and engine::Error for runtime
// failures (NaN loss, I/O).
int train(const TrainConfig& config, const TrainOptions& options);

std::string checkpoint_path(const std::string& output_dir);

// A duration for progress lines, rounded to whole seconds: "45s", "12m05s", "4h07m" (seconds are
// dropped from an hour on).
std::string format_duration(double seconds);

// The model description stored with weights ("dml_model" metadata): name, embedding_dim,
// bn_branches, the data (name, root, transform) and metric it was trained for, and dml_commit,
// the revision of the `dml` that wrote it (version.h; informational, never compared).
nlohmann::json model_metadata(const TrainConfig& config);

// Benign evaluation shared by `dml train` and `dml eval`: the first max_images images of `test`
// (0 = all) embedded in eval mode, scored with metrics::evaluate_embeddings under `metric`
// (query set = gallery = those images; k-means seeded with `seed`). The ranking runs on `device`,
// the model's: CUDA ranks with the GPU path of metrics/retrieval.h (docs/metrics.md).
struct EvalSettings {
  metrics::Metric metric = metrics::Metric::N;
  int64_t max_images = 0;
  int64_t batch_size = 256;
  uint64_t seed = 0;
  int64_t kmeans_restarts = 1;  // NMI from the least-inertia of this many k-means runs
  engine::Device device = engine::Device::cpu();
  bool progress = false;  // "eval: 2560/10000 images" on stderr while embedding (dml eval)
};
metrics::Evaluation evaluate_model(models::Model& model, const data::Dataset& test,
                                   const EvalSettings& settings);

// The result table on stdout (percent, as `dml metrics` prints it).
void print_metrics_table(const metrics::Evaluation& e, const std::string& title);
// Its ranking rows (the header, recall@k, map, map_at_r10, map_at_r, r_precision, mrr), which
// `dml metrics` shares; and the per-class averages (PML's avg_of_avgs), printed after pi_ratio.
void print_ranking_rows(const metrics::Evaluation& e);
void print_class_average_rows(const metrics::Evaluation& e);

}  // namespace dml
