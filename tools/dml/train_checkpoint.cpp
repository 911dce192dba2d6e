// The checkpoint of `dml train`: writing it, and reading it back on --resume (design:
// train_checkpoint.h).
#include "tools/dml/train_checkpoint.h"

#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>

#include "engine/dist/communicator.h"
#include "engine/io/safetensors.h"
#include "kernels/common/check.h"
#include "tools/dml/args.h"
#include "tools/dml/json_file.h"

namespace dml {

namespace {

using nlohmann::json;

constexpr int kCheckpointFormat = 1;

// Keys that may change between a run and its resume without changing the computation. A run is
// identified by what it computes, not by where it lies: output_dir may differ (a moved or copied
// run folder resumes).
const char* const kResumeFreeKeys[] = {
    "epochs", "eval", "log_every_batches", "checkpoint_every_batches", "device", "output_dir"};

json without_free_keys(json config) {
  for (const char* key : kResumeFreeKeys) config.erase(key);
  return config;
}

// The first key (dotted) whose value differs between two resolved configs, "" if none.
std::string first_difference(const json& a, const json& b, const std::string& prefix) {
  for (const auto& item : a.items()) {
    const std::string key = prefix.empty() ? item.key() : prefix + "." + item.key();
    if (!b.contains(item.key())) return key;
    const json& other = b.at(item.key());
    if (item.value().is_object() && other.is_object()) {
      std::string inner = first_difference(item.value(), other, key);
      if (!inner.empty()) return inner;
    } else if (item.value() != other) {
      return key;
    }
  }
  for (const auto& item : b.items()) {
    if (!a.contains(item.key())) return prefix.empty() ? item.key() : prefix + "." + item.key();
  }
  return "";
}

uint64_t parse_u64(const json& value, const std::string& what) {
  const std::string text = value.get<std::string>();
  size_t used = 0;
  const unsigned long long parsed = std::stoull(text, &used);
  ENGINE_CHECK(used == text.size(), what, ": not an unsigned integer: '", text, "'");
  return parsed;
}

// The micro-batches of a step and the ranks that run them are decided per rank count
// (data_parallel.h), so a run resumes only with the world size that wrote its checkpoint.
void check_world_size(int64_t stored, const std::string& path) {
  const int ranks = engine::dist::world().size;
  if (stored == ranks) return;
  throw UsageError("--resume: the checkpoint " + path + " was written by a run of " +
                   std::to_string(stored) + (stored == 1 ? " process" : " MPI ranks") +
                   ", and this run has " + std::to_string(ranks) +
                   (ranks == 1 ? " process" : " MPI ranks") + "; resume it with " +
                   (stored == 1 ? std::string("one process (no mpirun)")
                                : "mpirun -n " + std::to_string(stored)) +
                   " (the ranks decide how each step's batch is cut)");
}

}  // namespace

void save_checkpoint(const std::string& path, const TrainConfig& config, const RunParts& parts,
                     const engine::optim::Optimizer& optimizer,
                     const engine::optim::Optimizer* loss_optimizer) {
  const TrainingLoss& loss = parts.loss;
  const RunState& run = parts.run;
  std::map<std::string, engine::Tensor> tensors;
  for (const auto& [name, tensor] : parts.model.state_dict()) tensors["model." + name] = tensor;
  for (const auto& [name, tensor] : optimizer.state_dict()) tensors["optimizer." + name] = tensor;
  if (loss.module() != nullptr) {
    for (const auto& [name, tensor] : loss.module()->state_dict()) tensors["loss." + name] = tensor;
    for (const auto& [name, tensor] : loss_optimizer->state_dict()) {
      tensors["loss_optimizer." + name] = tensor;
    }
  }
  if (parts.defense != nullptr) {
    for (const auto& [name, tensor] : parts.defense->state()) tensors["defense." + name] = tensor;
  }
  json meta = {{"format", kCheckpointFormat},
               {"config", config.resolved},
               {"step", run.step},
               {"epochs_evaluated", run.epochs_evaluated},
               {"passes", run.passes},
               {"log_window",
                {{"loss_sum", run.window_loss_sum},
                 {"batches", run.window_batches},
                 {"passes", run.window_passes}}},
               {"sampler", data::to_json(parts.sampler.state())},
               // As a string: JSON numbers in other readers may lose 64-bit precision.
               {"mining_generator",
                {{"seed", std::to_string(parts.mining.seed)},
                 {"offset", std::to_string(parts.mining.offset)}}}};
  // The number of MPI ranks that trained, written only when it is more than one (a checkpoint
  // without it is a single process's, as every checkpoint before data-parallel training was).
  const int ranks = engine::dist::world().size;
  if (ranks > 1) meta["world_size"] = ranks;
  engine::save_safetensors(path, tensors, {{"dml_checkpoint", meta.dump()}});
}

OptimizerStates restore_checkpoint(const std::string& path, const TrainConfig& config,
                                   const RunParts& parts) {
  OptimizerStates states;
  // A checkpoint whose metadata has a wrong type or a missing key (edited, or from another
  // program) is reported with its path, not as a bare nlohmann or stoull message.
  try {
    if (!std::filesystem::exists(path)) {
      throw UsageError("--resume: no checkpoint at " + path +
                       " (the run wrote none yet: start it again without --resume)");
    }
    engine::SafetensorsFile file = engine::read_safetensors(path);
    auto meta_it = file.metadata.find("dml_checkpoint");
    ENGINE_CHECK(meta_it != file.metadata.end(), path,
                 ": not a dml train checkpoint (no dml_checkpoint metadata)");
    const json meta = json::parse(meta_it->second, nullptr, false);
    ENGINE_CHECK(meta.is_object() && meta.value("format", 0) == kCheckpointFormat, path,
                 ": unreadable dml_checkpoint metadata (format ", kCheckpointFormat, " expected)");
    // The stored config is resolved again, so keys added to the schema since the checkpoint was
    // written take their defaults (which reproduce the old behaviour) instead of differing.
    const json stored = resolve_config(meta.at("config"), path + " (its stored config)").resolved;
    const std::string differs =
        first_difference(without_free_keys(stored), without_free_keys(config.resolved), "");
    if (!differs.empty()) {
      throw UsageError("--resume: config key '" + differs + "' differs from the checkpoint's " +
                       path +
                       " (only epochs, eval.*, log/checkpoint cadence, device and output_dir may)");
    }
    const std::string where = path + ": dml_checkpoint metadata";
    check_world_size(meta.contains("world_size") ? integer_at(meta, "world_size", where) : 1, path);
    std::map<std::string, engine::Tensor> model_state, loss_state, defense_state;
    for (const auto& [name, raw] : file.tensors) {
      engine::Tensor t = engine::tensor_from_raw(raw, path + ": " + name);
      if (name.rfind("model.", 0) == 0) {
        model_state[name.substr(6)] = t;
      } else if (name.rfind("optimizer.", 0) == 0) {
        states.model[name.substr(10)] = t;
      } else if (name.rfind("loss.", 0) == 0 && parts.loss.module() != nullptr) {
        loss_state[name.substr(5)] = t;
      } else if (name.rfind("loss_optimizer.", 0) == 0 && parts.loss.module() != nullptr) {
        states.loss[name.substr(15)] = t;
      } else if (name.rfind("defense.", 0) == 0 && parts.defense != nullptr) {
        defense_state[name.substr(8)] = t;
      } else {
        engine::fail(path, ": unexpected tensor '", name, "' for loss ", loss_name(config.loss));
      }
    }
    parts.model.load_state_dict(engine::nn::StateDict(model_state));
    if (parts.loss.module() != nullptr) {
      parts.loss.module()->load_state_dict(engine::nn::StateDict(loss_state));
    }
    if (parts.defense != nullptr) parts.defense->load_state(defense_state);
    parts.sampler.restore(data::sampler_state_from_json(meta.at("sampler")));
    parts.mining.seed = parse_u64(meta.at("mining_generator").at("seed"), path + " mining seed");
    parts.mining.offset =
        parse_u64(meta.at("mining_generator").at("offset"), path + " mining offset");
    parts.run.step = integer_at(meta, "step", where);
    parts.run.epochs_evaluated = integer_at(meta, "epochs_evaluated", where);
    // Checkpoints written before defenses have no passes: one per step.
    parts.run.passes = meta.contains("passes") ? integer_at(meta, "passes", where) : parts.run.step;
    if (meta.contains("log_window")) {  // absent in older checkpoints: the window restarts
      const json& window = meta.at("log_window");
      parts.run.window_loss_sum = window.at("loss_sum").get<double>();
      parts.run.window_batches = integer_at(window, "batches", where + " log_window");
      parts.run.window_passes = integer_at(window, "passes", where + " log_window");
    }
  } catch (const json::exception& e) {
    engine::fail(path, ": unreadable dml_checkpoint metadata: ", e.what());
  } catch (const std::logic_error& e) {  // stoull's invalid_argument and out_of_range
    engine::fail(path, ": unreadable dml_checkpoint metadata: ", e.what());
  }
  return states;
}

}  // namespace dml
