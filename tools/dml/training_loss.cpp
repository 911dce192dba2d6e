// The optimizers and the loss of `dml train` (training_loss.h).
#include "tools/dml/training_loss.h"

#include <string>
#include <utility>
#include <vector>

#include "engine/optim/adam.h"
#include "engine/optim/sgd.h"
#include "kernels/common/check.h"

namespace dml {

// The model's optimizer: group 0 = the default group (optimizer.lr, optimizer.weight_decay; empty
// when optimizer.groups take every parameter), group g + 1 = optimizer.groups[g]. Within a
// group, parameters keep the model's order; without groups this is one group of
// model->parameters(), as before groups existed (so older checkpoints' optimizer state loads).
std::unique_ptr<engine::optim::Optimizer> make_optimizer(const OptimizerConfig& o,
                                                         const models::Model& model) {
  std::vector<std::string> names;
  std::vector<engine::Tensor> params;
  for (const auto& [name, param] : model.named_parameters()) {
    names.push_back(name);
    params.push_back(param);
  }
  const std::vector<size_t> group_of = assign_param_groups(names, o.groups);
  std::vector<std::vector<engine::Tensor>> grouped(o.groups.size() + 1);
  for (size_t i = 0; i < params.size(); ++i) grouped[group_of[i]].push_back(params[i]);
  std::vector<double> lrs = {o.lr}, decays = {o.weight_decay};
  for (const ParamGroupConfig& g : o.groups) {
    lrs.push_back(g.lr);
    decays.push_back(g.weight_decay);
  }
  if (o.name == "sgd") {
    std::vector<engine::optim::SgdGroup> groups(grouped.size());
    for (size_t g = 0; g < grouped.size(); ++g) {
      groups[g].params = grouped[g];
      groups[g].options.lr = lrs[g];
      groups[g].options.momentum = o.momentum;
      groups[g].options.dampening = o.dampening;
      groups[g].options.weight_decay = decays[g];
      groups[g].options.nesterov = o.nesterov;
    }
    return std::make_unique<engine::optim::Sgd>(std::move(groups));
  }
  std::vector<engine::optim::AdamGroup> groups(grouped.size());
  for (size_t g = 0; g < grouped.size(); ++g) {
    groups[g].params = grouped[g];
    groups[g].options.lr = lrs[g];
    groups[g].options.beta1 = o.beta1;
    groups[g].options.beta2 = o.beta2;
    groups[g].options.eps = o.eps;
    groups[g].options.weight_decay = decays[g];
  }
  if (o.name == "adamw") return std::make_unique<engine::optim::AdamW>(std::move(groups));
  return std::make_unique<engine::optim::Adam>(std::move(groups));
}

// ArcFace's centers draw from `init_gen` after the model has drawn its weights, so the model's
// initial weights do not depend on the loss.
TrainingLoss make_training_loss(const TrainConfig& config, int64_t num_classes,
                                engine::Generator& init_gen) {
  TrainingLoss loss;
  if (config.loss == Loss::Margin) {
    loss.margin = std::make_shared<losses::MarginLoss>(config.metric, config.margin_loss);
  } else if (config.loss == Loss::ArcFace) {
    loss.arcface = std::make_shared<losses::ArcFaceLoss>(num_classes, config.model.embedding_dim,
                                                         init_gen, config.arcface);
  }
  return loss;
}

// The loss's own parameters get an optimizer of their own: margin's beta plain SGD with
// loss.margin_loss.beta_lr (robrank's separate torch.optim.SGD); ArcFace's centers Adam with
// loss.arcface.centers_lr, optimizer.beta1/beta2/eps and no weight decay (the "Revisiting DML"
// code MDProp builds on: the criterion's own group {params, lr} in the model's Adam). Null when
// the loss has no parameters.
std::unique_ptr<engine::optim::Optimizer> make_loss_optimizer(const TrainConfig& config,
                                                              const TrainingLoss& loss) {
  if (loss.margin) {
    return std::make_unique<engine::optim::Sgd>(
        std::vector<engine::optim::SgdGroup>{loss.margin->param_group()});
  }
  if (loss.arcface) {
    engine::optim::AdamGroup group = loss.arcface->param_group();
    group.options.beta1 = config.optimizer.beta1;
    group.options.beta2 = config.optimizer.beta2;
    group.options.eps = config.optimizer.eps;
    return std::make_unique<engine::optim::Adam>(std::vector<engine::optim::AdamGroup>{group});
  }
  return nullptr;
}

// One batch's loss. The triplet branch is the computation `dml train` has always done (mining
// with the loss margin as semihard's band, then the triplet loss); the other miners' users do the
// same with their own loss. Losses without a miner draw nothing from `mining`.
engine::Tensor loss_on_triplets(const TrainConfig& config, const engine::Tensor& embeddings,
                                const losses::Triplets& triplets) {
  ENGINE_CHECK(config.loss == Loss::Triplet || config.loss == Loss::Contrastive,
               "loss_on_triplets: loss ", loss_name(config.loss), " takes no mined triplets");
  if (config.loss == Loss::Triplet) {
    return losses::triplet_loss(embeddings, triplets, config.metric, config.margin);
  }
  return losses::contrastive_loss(embeddings, triplets, config.metric, config.margin);
}

engine::Tensor compute_loss(const TrainConfig& config, const TrainingLoss& loss,
                            const engine::Tensor& embeddings, const engine::Tensor& labels,
                            engine::Generator& mining) {
  const losses::Metric metric = config.metric;
  switch (config.loss) {
    case Loss::Triplet:
    case Loss::Contrastive: {
      const losses::Triplets triplets =
          losses::mine_triplets(embeddings, labels, config.miner, metric, mining, config.margin);
      return loss_on_triplets(config, embeddings, triplets);
    }
    case Loss::Margin:
      return loss.margin->spc2_loss(embeddings, labels, config.miner, mining);
    case Loss::MultiSimilarity:
      return losses::multi_similarity_loss(embeddings, labels, config.multi_similarity);
    case Loss::ArcFace:
      return loss.arcface->loss(embeddings, labels);
    case Loss::Lifted:
      return losses::lifted_loss(embeddings, labels, metric, config.margin,
                                 config.lifted_norm_weight);
    case Loss::Npair:
      return losses::npair_loss(embeddings, labels, metric, config.npair_norm_weight);
  }
  engine::fail("dml train: unknown loss ", static_cast<int>(config.loss));
}

}  // namespace dml
