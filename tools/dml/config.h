// Training configuration for `dml train` (SPEC §10; every key documented in docs/config.md).
//
// A config is a JSON object. Loading it is three steps, each failing with dml::UsageError (exit
// code 2) whose message names the file and the key:
//   1. read and parse the file (load_config_file);
//   2. apply `--set key.sub=value` overrides (apply_override): the value is parsed as JSON when it
//      is valid JSON (numbers, true/false, null, quoted strings, arrays), else taken as a string;
//   3. resolve (resolve_config): every key must exist in the schema (default_config_json(), which
//      also supplies the defaults of omitted keys) with the schema's type; then the values are
//      checked (names, ranges) and turned into a TrainConfig.
// The resolved JSON (defaults filled in) is what checkpoints store and what a resume compares.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "models/registry.h"

namespace dml {

struct OptimizerConfig {
  std::string name = "adam";  // adam | adamw | sgd
  double lr = 1e-3;
  double weight_decay = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam, adamw
  double momentum = 0.0, dampening = 0.0;         // sgd
  bool nesterov = false;                          // sgd
};

struct TrainConfig {
  std::string data_name = "fashion-mnist";
  std::string data_root;  // "" = the dataset's default location
  int64_t num_workers = 2;
  models::ModelConfig model;
  int64_t pairs_per_batch = 128;
  int64_t max_batches_per_epoch = 0;  // 0 = the whole epoch
  bool drop_last = false;
  std::string loss_name = "triplet";
  std::string metric = "N";  // N | E | C
  std::string miner = "random";
  std::optional<double> margin;  // absent: the papers' default for the metric
  OptimizerConfig optimizer;
  int64_t epochs = 8;
  int64_t eval_every_epochs = 1;  // 0 = only after the last epoch
  int64_t eval_max_images = 0;    // 0 = the whole test split
  int64_t eval_batch_size = 256;
  int64_t log_every_batches = 10;
  int64_t checkpoint_every_batches = 0;  // 0 = only at the end of each epoch
  std::string output_dir = "runs/train";
  uint64_t seed = 0;
  std::string device = "auto";  // auto | cpu | cuda | cuda:N
  nlohmann::json resolved;      // the whole config with defaults filled in
};

// The schema: every key with its default value (its JSON type is the key's type; null means
// "number or null").
nlohmann::json default_config_json();

// Reads a JSON file; UsageError naming the file on a missing file or a syntax error.
nlohmann::json load_config_file(const std::string& path);

// "optimizer.lr=0.01" sets config["optimizer"]["lr"] = 0.01. UsageError on a malformed
// assignment or a key not in the schema.
void apply_override(nlohmann::json& config, const std::string& assignment);

// Validates `config` against the schema and the value rules; `source` (the file) prefixes the
// messages: "<source>: config key 'optimizer.lrr' is unknown".
TrainConfig resolve_config(const nlohmann::json& config, const std::string& source);

}  // namespace dml
