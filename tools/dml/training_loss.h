// What `dml train` optimizes: the model's optimizer with its parameter groups, the configured
// loss with the module holding its own parameters (margin's beta, ArcFace's centers) and that
// module's optimizer, and one batch's loss (trainer.h describes how a step uses them).
#pragma once

#include <cstdint>
#include <memory>

#include "engine/nn/module.h"
#include "engine/optim/optimizer.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "losses/losses.h"
#include "models/model.h"
#include "tools/dml/config.h"

namespace dml {

// The configured loss, and the module holding its own parameters for the losses that have some
// (margin: "beta"; arcface: "centers"; null for the others).
struct TrainingLoss {
  std::shared_ptr<losses::MarginLoss> margin;
  std::shared_ptr<losses::ArcFaceLoss> arcface;
  engine::nn::Module* module() const {
    if (margin) return margin.get();
    if (arcface) return arcface.get();
    return nullptr;
  }
};

// The model's optimizer: group 0 = the default group (optimizer.lr, optimizer.weight_decay; empty
// when optimizer.groups take every parameter), group g + 1 = optimizer.groups[g].
std::unique_ptr<engine::optim::Optimizer> make_optimizer(const OptimizerConfig& o,
                                                         const models::Model& model);

// ArcFace's centers draw from `init_gen` after the model has drawn its weights.
TrainingLoss make_training_loss(const TrainConfig& config, int64_t num_classes,
                                engine::Generator& init_gen);

// The loss's own optimizer (margin: SGD on beta; arcface: Adam on the centers); null when the
// loss has no parameters.
std::unique_ptr<engine::optim::Optimizer> make_loss_optimizer(const TrainConfig& config,
                                                              const TrainingLoss& loss);

// One batch's loss from its embeddings [2B, D] and labels (losses without a miner draw nothing
// from `mining`).
engine::Tensor compute_loss(const TrainConfig& config, const TrainingLoss& loss,
                            const engine::Tensor& embeddings, const engine::Tensor& labels,
                            engine::Generator& mining);

// The triplet or contrastive loss (config.loss) on mined `triplets` into `embeddings`: what
// compute_loss does after mining, and what global mining (global_mining.h) evaluates on the
// step's rows.
engine::Tensor loss_on_triplets(const TrainConfig& config, const engine::Tensor& embeddings,
                                const losses::Triplets& triplets);

}  // namespace dml
