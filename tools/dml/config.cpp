// Training configuration: schema, defaults, --set overrides and validation (config.h).
#include "tools/dml/config.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "kernels/common/check.h"
#include "losses/distance.h"
#include "losses/miners.h"
#include "tools/dml/args.h"

namespace dml {

namespace {

using nlohmann::json;

std::string type_name(const json& value) {
  if (value.is_null()) return "null";
  if (value.is_boolean()) return "a boolean";
  if (value.is_number_integer()) return "an integer";
  if (value.is_number()) return "a number";
  if (value.is_string()) return "a string";
  if (value.is_array()) return "an array";
  return "an object";
}

std::string wanted_type(const json& schema) {
  if (schema.is_null()) return "a number or null";
  if (schema.is_boolean()) return "a boolean";
  if (schema.is_number_integer()) return "an integer";
  if (schema.is_number()) return "a number";
  if (schema.is_string()) return "a string";
  return "an object";
}

bool type_matches(const json& schema, const json& value) {
  if (schema.is_null()) return value.is_null() || value.is_number();
  if (schema.is_boolean()) return value.is_boolean();
  if (schema.is_number_integer()) return value.is_number_integer();
  if (schema.is_number()) return value.is_number();
  if (schema.is_string()) return value.is_string();
  return value.is_object();
}

// Copies `user` over `defaults` (a copy of the schema), checking every key and type on the way.
void merge_checked(const json& user, json& defaults, const std::string& prefix,
                   const std::string& source) {
  for (const auto& item : user.items()) {
    const std::string key = prefix.empty() ? item.key() : prefix + "." + item.key();
    auto slot = defaults.find(item.key());
    if (slot == defaults.end()) {
      throw UsageError(source + ": config key '" + key + "' is unknown (see docs/config.md)");
    }
    if (!type_matches(*slot, item.value())) {
      throw UsageError(source + ": config key '" + key + "' must be " + wanted_type(*slot) +
                       ", got " + type_name(item.value()) + " (" + item.value().dump() + ")");
    }
    if (slot->is_object()) {
      merge_checked(item.value(), *slot, key, source);
    } else {
      *slot = item.value();
    }
  }
}

class Checker {
 public:
  Checker(const json& resolved, std::string source)
      : resolved_(resolved), source_(std::move(source)) {}

  const json& at(const std::string& key) const {
    const json* node = &resolved_;
    std::stringstream stream(key);
    std::string part;
    while (std::getline(stream, part, '.')) node = &node->at(part);
    return *node;
  }
  std::string str(const std::string& key) const { return at(key).get<std::string>(); }
  bool flag(const std::string& key) const { return at(key).get<bool>(); }
  // Integers with a lower bound.
  int64_t integer(const std::string& key, int64_t minimum) const {
    const int64_t value = at(key).get<int64_t>();
    if (value < minimum) fail(key, "must be >= " + std::to_string(minimum), at(key));
    return value;
  }
  double number(const std::string& key, double minimum, bool strict) const {
    const double value = at(key).get<double>();
    if (!std::isfinite(value) || value < minimum || (strict && value == minimum)) {
      fail(key, std::string("must be a finite number ") + (strict ? "> " : ">= ") + fmt(minimum),
           at(key));
    }
    return value;
  }
  std::string one_of(const std::string& key, const std::vector<std::string>& allowed) const {
    const std::string value = str(key);
    std::string list;
    for (const std::string& a : allowed) {
      if (a == value) return value;
      list += (list.empty() ? "" : ", ") + a;
    }
    fail(key, "must be one of " + list, at(key));
  }
  [[noreturn]] void fail(const std::string& key, const std::string& why, const json& value) const {
    throw UsageError(source_ + ": config key '" + key + "' " + why + ", got " + value.dump());
  }

 private:
  static std::string fmt(double x) {
    std::ostringstream out;
    out << x;
    return out.str();
  }
  const json& resolved_;
  std::string source_;
};

}  // namespace

json default_config_json() {
  // Key order here is the order of docs/config.md.
  return json{
      {"data", {{"name", "fashion-mnist"}, {"root", ""}, {"num_workers", 2}}},
      {"model",
       {{"name", "c2f2"}, {"embedding_dim", 512}, {"bn_branches", 1}, {"frozen_bn", false}}},
      {"sampler",
       {{"name", "spc2"},
        {"pairs_per_batch", 128},
        {"max_batches_per_epoch", 0},
        {"drop_last", false}}},
      {"loss", {{"name", "triplet"}, {"metric", "N"}, {"miner", "random"}, {"margin", nullptr}}},
      {"optimizer",
       {{"name", "adam"},
        {"lr", 1e-3},
        {"weight_decay", 0.0},
        {"beta1", 0.9},
        {"beta2", 0.999},
        {"eps", 1e-8},
        {"momentum", 0.0},
        {"dampening", 0.0},
        {"nesterov", false}}},
      {"epochs", 8},
      {"eval", {{"every_epochs", 1}, {"max_images", 0}, {"batch_size", 256}}},
      {"log_every_batches", 10},
      {"checkpoint_every_batches", 0},
      {"output_dir", "runs/train"},
      {"seed", 0},
      {"device", "auto"},
  };
}

json load_config_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("config file '" + path + "' cannot be opened (missing or unreadable)");
  try {
    json config = json::parse(in);
    if (!config.is_object()) {
      throw UsageError("config file '" + path + "' must hold a JSON object, got " +
                       type_name(config));
    }
    return config;
  } catch (const json::parse_error& e) {
    throw UsageError("config file '" + path + "' is not valid JSON: " + e.what());
  }
}

void apply_override(json& config, const std::string& assignment) {
  const size_t equals = assignment.find('=');
  if (equals == std::string::npos || equals == 0) {
    throw UsageError("--set '" + assignment + "': expected key.sub=value");
  }
  const std::string key = assignment.substr(0, equals);
  const std::string text = assignment.substr(equals + 1);
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) value = text;  // not JSON: a bare string such as semihard

  // Walk the schema alongside, so a typo is reported as the key it is.
  const json schema = default_config_json();
  const json* schema_node = &schema;
  json* node = &config;
  std::stringstream stream(key);
  std::string part, walked;
  std::vector<std::string> parts;
  while (std::getline(stream, part, '.')) parts.push_back(part);
  for (size_t i = 0; i < parts.size(); ++i) {
    walked += (walked.empty() ? "" : ".") + parts[i];
    if (!schema_node->is_object() || !schema_node->contains(parts[i])) {
      throw UsageError("--set " + assignment + ": config key '" + walked + "' is unknown");
    }
    schema_node = &schema_node->at(parts[i]);
    if (!node->is_object()) *node = json::object();
    node = &(*node)[parts[i]];
  }
  *node = value;
}

TrainConfig resolve_config(const json& config, const std::string& source) {
  if (!config.is_object()) throw UsageError(source + ": the config must be a JSON object");
  json resolved = default_config_json();
  merge_checked(config, resolved, "", source);
  const Checker c(resolved, source);

  TrainConfig t;
  t.resolved = resolved;
  t.data_name = c.str("data.name");
  bool known_data = false;
  for (const std::string& name : data::dataset_names())
    known_data = known_data || name == t.data_name;
  if (!known_data) {
    std::string list;
    for (const std::string& name : data::dataset_names()) list += (list.empty() ? "" : ", ") + name;
    c.fail("data.name", "names an unknown dataset (known: " + list + ")", c.at("data.name"));
  }
  t.data_root = c.str("data.root");
  t.num_workers = c.integer("data.num_workers", 0);

  t.model.name = c.str("model.name");
  if (!models::is_model_name(t.model.name)) {
    std::string list;
    for (const std::string& name : models::model_names()) list += (list.empty() ? "" : ", ") + name;
    c.fail("model.name", "names an unknown model (known: " + list + ")", c.at("model.name"));
  }
  t.model.embedding_dim = c.integer("model.embedding_dim", 1);
  t.model.bn_branches = c.integer("model.bn_branches", 1);
  t.model.frozen_bn = c.flag("model.frozen_bn");
  if (t.model.name == "c2f2" && t.model.bn_branches != 1) {
    c.fail("model.bn_branches", "must be 1 for c2f2 (it has no batch norm; use c2f2-bn)",
           c.at("model.bn_branches"));
  }

  c.one_of("sampler.name", {"spc2"});
  t.pairs_per_batch = c.integer("sampler.pairs_per_batch", 1);
  t.max_batches_per_epoch = c.integer("sampler.max_batches_per_epoch", 0);
  t.drop_last = c.flag("sampler.drop_last");

  t.loss_name = c.one_of("loss.name", {"triplet"});
  t.metric = c.one_of("loss.metric", {"N", "E", "C"});
  t.miner = c.one_of("loss.miner", {"random", "semihard", "softhard", "distance", "hardest"});
  if (!c.at("loss.margin").is_null()) t.margin = c.number("loss.margin", 0.0, false);

  t.optimizer.name = c.one_of("optimizer.name", {"adam", "adamw", "sgd"});
  t.optimizer.lr = c.number("optimizer.lr", 0.0, true);
  t.optimizer.weight_decay = c.number("optimizer.weight_decay", 0.0, false);
  t.optimizer.beta1 = c.number("optimizer.beta1", 0.0, false);
  t.optimizer.beta2 = c.number("optimizer.beta2", 0.0, false);
  if (t.optimizer.beta1 >= 1.0) c.fail("optimizer.beta1", "must be < 1", c.at("optimizer.beta1"));
  if (t.optimizer.beta2 >= 1.0) c.fail("optimizer.beta2", "must be < 1", c.at("optimizer.beta2"));
  t.optimizer.eps = c.number("optimizer.eps", 0.0, true);
  t.optimizer.momentum = c.number("optimizer.momentum", 0.0, false);
  t.optimizer.dampening = c.number("optimizer.dampening", 0.0, false);
  t.optimizer.nesterov = c.flag("optimizer.nesterov");
  if (t.optimizer.nesterov && (t.optimizer.momentum <= 0.0 || t.optimizer.dampening != 0.0)) {
    c.fail("optimizer.nesterov", "needs momentum > 0 and dampening 0", c.at("optimizer.nesterov"));
  }

  t.epochs = c.integer("epochs", 1);
  t.eval_every_epochs = c.integer("eval.every_epochs", 0);
  t.eval_max_images = c.integer("eval.max_images", 0);
  t.eval_batch_size = c.integer("eval.batch_size", 1);
  t.log_every_batches = c.integer("log_every_batches", 1);
  t.checkpoint_every_batches = c.integer("checkpoint_every_batches", 0);
  t.output_dir = c.str("output_dir");
  if (t.output_dir.empty()) c.fail("output_dir", "must not be empty", c.at("output_dir"));
  t.seed = static_cast<uint64_t>(c.integer("seed", 0));
  t.device = c.str("device");
  return t;
}

}  // namespace dml
