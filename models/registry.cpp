// Model registry (the table is in registry.h).
#include "models/registry.h"

#include <algorithm>

#include "engine/text.h"
#include "kernels/common/check.h"
#include "models/c2f2.h"
#include "models/resnet.h"

namespace models {

std::vector<std::string> model_names() {
  return {"c2f2", "c2f2-bn", "resnet18", "resnet34", "resnet50", "resnet101", "resnet152"};
}

bool is_model_name(const std::string& name) {
  std::vector<std::string> names = model_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::shared_ptr<Model> build_model(const ModelConfig& config, engine::Generator& gen) {
  if (config.name == "c2f2" || config.name == "c2f2-bn") {
    C2F2Options options;
    options.embedding_dim = config.embedding_dim;
    options.batch_norm = config.name == "c2f2-bn";
    options.bn_branches = config.bn_branches;
    options.frozen_bn = config.frozen_bn;
    return std::make_shared<C2F2>(options, gen);
  }
  for (int64_t depth : {18, 34, 50, 101, 152}) {
    if (config.name != "resnet" + std::to_string(depth)) continue;
    ResNetOptions options;
    options.depth = depth;
    options.embedding_dim = config.embedding_dim;
    options.bn_branches = config.bn_branches;
    options.frozen_bn = config.frozen_bn;
    options.init_weights = config.init_weights;
    return std::make_shared<ResNet>(options, gen);
  }
  engine::fail("unknown model '", config.name, "' (known: ", engine::join(model_names()), ")");
}

}  // namespace models
