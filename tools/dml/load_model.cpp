// Loading a trained model (header: tools/dml/load_model.h).
#include "tools/dml/load_model.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/io/pth.h"
#include "engine/io/safetensors.h"
#include "engine/nn/batch_norm.h"
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
    std::string known;
    for (const std::string& n : models::model_names()) known += (known.empty() ? "" : ", ") + n;
    throw UsageError("unknown model '" + config.name + "' (known: " + known + ")");
  }
  if (config.embedding_dim <= 0) throw UsageError("--embedding-dim must be positive");
  if (config.bn_branches <= 0) throw UsageError("--bn-branches must be positive");
  if (config.name == "c2f2" && config.bn_branches != 1) {
    throw UsageError("c2f2 has no batch norm: --bn-branches needs c2f2-bn");
  }
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
  TrainedModel trained;
  nlohmann::json model;
  const bool is_checkpoint = file.metadata.count("dml_checkpoint") > 0;
  if (is_checkpoint) {
    const nlohmann::json meta =
        nlohmann::json::parse(file.metadata.at("dml_checkpoint"), nullptr, false);
    ENGINE_CHECK(meta.is_object() && meta.contains("config"), path,
                 ": unreadable dml_checkpoint metadata");
    try {
      const nlohmann::json& c = meta.at("config");
      model = {{"name", c.at("model").at("name")},
               {"embedding_dim", c.at("model").at("embedding_dim")},
               {"bn_branches", c.at("model").at("bn_branches")},
               {"data", c.at("data").at("name")},
               {"metric", c.at("loss").at("metric")}};
      trained.root = c.at("data").at("root").get<std::string>();
      trained.transform = c.at("data").value("transform", "robrank");
      trained.precision = c.value("precision", "fp32");
    } catch (const nlohmann::json::exception& e) {
      engine::fail(path, ": malformed dml_checkpoint config: ", e.what());
    }
  } else if (auto it = file.metadata.find("dml_model"); it != file.metadata.end()) {
    model = nlohmann::json::parse(it->second, nullptr, false);
  } else {
    throw UsageError(path +
                     ": no dml_checkpoint or dml_model metadata; give a file written by "
                     "`dml train` (bare weights: make one with `dml import`)");
  }
  std::string metric_text;
  try {
    trained.config.name = model.at("name").get<std::string>();
    trained.config.embedding_dim = integer_at(model, "embedding_dim", path + ": model metadata");
    trained.config.bn_branches = integer_at(model, "bn_branches", path + ": model metadata");
    trained.data = model.at("data").get<std::string>();
    if (!is_checkpoint) trained.root = model.value("root", "");  // none before 2026-11-29: ""
    if (!is_checkpoint) trained.transform = model.value("transform", "robrank");
    if (!is_checkpoint) trained.precision = model.value("precision", "fp32");
    metric_text = model.at("metric").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    engine::fail(path, ": malformed model metadata: ", e.what());
  }
  try {
    trained.metric = losses::parse_metric(metric_text);
  } catch (const engine::Error& e) {  // the file's fault, not an option's: named as such
    engine::fail(path, ": malformed model metadata: metric: ", e.what());
  }
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
