// Training configuration: schema, defaults, --set overrides and validation (config.h). The
// defense section is read in config_defense.cpp, with the range checks of config_checker.h.
#include "tools/dml/config.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"
#include "engine/text.h"
#include "kernels/common/check.h"
#include "losses/contrastive.h"
#include "losses/distance.h"
#include "losses/lifted.h"
#include "losses/miners.h"
#include "losses/npair.h"
#include "tools/dml/args.h"
#include "tools/dml/config_checker.h"
#include "tools/dml/config_defense.h"
#include "tools/dml/json_file.h"

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
  if (schema.is_array()) return "an array";
  return "an object";
}

bool type_matches(const json& schema, const json& value) {
  if (schema.is_null()) return value.is_null() || value.is_number();
  if (schema.is_boolean()) return value.is_boolean();
  if (schema.is_number_integer()) return value.is_number_integer();
  if (schema.is_number()) return value.is_number();
  if (schema.is_string()) return value.is_string();
  if (schema.is_array()) return value.is_array();
  return value.is_object();
}

// The keys of one optimizer.groups entry (match is required; null lr and weight_decay mean the
// optimizer's).
json param_group_schema() {
  return json{{"match", ""}, {"lr", nullptr}, {"weight_decay", nullptr}};
}

// Copies `user` over `defaults` (a copy of the schema), checking every key and type on the way.
// Arrays (optimizer.groups) are copied whole; resolve_config checks their elements.
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

// Whether a loss accepts batches in any layout (the others read SPC-2's [a0, p0, a1, p1, ...]).
bool loss_takes_any_batch(const TrainConfig& t) {
  return t.loss == Loss::ArcFace ||
         (t.loss == Loss::MultiSimilarity && !t.multi_similarity.spc2_anchors);
}

bool loss_uses_miner(Loss loss) {
  return loss == Loss::Triplet || loss == Loss::Contrastive || loss == Loss::Margin;
}

// Checks every optimizer.groups entry, fills its defaults in place (so the resolved config and
// checkpoints hold complete groups) and returns the groups with the optimizer's lr and weight
// decay where an entry leaves them null.
std::vector<ParamGroupConfig> resolve_param_groups(json& groups, const OptimizerConfig& optimizer,
                                                   const std::string& source) {
  std::vector<ParamGroupConfig> out;
  for (size_t i = 0; i < groups.size(); ++i) {
    const std::string key = "optimizer.groups[" + std::to_string(i) + "]";
    if (!groups[i].is_object()) {
      throw UsageError(source + ": config key '" + key +
                       "' must be an object {\"match\": PREFIX, \"lr\": .., \"weight_decay\": ..}, "
                       "got " +
                       groups[i].dump());
    }
    if (!groups[i].contains("match")) {
      throw UsageError(source + ": config key '" + key +
                       ".match' is missing (the prefix of the parameter names the group takes, "
                       "e.g. \"fc2.\")");
    }
    json filled = param_group_schema();
    merge_checked(groups[i], filled, key, source);
    const ConfigChecker c(filled, source, key + ".");
    ParamGroupConfig group;
    group.match = c.str("match");
    if (group.match.empty()) {
      c.fail("match", "must not be empty (set optimizer.lr to change every parameter)",
             c.at("match"));
    }
    // lr 0 is allowed here: it freezes the group's parameters.
    group.lr = c.at("lr").is_null() ? optimizer.lr : c.number("lr", 0.0, false);
    group.weight_decay = c.at("weight_decay").is_null() ? optimizer.weight_decay
                                                        : c.number("weight_decay", 0.0, false);
    groups[i] = filled;
    out.push_back(group);
  }
  return out;
}

// The most epochs a config may ask for: with any data set's batches per epoch, the step count
// stays far inside int64.
constexpr int64_t kMaxEpochs = 1000000;

// Every loss with its config name, in docs/config.md order.
const std::vector<std::pair<std::string, Loss>>& loss_table() {
  static const std::vector<std::pair<std::string, Loss>> table = {
      {"triplet", Loss::Triplet}, {"contrastive", Loss::Contrastive},
      {"margin", Loss::Margin},   {"multi_similarity", Loss::MultiSimilarity},
      {"arcface", Loss::ArcFace}, {"lifted", Loss::Lifted},
      {"npair", Loss::Npair}};
  return table;
}

}  // namespace

const std::vector<std::string>& loss_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& entry : loss_table()) out.push_back(entry.first);
    return out;
  }();
  return names;
}

Loss parse_loss(const std::string& name) {
  for (const auto& [known_name, loss] : loss_table()) {
    if (name == known_name) return loss;
  }
  engine::fail("unknown loss '", name, "'");
}

const char* loss_name(Loss loss) {
  for (const auto& entry : loss_table()) {
    if (entry.second == loss) return entry.first.c_str();
  }
  return "?";
}

json default_config_json() {
  const losses::MarginLossOptions margin;
  const losses::MultiSimilarityOptions multi_similarity;
  const losses::ArcFaceOptions arcface;
  // Key order here is the order of docs/config.md.
  return json{
      {"data",
       {{"name", "fashion-mnist"}, {"root", ""}, {"num_workers", 2}, {"transform", "robrank"}}},
      {"model",
       {{"name", "c2f2"},
        {"embedding_dim", 512},
        {"bn_branches", 1},
        {"frozen_bn", false},
        {"pretrained", ""},
        {"pretrained_skip", json::array({"fc."})},
        {"aux_bn_noise", 0.0}}},
      {"sampler",
       {{"name", "spc2"},
        {"pairs_per_batch", 128},
        {"classes_per_batch", 32},
        {"images_per_class", 2},
        {"with_replacement", false},
        {"max_batches_per_epoch", 0},
        {"drop_last", false}}},
      {"loss",
       {{"name", "triplet"},
        {"metric", "N"},
        {"miner", "random"},
        {"margin", nullptr},
        // The losses' own defaults (the papers', robrank's), so there is one place for each.
        {"margin_loss", {{"beta", margin.beta}, {"beta_lr", margin.beta_lr}}},
        {"multi_similarity",
         {{"alpha", multi_similarity.alpha},
          {"beta", multi_similarity.beta},
          {"lambda", multi_similarity.lambda},
          {"epsilon", multi_similarity.epsilon},
          {"spc2_anchors", multi_similarity.spc2_anchors}}},
        {"arcface",
         {{"scale", arcface.scale},
          {"centers_lr", arcface.centers_lr},
          {"revisiting_compat", arcface.revisiting_compat}}},
        {"lifted", {{"norm_weight", losses::kLiftedNormWeight}}},
        {"npair", {{"norm_weight", losses::kNpairNormWeight}}}}},
      {"optimizer",
       {{"name", "adam"},
        {"lr", 1e-3},
        {"weight_decay", 0.0},
        {"beta1", 0.9},
        {"beta2", 0.999},
        {"eps", 1e-8},
        {"momentum", 0.0},
        {"dampening", 0.0},
        {"nesterov", false},
        {"groups", json::array()}}},
      {"defense", defense_schema()},
      {"train", {{"micro_batches", 1}, {"mining_scope", "local"}, {"batch_norm", "per_replica"}}},
      {"epochs", 8},
      {"eval",
       {{"every_epochs", 1}, {"max_images", 0}, {"batch_size", 256}, {"kmeans_restarts", 1}}},
      {"log_every_batches", 10},
      {"checkpoint_every_batches", 0},
      {"output_dir", "runs/train"},
      {"seed", 0},
      {"device", "auto"},
      {"precision", "fp32"},
  };
}

json load_config_file(const std::string& path) {
  return read_json_object_file(path, "config file");
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
    if (schema_node->is_array()) {
      throw UsageError("--set " + assignment + ": config key '" +
                       walked.substr(0, walked.rfind('.')) +
                       "' is a list: set it whole, e.g. --set 'optimizer.groups=[{\"match\": "
                       "\"fc2.\", \"lr\": 0.01}]'");
    }
    if (!schema_node->is_object() || !schema_node->contains(parts[i])) {
      throw UsageError("--set " + assignment + ": config key '" + walked + "' is unknown");
    }
    schema_node = &schema_node->at(parts[i]);
    if (!node->is_object()) *node = json::object();
    node = &(*node)[parts[i]];
  }
  *node = value;
}

namespace {

void resolve_data(const ConfigChecker& c, TrainConfig& t) {
  t.data_name = c.str("data.name");
  if (!data::is_dataset_name(t.data_name)) {
    c.fail("data.name",
           "names an unknown dataset (known: " + engine::join(data::dataset_names()) + ")",
           c.at("data.name"));
  }
  t.data_root = c.str("data.root");
  // A loader thread decodes one batch at a time: more threads than this only waste memory.
  t.num_workers = c.integer_in("data.num_workers", 0, 256);
  t.data_transform = c.one_of("data.transform", {"robrank", "revisiting"});
}

void resolve_model(const ConfigChecker& c, TrainConfig& t) {
  t.model.name = c.str("model.name");
  if (!models::is_model_name(t.model.name)) {
    c.fail("model.name",
           "names an unknown model (known: " + engine::join(models::model_names()) + ")",
           c.at("model.name"));
  }
  t.model.embedding_dim = c.integer("model.embedding_dim", 1);
  t.model.bn_branches = c.integer("model.bn_branches", 1);
  t.model.frozen_bn = c.flag("model.frozen_bn");
  t.pretrained = c.str("model.pretrained");
  t.pretrained_skip.clear();
  for (const json& prefix : c.at("model.pretrained_skip")) {
    if (!prefix.is_string() || prefix.get<std::string>().empty()) {
      c.fail("model.pretrained_skip", "must be a list of non-empty name prefixes (e.g. [\"fc.\"])",
             c.at("model.pretrained_skip"));
    }
    t.pretrained_skip.push_back(prefix.get<std::string>());
  }
  t.aux_bn_noise = c.number("model.aux_bn_noise", 0.0, false);
  if (t.model.name == "c2f2" && t.model.bn_branches != 1) {
    c.fail("model.bn_branches", "must be 1 for c2f2 (it has no batch norm; use c2f2-bn)",
           c.at("model.bn_branches"));
  }
}

void resolve_sampler(const ConfigChecker& c, TrainConfig& t) {
  t.sampler_name = c.one_of("sampler.name", {"spc2", "m_per_class"});
  t.pairs_per_batch = c.integer("sampler.pairs_per_batch", 1);
  t.classes_per_batch = c.integer("sampler.classes_per_batch", 1);
  t.images_per_class = c.integer("sampler.images_per_class", 1);
  t.with_replacement = c.flag("sampler.with_replacement");
  if (t.with_replacement && t.sampler_name != "m_per_class") {
    c.fail("sampler.with_replacement", "applies to sampler m_per_class only",
           c.at("sampler.with_replacement"));
  }
  t.max_batches_per_epoch = c.integer("sampler.max_batches_per_epoch", 0);
  t.drop_last = c.flag("sampler.drop_last");
  if (t.drop_last && t.sampler_name != "spc2") {  // m_per_class batches are always whole
    c.fail("sampler.drop_last", "applies to sampler spc2 only", c.at("sampler.drop_last"));
  }
}

// The margin a loss takes when loss.margin is null; false where the loss has no margin.
bool default_margin_of(Loss loss, losses::Metric metric, double& margin) {
  switch (loss) {
    case Loss::Triplet:
    case Loss::Lifted:
      margin = losses::default_margin(metric);
      return true;
    case Loss::Contrastive:
      margin = losses::kContrastiveMargin;
      return true;
    case Loss::Margin:
      margin = losses::MarginLossOptions().margin;
      return true;
    case Loss::ArcFace:
      margin = losses::ArcFaceOptions().margin;
      return true;
    default:
      return false;
  }
}

void resolve_loss(const ConfigChecker& c, TrainConfig& t) {
  t.loss = parse_loss(c.one_of("loss.name", loss_names()));
  t.metric = losses::parse_metric(c.one_of("loss.metric", {"N", "E", "C"}));
  t.miner = losses::parse_miner(c.one_of("loss.miner", losses::miner_names()));
  if (!loss_uses_miner(t.loss) && t.miner != losses::Miner::Random) {
    c.fail("loss.miner",
           std::string("does not apply to loss '") + loss_name(t.loss) +
               "', which uses no miner (leave it random)",
           c.at("loss.miner"));
  }
  double default_margin = 0.0;
  const bool has_margin = default_margin_of(t.loss, t.metric, default_margin);
  if (c.at("loss.margin").is_null()) {
    t.margin = default_margin;
  } else if (!has_margin) {
    c.fail("loss.margin",
           std::string("does not apply to loss '") + loss_name(t.loss) +
               "', which has no margin (leave it null)",
           c.at("loss.margin"));
  } else {
    t.margin = c.number("loss.margin", 0.0, false);
  }
  t.margin_loss.beta = c.finite("loss.margin_loss.beta");
  t.margin_loss.beta_lr = c.number("loss.margin_loss.beta_lr", 0.0, false);
  t.margin_loss.margin = t.loss == Loss::Margin ? t.margin : t.margin_loss.margin;
  t.multi_similarity.alpha = c.number("loss.multi_similarity.alpha", 0.0, true);
  t.multi_similarity.beta = c.number("loss.multi_similarity.beta", 0.0, true);
  t.multi_similarity.lambda = c.finite("loss.multi_similarity.lambda");
  t.multi_similarity.epsilon = c.number("loss.multi_similarity.epsilon", 0.0, false);
  t.multi_similarity.spc2_anchors = c.flag("loss.multi_similarity.spc2_anchors");
  t.arcface.scale = c.number("loss.arcface.scale", 0.0, true);
  t.arcface.centers_lr = c.number("loss.arcface.centers_lr", 0.0, false);
  t.arcface.revisiting_compat = c.flag("loss.arcface.revisiting_compat");
  t.arcface.margin = t.loss == Loss::ArcFace ? t.margin : t.arcface.margin;
  t.lifted_norm_weight = c.number("loss.lifted.norm_weight", 0.0, false);
  t.npair_norm_weight = c.number("loss.npair.norm_weight", 0.0, false);
}

// `resolved` is the config `c` reads: resolve_param_groups fills the groups' defaults in there.
void resolve_optimizer(const ConfigChecker& c, json& resolved, const std::string& source,
                       TrainConfig& t) {
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
  t.optimizer.groups =
      resolve_param_groups(resolved.at("optimizer").at("groups"), t.optimizer, source);
}

// How the run goes: data parallelism, epochs, evaluation, logging, output, seed, device and
// precision.
void resolve_run(const ConfigChecker& c, TrainConfig& t) {
  // Whether the micro-batches fit the batch and the defense also depends on the number of MPI
  // ranks: checked when training starts (data_parallel.h, check_micro_batches).
  t.micro_batches = c.integer_in("train.micro_batches", 1, 1 << 20);
  t.mining_scope = c.one_of("train.mining_scope", {"local", "global"});
  t.batch_norm = c.one_of("train.batch_norm", {"per_replica", "synchronized"});
  // Bounded so that epochs x batches (the step counter, int64) cannot overflow.
  t.epochs = c.integer_in("epochs", 1, kMaxEpochs);
  t.eval_every_epochs = c.integer("eval.every_epochs", 0);
  t.eval_max_images = c.integer("eval.max_images", 0);
  t.eval_batch_size = c.integer("eval.batch_size", 1);
  t.eval_kmeans_restarts = c.integer_in("eval.kmeans_restarts", 1, 1000);
  t.log_every_batches = c.integer("log_every_batches", 1);
  t.checkpoint_every_batches = c.integer("checkpoint_every_batches", 0);
  t.output_dir = c.str("output_dir");
  if (t.output_dir.empty()) c.fail("output_dir", "must not be empty", c.at("output_dir"));
  t.seed = static_cast<uint64_t>(c.integer("seed", 0));
  t.device = c.str("device");
  if (t.device != "auto") {  // checked with the rest; whether the GPU is there, when training
    try {
      (void)engine::parse_device(t.device);
    } catch (const engine::Error& e) {
      c.fail("device", std::string("must be auto, cpu, cuda or cuda:N (") + e.what() + ")",
             c.at("device"));
    }
  }
  try {
    t.precision = engine::parse_precision(c.str("precision"), "precision");
  } catch (const engine::Error& e) {
    c.fail("precision", "must be fp32, tf32 or bf16", c.at("precision"));
  }
}

}  // namespace

TrainConfig resolve_config(const json& config, const std::string& source) {
  if (!config.is_object()) throw UsageError(source + ": the config must be a JSON object");
  json resolved = default_config_json();
  merge_checked(config, resolved, "", source);
  const ConfigChecker c(resolved, source);

  TrainConfig t;
  resolve_data(c, t);
  resolve_model(c, t);
  resolve_sampler(c, t);
  resolve_loss(c, t);
  resolve_optimizer(c, resolved, source, t);
  if (t.sampler_name == "m_per_class" && !loss_takes_any_batch(t)) {
    c.fail("sampler.name",
           std::string("m_per_class batches have no anchor/partner layout, which loss '") +
               loss_name(t.loss) +
               "' needs (use spc2, or a loss that takes any labeled batch: arcface, or "
               "multi_similarity with spc2_anchors false)",
           c.at("sampler.name"));
  }
  t.defense = resolve_defense(c, t);
  resolve_run(c, t);
  t.resolved = resolved;  // after resolve_param_groups filled the groups in
  return t;
}

std::vector<size_t> assign_param_groups(const std::vector<std::string>& names,
                                        const std::vector<ParamGroupConfig>& groups) {
  std::vector<size_t> group_of(names.size(), 0);
  std::vector<int64_t> taken(groups.size(), 0);
  for (size_t i = 0; i < names.size(); ++i) {
    for (size_t g = 0; g < groups.size(); ++g) {
      if (names[i].rfind(groups[g].match, 0) == 0) {
        group_of[i] = g + 1;
        ++taken[g];
        break;
      }
    }
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    if (taken[g] > 0) continue;
    bool matches_any = false;
    std::vector<std::string> tops;  // top-level module names, in order, once each
    for (const std::string& name : names) {
      matches_any = matches_any || name.rfind(groups[g].match, 0) == 0;
      const std::string top = name.substr(0, name.find('.') + 1);
      if (std::find(tops.begin(), tops.end(), top) == tops.end()) tops.push_back(top);
    }
    throw UsageError("config key 'optimizer.groups[" + std::to_string(g) + "].match' (\"" +
                     groups[g].match + "\") " +
                     (matches_any ? "only matches parameters an earlier group already took"
                                  : "matches no parameter") +
                     "; the model's parameter names start with " + engine::join(tops));
  }
  return group_of;
}

}  // namespace dml
