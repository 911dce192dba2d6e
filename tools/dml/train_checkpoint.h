// The checkpoint of `dml train` (docs/config.md, Outputs; issue 6).
//
// Checkpoint = ONE safetensors file, <output_dir>/checkpoint.safetensors, written atomically by
// engine::save_safetensors (temp file, fsync, rename, directory fsync): a kill at any moment leaves
// either the previous checkpoint or the new one, never a mix. It holds
//   "model.<name>"      every model state_dict entry (parameters and BN buffers)
//   "optimizer.<key>"   Optimizer::state_dict() (state.<i>.step, exp_avg, exp_avg_sq, ...)
//   "loss.<name>"       margin and arcface only: the loss's parameters ("loss.beta",
//                       "loss.centers")
//   "loss_optimizer.<key>"  margin and arcface only: the loss optimizer's state_dict()
//   "defense.<key>"     the defense's state (HM: "hm_previous_loss")
//   __metadata__ "dml_checkpoint": JSON {"format": 1, "config": <resolved config>,
//       "step": <optimizer steps done>, "sampler": <SamplerState: epoch and next batch>,
//       "mining_generator": {"seed", "offset"}, "epochs_evaluated": <last evaluated epoch + 1>,
//       "passes": <forward/backward passes so far>, "log_window": <loss sum, batches and passes
//       since the last log record>}
// Resuming restores all of it and continues from the sampler's cursor, so the weights after the
// last step are bit-identical to an uninterrupted run's (tested: tests/CMakeLists.txt
// tools.dml_train_*, tests/tools/train_losses_test.cpp). The stored config is resolved again
// before it is compared with the run's, so checkpoints written before a key was added to the
// schema still resume (the new key's default reproduces the old behaviour).
#pragma once

#include <cstdint>
#include <string>

#include "attacks/defenses/defense.h"
#include "data/sampler.h"
#include "engine/optim/optimizer.h"
#include "engine/random.h"
#include "models/model.h"
#include "tools/dml/config.h"
#include "tools/dml/training_loss.h"

namespace dml {

// The counters of a run that a checkpoint carries beside the model and optimizer state.
struct RunState {
  int64_t step = 0;  // optimizer steps done
  int64_t epochs_evaluated = 0;
  int64_t passes = 0;  // forward/backward passes spent (defense.h StepResult::passes), all steps
  // The batches since the last log record, whose means the next record reports; checkpointed so a
  // resume between two records logs the same means as an uninterrupted run.
  double window_loss_sum = 0.0;
  int64_t window_batches = 0;
  int64_t window_passes = 0;
};

// The state of a run that save_checkpoint writes and restore_checkpoint reads back into.
struct RunParts {
  models::Model& model;
  const TrainingLoss& loss;             // its module (margin's beta, arcface's centers), if any
  attacks::defenses::Defense* defense;  // null: no defense
  data::BatchSampler& sampler;
  engine::Generator& mining;
  RunState& run;
};

// The optimizers' states as a checkpoint holds them: the optimizers are built after the model
// has moved to its device, so restore_checkpoint hands these over for load_state_dict.
struct OptimizerStates {
  engine::optim::OptimizerState model;
  engine::optim::OptimizerState loss;  // margin and arcface only
};

// Writes `path` atomically. `loss_optimizer` is null unless the loss has parameters.
void save_checkpoint(const std::string& path, const TrainConfig& config, const RunParts& parts,
                     const engine::optim::Optimizer& optimizer,
                     const engine::optim::Optimizer* loss_optimizer);

// Restores everything of `parts` from `path` and returns the optimizers' states. UsageError when
// the checkpoint's config differs from `config` in a key that changes results; engine::Error
// (naming the file) for a missing, unreadable or mismatching checkpoint.
OptimizerStates restore_checkpoint(const std::string& path, const TrainConfig& config,
                                   const RunParts& parts);

}  // namespace dml
