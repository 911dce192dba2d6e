// Models by name: the one place `dml`, configs and tests turn a name into a network.
//
//   name       network                                   input           K > 1 / frozen BN
//   c2f2       C2F2 (c2f2.h)                             [1, 28, 28]     no (it has no BN)
//   c2f2-bn    C2F2 with BN after conv1, conv2, fc1      [1, 28, 28]     yes
//   resnet18, resnet34, resnet50, resnet101, resnet152  (resnet.h)   [3, H, W]  yes
//
// Every model maps images in [0, 1] to embeddings [N, embedding_dim] (no L2 normalization).
// Initialization draws from `gen`, so a seed fixes a model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/random.h"
#include "models/model.h"

namespace models {

struct ModelConfig {
  std::string name = "c2f2";
  int64_t embedding_dim = 512;
  int64_t bn_branches = 1;  // K: batch-norm branches (MDProp / AdvProp-D)
  bool frozen_bn = false;   // eval-mode BN while training (robrank's freeze_bn)
  // ResNets only: false skips torchvision's conv init (PyTorch's default stays), about halving
  // the build time, for callers that load weights next. C2F2's init is PyTorch's default anyway.
  bool init_weights = true;
};

// Throws engine::Error for an unknown name (listing the known ones) or invalid options.
std::shared_ptr<Model> build_model(const ModelConfig& config,
                                   engine::Generator& gen = engine::default_generator());

std::vector<std::string> model_names();
bool is_model_name(const std::string& name);

}  // namespace models
