// The training loop of `dml train` and its checkpoints (SPEC §10, §13; issue 6).
//
// One step: the next SPC-2 batch [a0, p0, a1, p1, ...] (data/sampler.h, loaded by
// data/loader.h), model.train(), embeddings, mining + triplet loss (losses/triplet.h), backward,
// optimizer step. Evaluation: the test split (first eval.max_images images) embedded in eval mode
// and scored by metrics::evaluate_embeddings under the loss metric.
//
// Randomness, all derived from config.seed so a run is a function of its config:
//   model init   Generator(seed)                 (consumed once, before step 0)
//   batches      Spc2Sampler(seed): batch k of epoch e is a function of (seed, e, k)
//   pixels       loader seed = seed (train transforms; Fashion-MNIST has none)
//   mining       Generator(seed ^ kMiningSeedMix), saved as (seed, offset) in checkpoints
//   k-means      seed (NMI)
//
// Checkpoint = ONE safetensors file, <output_dir>/checkpoint.safetensors, written atomically by
// engine::save_safetensors (temp file, fsync, rename, directory fsync): a kill at any moment leaves
// either the previous checkpoint or the new one, never a mix. It holds
//   "model.<name>"      every model state_dict entry (parameters and BN buffers)
//   "optimizer.<key>"   Optimizer::state_dict() (state.<i>.step, exp_avg, exp_avg_sq, ...)
//   __metadata__ "dml_checkpoint": JSON {"format": 1, "config": <resolved config>,
//       "step": <optimizer steps done>, "sampler": <SamplerState: epoch and next batch>,
//       "mining_generator": {"seed", "offset"}, "epochs_evaluated": <last evaluated epoch + 1>}
// Resuming restores all of it and continues from the sampler's cursor, so the weights after the
// last step are bit-identical to an uninterrupted run's (tested: configs/tests, cmp).
// At the end, <output_dir>/model.safetensors holds the final weights (models::save_weights, with
// metadata naming the model), <output_dir>/metrics.json the last evaluation and
// <output_dir>/log.jsonl one JSON object per logged step and per evaluation (appended on resume).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "data/dataset.h"
#include "metrics/evaluate.h"
#include "models/model.h"
#include "tools/dml/config.h"

namespace dml {

struct TrainOptions {
  bool resume = false;
  // Debug/test hook: after this many optimizer steps (counted over the whole run), write a
  // checkpoint and return as if interrupted (0 = never).
  int64_t stop_after_batches = 0;
};

// Runs (or resumes) training; returns the process exit code. Throws UsageError for config problems
// found late (missing dataset, resume against a different config) and engine::Error for runtime
// failures (NaN loss, I/O).
int train(const TrainConfig& config, const TrainOptions& options);

std::string checkpoint_path(const std::string& output_dir);

// The model description stored with weights ("dml_model" metadata): name, embedding_dim,
// bn_branches, and the data and metric it was trained for.
nlohmann::json model_metadata(const TrainConfig& config);

// Benign evaluation shared by `dml train` and `dml eval`: the first max_images images of `test`
// (0 = all) embedded in eval mode, scored with metrics::evaluate_embeddings under `metric`
// (query set = gallery = those images; k-means seeded with `seed`).
struct EvalSettings {
  std::string metric = "N";
  int64_t max_images = 0;
  int64_t batch_size = 256;
  uint64_t seed = 0;
};
metrics::Evaluation evaluate_model(models::Model& model, const data::Dataset& test,
                                   const EvalSettings& settings);

// The result table on stdout (percent, as `dml metrics` prints it).
void print_metrics_table(const metrics::Evaluation& e, const std::string& title);

}  // namespace dml
