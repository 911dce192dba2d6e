// Loading a model trained by `dml train` for the commands that use one (eval, attack, ers).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "engine/device.h"
#include "engine/precision.h"
#include "losses/distance.h"
#include "models/model.h"
#include "models/registry.h"
#include "tools/dml/args.h"

namespace dml {

struct TrainedModel {
  std::shared_ptr<models::Model> model;  // weights loaded, on the requested device, eval mode
  models::ModelConfig config;
  std::string data = "fashion-mnist";  // the dataset it was trained on
  std::string root;                    // that dataset's root in the training config ("" default)
  std::string transform = "robrank";  // its image recipe (data.transform; files before it: robrank)
  losses::Metric metric = losses::Metric::N;  // the training loss's metric
  // The precision policy it was trained in (config key `precision`); fp32 for files written
  // before the policy existed, which all trained in strict FP32.
  engine::Precision precision = engine::Precision::Fp32;
};

// `path` is <output_dir>/checkpoint.safetensors (config in its dml_checkpoint metadata) or
// <output_dir>/model.safetensors (dml_model metadata). UsageError for a missing file or a file
// without either metadata; engine::Error for unreadable or mismatching weights.
TrainedModel load_trained_model(const std::string& path, const engine::Device& device);

// The metadata half of load_trained_model (`model` stays empty): dml_checkpoint's training config
// or dml_model, every field checked and parsed, with errors naming `path` and the field: a known
// model and data set, a metric, precision and transform dml knows, and embedding_dim and
// bn_branches from 1 to `largest_extent`, the largest extent of any tensor in the file (every
// model's last layer has embedding_dim outputs and its batch norms keep [bn_branches, C]
// statistics), so that a corrupt count is refused before a model of that size is built.
// UsageError when neither metadata is there. tests/fuzz/fuzz_model_metadata.cpp feeds it any text.
TrainedModel read_model_metadata(const std::map<std::string, std::string>& metadata,
                                 int64_t largest_extent, const std::string& path);

// --model NAME, --embedding-dim D and --bn-branches K (default 1) of the commands that build a
// model from bare weights (embed, import); check_model_options refuses (UsageError) an unknown
// name, a non-positive D or K, and K > 1 for c2f2 (which has no batch norm).
models::ModelConfig take_model_options(Args& args);
void check_model_options(const models::ModelConfig& config);

// `--bn-branch k` of eval, attack, ers and embed: use BN branch k's running statistics (a
// C2F2-BN or ResNet trained with K = `branches` branches, MDProp / AdvProp-D; 0, the clean branch,
// is the default). UsageError (exit 2) naming the option when k is outside [0, branches).
void select_bn_branch(models::Model& model, int64_t branches, int64_t branch);

}  // namespace dml
