// dml eval: benign retrieval metrics of a trained model on a dataset split (SPEC §7, §10).
//
//   dml eval --checkpoint FILE [--data NAME] [--split test] [--root DIR] [--json]
//            [--device DEV] [--max-images N] [--metric N|E|C] [--batch-size B] [--seed S]
//
// FILE is a `dml train` output: checkpoint.safetensors (config in its dml_checkpoint metadata)
// or model.safetensors (dml_model metadata). Model, dataset and metric default to the ones it
// was trained with. The JSON keys are those of `dml metrics` (metrics::metrics_json).
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "data/dataset.h"
#include "engine/device.h"
#include "engine/io/safetensors.h"
#include "kernels/common/check.h"
#include "models/registry.h"
#include "models/weights.h"
#include "tools/dml/commands.h"
#include "tools/dml/trainer.h"

namespace dml {

namespace {

const char kUsage[] =
    "usage: dml eval --checkpoint FILE [options]\n"
    "\n"
    "Benign metrics (recall@1/2/4, map, map_at_r10, map_at_r, nmi, pi_ratio) of a model trained\n"
    "by `dml train`, over a whole split (query set = gallery = the split).\n"
    "\n"
    "  --checkpoint FILE   <output_dir>/checkpoint.safetensors or <output_dir>/model.safetensors\n"
    "  --data NAME         dataset (default: the one trained on)\n"
    "  --split SPLIT       train or test (default test)\n"
    "  --root DIR          the dataset's directory (default: the training config's data.root)\n"
    "  --metric N|E|C      distance (default: the training loss metric)\n"
    "  --max-images N      only the first N images (default 0 = all)\n"
    "  --batch-size B      images per forward pass (default 256)\n"
    "  --seed S            k-means++ seed for NMI (default 0; dml train uses its config seed)\n"
    "  --device DEV        cpu, cuda or cuda:N (default: cuda when a GPU is present)\n"
    "  --json              one JSON object with the keys of `dml metrics --json`\n";

struct Described {
  models::ModelConfig model;
  std::string data = "fashion-mnist";
  std::string root;
  std::string metric = "N";
};

Described describe(const engine::SafetensorsFile& file, const std::string& path) {
  Described d;
  nlohmann::json model;
  if (auto it = file.metadata.find("dml_checkpoint"); it != file.metadata.end()) {
    const nlohmann::json meta = nlohmann::json::parse(it->second, nullptr, false);
    ENGINE_CHECK(meta.is_object() && meta.contains("config"), path,
                 ": unreadable dml_checkpoint metadata");
    const nlohmann::json& c = meta.at("config");
    model = {{"name", c.at("model").at("name")},
             {"embedding_dim", c.at("model").at("embedding_dim")},
             {"bn_branches", c.at("model").at("bn_branches")},
             {"data", c.at("data").at("name")},
             {"metric", c.at("loss").at("metric")}};
    d.root = c.at("data").at("root").get<std::string>();
  } else if (auto it2 = file.metadata.find("dml_model"); it2 != file.metadata.end()) {
    model = nlohmann::json::parse(it2->second, nullptr, false);
  } else {
    throw UsageError(path +
                     ": no dml_checkpoint or dml_model metadata; give a file written by "
                     "`dml train` (for bare weights use `dml embed` + `dml metrics`)");
  }
  try {
    d.model.name = model.at("name").get<std::string>();
    d.model.embedding_dim = model.at("embedding_dim").get<int64_t>();
    d.model.bn_branches = model.at("bn_branches").get<int64_t>();
    d.data = model.at("data").get<std::string>();
    d.metric = model.at("metric").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    engine::fail(path, ": malformed model metadata: ", e.what());
  }
  return d;
}

}  // namespace

int run_eval(Args& args) {
  if (args.take_flag("--help") || args.take_flag("-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string path = args.take_string("--checkpoint");
  const std::optional<std::string> data_name = args.take_optional("--data");
  const std::string split = args.take_string("--split", "test");
  const std::optional<std::string> root = args.take_optional("--root");
  const std::optional<std::string> metric = args.take_optional("--metric");
  EvalSettings settings;
  settings.max_images = args.take_int("--max-images", 0);
  settings.batch_size = args.take_int("--batch-size", 256);
  const int64_t seed = args.take_int("--seed", 0);
  const std::optional<std::string> device_text = args.take_optional("--device");
  const bool json = args.take_flag("--json");
  args.finish();
  if (split != "train" && split != "test") {
    throw UsageError("--split must be train or test, got '" + split + "'");
  }
  if (settings.max_images < 0) throw UsageError("--max-images must be >= 0");
  if (settings.batch_size <= 0) throw UsageError("--batch-size must be positive");
  if (seed < 0) throw UsageError("--seed must be >= 0");
  settings.seed = static_cast<uint64_t>(seed);
  engine::Device device = engine::default_device();
  if (device_text) {
    try {
      device = engine::parse_device(*device_text);
    } catch (const engine::Error& e) {
      throw UsageError(std::string("--device: ") + e.what());
    }
  }
  if (device.is_cuda() && device.index >= engine::cuda_device_count()) {
    engine::fail("--device ", device.str(), ": no such CUDA device (", engine::cuda_device_count(),
                 " found); use --device cpu");
  }

  if (!std::filesystem::exists(path)) throw UsageError("--checkpoint " + path + ": no such file");
  const engine::SafetensorsFile file = engine::read_safetensors(path);
  const Described d = describe(file, path);
  settings.metric = metric.value_or(d.metric);
  if (settings.metric != "N" && settings.metric != "E" && settings.metric != "C") {
    throw UsageError("--metric must be N, E or C, got '" + settings.metric + "'");
  }
  std::map<std::string, engine::Tensor> weights;
  const bool is_checkpoint = file.metadata.count("dml_checkpoint") > 0;
  for (const auto& [name, raw] : file.tensors) {
    if (!is_checkpoint) {
      weights[name] = engine::tensor_from_raw(raw, path + ": " + name);
    } else if (name.rfind("model.", 0) == 0) {
      weights[name.substr(6)] = engine::tensor_from_raw(raw, path + ": " + name);
    }
  }
  models::ModelConfig model_config = d.model;
  model_config.init_weights = false;  // every weight is loaded next
  std::shared_ptr<models::Model> model = models::build_model(model_config);
  models::load_weights(*model, weights, path);
  model->to(device);

  const std::string dataset_name = data_name.value_or(d.data);
  std::unique_ptr<data::Dataset> dataset;
  try {
    dataset = data::open_dataset(dataset_name, split, root.value_or(data_name ? "" : d.root));
  } catch (const engine::Error& e) {
    throw UsageError("--data " + dataset_name + ": " + e.what());
  }
  const metrics::Evaluation e = evaluate_model(*model, *dataset, settings);
  if (json) {
    std::printf("%s\n", metrics::metrics_json(e).dump().c_str());
  } else {
    std::printf("checkpoint  %s (%s, D=%lld) on %s\n", path.c_str(), d.model.name.c_str(),
                static_cast<long long>(d.model.embedding_dim), device.str().c_str());
    print_metrics_table(e, dataset_name + " " + split);
  }
  return 0;
}

}  // namespace dml
