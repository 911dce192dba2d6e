// The model builder of the model tests: models::build_model on a config naming only what a test
// varies, with its weights drawn from a generator seeded by the test.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/random.h"
#include "models/registry.h"

namespace models_test {

// Model `name` with embedding_dim `dim`, `k` BN branches, frozen BN or not; init = false skips
// the ResNets' kaiming re-init (for tests that overwrite or only count the parameters).
inline std::shared_ptr<models::Model> build_model(uint64_t seed, const std::string& name,
                                                  int64_t dim, int64_t k = 1, bool frozen = false,
                                                  bool init = true) {
  models::ModelConfig config;
  config.name = name;
  config.embedding_dim = dim;
  config.bn_branches = k;
  config.frozen_bn = frozen;
  config.init_weights = init;
  engine::Generator gen(seed);
  return models::build_model(config, gen);
}

}  // namespace models_test
