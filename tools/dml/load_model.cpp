// Loading a trained model (header: tools/dml/load_model.h).
#include "tools/dml/load_model.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "data/dataset.h"
#include "data/transforms.h"
#include "engine/io/pth.h"
#include "engine/io/safetensors.h"
#include "engine/nn/batch_norm.h"
#include "engine/precision.h"
#include "engine/text.h"
#include "kernels/common/check.h"
#include "models/weights.h"
#include "tools/dml/args.h"
#include "tools/dml/json_file.h"

namespace dml {

void select_bn_branch(models::Model& model, int64_t branches, int64_t branch) {
  if (branch < 0 || branch >= std::max<int64_t>(branches, 1)) {
    throw UsageError("--bn-branch " + std::to_string(branch) + " is out of range: the model has " +
                     std::to_string(branches) + " BN branch(es), 0 to " +
                     std::to_string(std::max<int64_t>(branches, 1) - 1));
  }
  engine::nn::set_batch_norm_eval_branch(model, branch);
}

models::ModelConfig take_model_options(Args& args) {
  models::ModelConfig config;
  config.name = args.take_string("--model");
  config.embedding_dim = args.take_int("--embedding-dim");
  config.bn_branches = args.take_int("--bn-branches", 1);
  return config;
}

void check_model_options(const models::ModelConfig& config) {
  if (!models::is_model_name(config.name)) {
    throw UsageError("unknown model '" + config.name +
                     "' (known: " + engine::join(models::model_names()) + ")");
  }
  if (config.embedding_dim <= 0) throw UsageError("--embedding-dim must be positive");
  if (config.bn_branches <= 0) throw UsageError("--bn-branches must be positive");
  if (config.name == "c2f2" && config.bn_branches != 1) {
    throw UsageError("c2f2 has no batch norm: --bn-branches needs c2f2-bn");
  }
}

namespace {

// One field of the metadata, parsed by `parse` (which throws engine::Error naming the value), or
// that error prefixed with the file and the field.
template <typename Parse>
auto parsed_field(const std::string& path, const char* field, const std::string& value,
                  Parse parse) {
  try {
    return parse(value);
  } catch (const engine::Error& e) {
    engine::fail(path, ": malformed model metadata: ", field, ": ", e.what());
  }
}

// The model description of a checkpoint: its training config's model, data and loss entries.
nlohmann::json model_of_checkpoint(const std::string& text, const std::string& path,
                                   TrainedModel& trained) {
  const nlohmann::json meta = nlohmann::json::parse(text, nullptr, false);
  ENGINE_CHECK(meta.is_object() && meta.contains("config") && meta.at("config").is_object(), path,
               ": unreadable dml_checkpoint metadata");
  try {
    const nlohmann::json& c = meta.at("config");
    nlohmann::json model = {{"name", c.at("model").at("name")},
                            {"embedding_dim", c.at("model").at("embedding_dim")},
                            {"bn_branches", c.at("model").at("bn_branches")},
                            {"data", c.at("data").at("name")},
                            {"metric", c.at("loss").at("metric")}};
    trained.root = c.at("data").at("root").get<std::string>();
    trained.transform = c.at("data").value("transform", "robrank");
    model["precision"] = c.value("precision", "fp32");
    return model;
  } catch (const nlohmann::json::exception& e) {
    engine::fail(path, ": malformed dml_checkpoint config: ", e.what());
  }
}

}  // namespace

TrainedModel read_model_metadata(const std::map<std::string, std::string>& metadata,
                                 int64_t largest_extent, const std::string& path) {
  TrainedModel trained;
  nlohmann::json model;
  const auto checkpoint = metadata.find("dml_checkpoint");
  const auto bare = metadata.find("dml_model");
  if (checkpoint != metadata.end()) {
    model = model_of_checkpoint(checkpoint->second, path, trained);
  } else if (bare != metadata.end()) {
    model = nlohmann::json::parse(bare->second, nullptr, false);
  } else {
    throw UsageError(path +
                     ": no dml_checkpoint or dml_model metadata; give a file written by "
                     "`dml train` (bare weights: make one with `dml import`)");
  }
  std::string metric, precision;
  try {
    ENGINE_CHECK(model.is_object(), path, ": malformed model metadata: not a JSON object");
    trained.config.name = model.at("name").get<std::string>();
    trained.config.embedding_dim = integer_at(model, "embedding_dim", path + ": model metadata");
    trained.config.bn_branches = integer_at(model, "bn_branches", path + ": model metadata");
    trained.data = model.at("data").get<std::string>();
    metric = model.at("metric").get<std::string>();
    precision = model.value("precision", "fp32");  // none before the policy: all trained in fp32
    if (checkpoint == metadata.end()) {
      trained.root = model.value("root", "");  // none before 2026-11-29: ""
      trained.transform = model.value("transform", "robrank");
    }
  } catch (const nlohmann::json::exception& e) {
    engine::fail(path, ": malformed model metadata: ", e.what());
  }
  if (!models::is_model_name(trained.config.name)) {
    engine::fail(path, ": malformed model metadata: unknown model '", trained.config.name, "'");
  }
  if (!data::is_dataset_name(trained.data)) {
    engine::fail(path, ": malformed model metadata: unknown data set '", trained.data, "'");
  }
  // Every model ends in a layer of embedding_dim outputs and keeps each batch norm's statistics
  // as [bn_branches, channels], so both counts are extents of tensors in the file. Checked before
  // a model of that size is built: a corrupt count must not allocate a network of any size.
  for (const auto& [field, count] :
       {std::pair<const char*, int64_t>{"embedding_dim", trained.config.embedding_dim},
        {"bn_branches", trained.config.bn_branches}}) {
    ENGINE_CHECK(count > 0 && count <= largest_extent, path, ": malformed model metadata: ", field,
                 " ", count, " is not between 1 and ", largest_extent,
                 ", the largest extent of the file's tensors");
  }
  trained.metric = parsed_field(path, "metric", metric,
                                [](const std::string& text) { return losses::parse_metric(text); });
  trained.precision = parsed_field(path, "precision", precision, [](const std::string& text) {
    return engine::parse_precision(text);
  });
  (void)parsed_field(path, "transform", trained.transform,
                     [](const std::string& text) { return data::parse_transform_recipe(text); });
  return trained;
}

TrainedModel load_trained_model(const std::string& path, const engine::Device& device) {
  require_input_file(path, "--checkpoint");
  if (engine::is_torch_checkpoint_path(path)) {
    throw UsageError(path +
                     ": a PyTorch checkpoint holds weights without dml's model metadata; give a "
                     "file written by `dml train`, or make one of these weights with `dml "
                     "import`");
  }
  const engine::SafetensorsFile file = engine::read_safetensors(path);
  int64_t largest_extent = 0;
  for (const auto& [name, raw] : file.tensors) {
    for (const int64_t extent : raw.shape) largest_extent = std::max(largest_extent, extent);
  }
  TrainedModel trained = read_model_metadata(file.metadata, largest_extent, path);
  const bool is_checkpoint = file.metadata.count("dml_checkpoint") > 0;
  std::map<std::string, engine::Tensor> weights;
  for (const auto& [name, raw] : file.tensors) {
    if (!is_checkpoint) {
      weights[name] = engine::tensor_from_raw(raw, path + ": " + name);
    } else if (name.rfind("model.", 0) == 0) {
      weights[name.substr(6)] = engine::tensor_from_raw(raw, path + ": " + name);
    }
  }
  models::ModelConfig config = trained.config;
  config.init_weights = false;  // every weight is loaded next
  trained.model = models::build_model(config);
  models::load_weights(*trained.model, weights, path);
  trained.model->to(device);
  trained.model->eval();
  return trained;
}

}  // namespace dml
